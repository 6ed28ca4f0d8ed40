// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeLayout: README's layout table has one row per Go package of the
// module, as `go list ./...` lists them, and no row for a package that is
// gone, so a newcomer's map of the tree is the tree.
func TestReadmeLayout(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	want := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.ToSlash(rel)] = true
	}
	if len(want) == 0 {
		t.Fatal("go list ./... listed no package")
	}

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := layoutRows(t, readme)
	seen := map[string]bool{}
	for _, pkg := range rows {
		if seen[pkg] {
			t.Errorf("README's layout lists %s twice", pkg)
		}
		seen[pkg] = true
		if !want[pkg] {
			t.Errorf("README's layout lists %s, which go list ./... does not", pkg)
		}
	}
	for pkg := range want {
		if !seen[pkg] {
			t.Errorf("package %s has no row in README's layout table", pkg)
		}
	}
}

// layoutRows is the first column of the table under README's "### Layout"
// heading: each row's package path, without its backquotes.
func layoutRows(t *testing.T, readme []byte) []string {
	t.Helper()
	var rows []string
	in, table := false, false
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "### Layout":
			in = true
		case !in:
		case strings.HasPrefix(line, "#"):
			in = false
		case strings.HasPrefix(line, "| package |"), strings.HasPrefix(line, "|---"):
			table = true
		case table && strings.HasPrefix(line, "| `"):
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			rows = append(rows, cell)
		case table:
			in = false
		}
	}
	if len(rows) == 0 {
		t.Fatal("README.md has no layout table under \"### Layout\"")
	}
	return rows
}
