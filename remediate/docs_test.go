// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"os"
	"strings"
	"testing"
)

// Every action is documented, in plan order, in the README's table and in
// docs/remediate.md's, with the checks it answers.
func TestDocsListEveryAction(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "<!-- remediate-actions:begin -->")
	table, _, ok2 := strings.Cut(table, "<!-- remediate-actions:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no remediate-actions table")
	}
	doc, err := os.ReadFile("../docs/remediate.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "| `") {
			rows = append(rows, l)
		}
	}
	actions := Actions()
	if len(rows) != len(actions) {
		t.Fatalf("README lists %d actions, there are %d", len(rows), len(actions))
	}
	for i, a := range actions {
		row := "| `" + a.ID() + "` | "
		if !strings.HasPrefix(rows[i], row) {
			t.Errorf("README row %d is %q, want action %s (plan order)", i, rows[i], a.ID())
		}
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/remediate.md has no row for %s", a.ID())
		}
		for _, c := range a.Checks() {
			if !strings.Contains(rows[i], "`"+c+"`") {
				t.Errorf("README row of %s does not name check %s", a.ID(), c)
			}
		}
	}
}
