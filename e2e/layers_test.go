// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

const modulePrefix = "github.com/rdma-doctor/rdma_doctor/"

// floors are internal/'s folders (docs/architecture.md, Layout), each with
// the floors its packages may import besides their own; a package under
// internal/ but in none of them is an error. dev/ is absent: its test
// helpers and benchmarks may import anything, and the binary none of them.
var floors = map[string][]string{
	"read":  {},
	"host":  {"read"},
	"serve": {"read", "host"},
	"dev":   nil,
}

// floorOf is the floor of a package path relative to the module, "" for a
// package outside internal/ (collector, diagnose, cmd, tools...), and "?"
// for one under internal/ that no floor claims.
func floorOf(rel string) string {
	rest, ok := strings.CutPrefix(rel, "internal/")
	if !ok {
		return ""
	}
	f, _, _ := strings.Cut(rest, "/")
	if _, ok := floors[f]; !ok {
		return "?"
	}
	return f
}

// layerErrors checks each package's non-test imports (path relative to the
// module -> its imports of the module, relative too) against the floors.
func layerErrors(imports map[string][]string) []string {
	var errs []string
	for pkg, imps := range imports {
		from := floorOf(pkg)
		switch {
		case from == "?":
			errs = append(errs, pkg+" is under internal/ but in no floor (read, host, serve, dev)")
			continue
		case from == "" || from == "dev":
			continue
		}
		for _, imp := range imps {
			to := floorOf(imp)
			if to == from {
				continue
			}
			allowed := false
			for _, a := range floors[from] {
				allowed = allowed || a == to
			}
			if !allowed {
				errs = append(errs, pkg+" imports "+imp+": internal/"+from+" imports only "+strings.Join(append([]string{from}, floors[from]...), ", "))
			}
		}
	}
	return errs
}

// TestLayers: internal/'s floors import only downward, so the tree shows
// the architecture: a reader imports no host, server or product package,
// the host no server, and the binary no developer helper.
func TestLayers(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	imports := map[string][]string{}
	count := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], modulePrefix)
		if !ok {
			continue
		}
		count[floorOf(pkg)]++
		imports[pkg] = nil
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, modulePrefix); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	for f := range floors {
		if count[f] == 0 {
			t.Errorf("no package under internal/%s", f)
		}
	}
	for _, e := range layerErrors(imports) {
		t.Error(e)
	}

	cmd = exec.Command("go", "list", "-deps", "./cmd/rdma_doctor")
	cmd.Dir = root
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/rdma_doctor: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, modulePrefix+"internal/dev/") {
			t.Errorf("the binary imports %s, a developer helper", p)
		}
	}
}

// TestLayerErrors: the check bites on each way a floor can be broken.
func TestLayerErrors(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		bad      bool
	}{
		{"internal/read/infiniband", "internal/read/sysattr", false},
		{"internal/read/infiniband", "internal/host/config", true},
		{"internal/read/fabric", "internal/serve/expo", true},
		{"internal/read/fabric", "collector", true},
		{"internal/read/fabric", "internal/dev/testenv", true},
		{"internal/host", "internal/read/fabric", false},
		{"internal/host/config", "internal/read/infiniband", false},
		{"internal/host", "internal/serve/scrape", true},
		{"internal/host", "diagnose", true},
		{"internal/serve/scrape", "internal/read/names", false},
		{"internal/serve/scrape", "collector", true},
		{"internal/dev/demo", "internal/dev/ibsimtest", false},
		{"internal/dev/scrapebench", "collector", false},
		{"collector", "internal/serve/expo", false},
		{"internal/unplaced", "internal/read/names", true}, // in no floor
	} {
		errs := layerErrors(map[string][]string{tc.from: {tc.to}})
		if bad := len(errs) > 0; bad != tc.bad {
			t.Errorf("%s -> %s: errors %q, want bad %v", tc.from, tc.to, errs, tc.bad)
		}
	}
}
