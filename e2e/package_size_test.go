// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxPackageLines is the most non-test lines one package of the binary may
// have (issue 39): a package over it holds more than one concern and is
// split by concern, as diagnose was (docs/architecture.md).
const maxPackageLines = 4000

// TestPackageSize: no package of the binary (`go list -deps
// ./cmd/rdma_doctor`, this module's packages) is over maxPackageLines
// non-test lines. Lines are counted as `wc -l` counts them over every
// non-test .go file of the folder, whatever its build constraints.
func TestPackageSize(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}},{{join .CgoFiles ","}},{{join .IgnoredGoFiles ","}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/rdma_doctor")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/rdma_doctor: %v", err)
	}
	sizes := packageLines(t, out)
	if len(sizes) < 10 {
		t.Fatalf("go list -deps ./cmd/rdma_doctor named %d packages of this module, want the binary's many", len(sizes))
	}
	var over []string
	for pkg, n := range sizes {
		if n > maxPackageLines {
			over = append(over, fmt.Sprintf("%s: %d non-test lines", pkg, n))
		}
	}
	slices.Sort(over)
	for _, o := range over {
		t.Errorf("package %s, over %d: split it by concern (docs/architecture.md)", o, maxPackageLines)
	}
}

// packageLines counts the non-test lines of each package go list printed
// as "import path|dir|file,file,...".
func packageLines(t *testing.T, list []byte) map[string]int {
	t.Helper()
	sizes := map[string]int{}
	for line := range strings.Lines(string(list)) {
		pkg, rest, ok := strings.Cut(strings.TrimSpace(line), "|")
		if !ok {
			continue
		}
		dir, files, ok := strings.Cut(rest, "|")
		if !ok {
			t.Fatalf("go list line %q: want import path|dir|files", line)
		}
		for _, f := range strings.Split(files, ",") {
			if f == "" || !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			sizes[pkg] += bytes.Count(b, []byte("\n"))
		}
	}
	return sizes
}
