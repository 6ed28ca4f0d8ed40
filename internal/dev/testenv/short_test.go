// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The fast loop's targets exist with the flags CONTRIBUTING.md gives
// them: make short passes -short, while make unit (what make test and CI
// run) and make e2e do not, so the tests Long skips still run there.
func TestLoopTargets(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	contributing, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		short  bool
	}{{"short", true}, {"e2e", false}, {"unit", false}} {
		recipe, ok := makeRecipe(string(mk), c.target)
		if !ok {
			t.Errorf("the Makefile has no %s target", c.target)
			continue
		}
		if !strings.Contains(recipe, "go test") && !strings.Contains(recipe, "$(GO) test") {
			t.Errorf("make %s runs no go test:\n%s", c.target, recipe)
		}
		if got := strings.Contains(recipe, "-short"); got != c.short {
			t.Errorf("make %s passes -short: %v, want %v:\n%s", c.target, got, c.short, recipe)
		}
		if c.target != "unit" && !strings.Contains(string(contributing), "`make "+c.target+"`") {
			t.Errorf("CONTRIBUTING.md does not document make %s", c.target)
		}
	}
}

// makeRecipe is the recipe of target in the Makefile mk: its tab-indented
// lines after "target:".
func makeRecipe(mk, target string) (string, bool) {
	loc := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:.*\n`).FindStringIndex(mk)
	if loc == nil {
		return "", false
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(mk[loc[1]:], "\n") {
		if !strings.HasPrefix(l, "\t") {
			break
		}
		b.WriteString(l)
	}
	return b.String(), true
}
