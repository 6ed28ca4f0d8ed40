// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxPackageLines bounds the non-test Go lines of one package of the
// binary: past it a package has more than one job, and a reader cannot
// hold it (issue 39's bound).
const maxPackageLines = 4000

// oversized are the packages of the binary still over maxPackageLines,
// each with the work that brings it under; a package listed here that is
// under the bound fails the test, so the list only shrinks.
var oversized = map[string]string{
	"diagnose": "issue 39: the engine, the checks by concern and the renderers split into subpackages",
}

// TestPackageSize: no package the binary is built from
// (`go list -deps ./cmd/rdma_doctor`, this module's, the files this
// platform builds) holds more than maxPackageLines non-test lines.
func TestPackageSize(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}} {{join .CgoFiles \" \"}}{{end}}", "./cmd/rdma_doctor")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/rdma_doctor: %v", err)
	}
	const module = "github.com/rdma-doctor/rdma_doctor"
	checked := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(fields) != 3 {
			continue
		}
		pkg, dir, files := fields[0], fields[1], strings.Fields(fields[2])
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		rel = strings.TrimPrefix(rel, "/")
		n := 0
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			n += bytes.Count(b, []byte("\n"))
		}
		checked++
		why, listed := oversized[rel]
		switch {
		case n > maxPackageLines && !listed:
			t.Errorf("%s: %d non-test lines, over %d: split it along one of its jobs", rel, n, maxPackageLines)
		case n <= maxPackageLines && listed:
			t.Errorf("%s: %d non-test lines, under %d: remove it from oversized (%s)", rel, n, maxPackageLines, why)
		}
	}
	if checked == 0 {
		t.Fatal("go list -deps ./cmd/rdma_doctor listed no package of this module")
	}
}
