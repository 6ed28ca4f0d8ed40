// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/diagnose.md")

const (
	docsPath   = "../../docs/diagnose.md"
	readmePath = "../../README.md"
)

// checkIDs renders the short list of check ids the README carries: every
// id in registry order, wrapped at 80 columns, so a user's page names every
// check in a few lines; their titles and meaning are docs/diagnose.md's
// table.
func checkIDs() string {
	var b strings.Builder
	line := 0
	for i, c := range All() {
		w := "`" + c.ID + "`"
		if i < len(All())-1 {
			w += ","
		}
		if line > 0 && line+1+len(w) > 80 {
			b.WriteString("\n")
			line = 0
		}
		if line > 0 {
			b.WriteString(" ")
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	if line > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// checksTable renders the check catalogue from the registry: docs and code
// cannot drift apart.
func checksTable() string {
	var b strings.Builder
	b.WriteString("| id | title | reads | what it means | remedy | status |\n|---|---|---|---|---|---|\n")
	for _, c := range All() {
		reads := make([]string, len(c.Reads))
		for i, r := range c.Reads {
			reads[i] = r.String()
		}
		status := "implemented"
		if c.Run == nil {
			status = "skips: " + c.Pending
		}
		esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", c.ID, esc(c.Title), strings.Join(reads, ", "), esc(c.Doc), esc(c.Remedy), esc(status))
	}
	return b.String()
}

// limitsTable renders the default counter limits.
func limitsTable() string {
	var b strings.Builder
	b.WriteString("| counter | warn above | fail above |\n|---|---|---|\n")
	for _, n := range config.CounterLimitNames() {
		l := config.DefaultCounterLimits[n]
		f := func(p *uint64) string {
			if p == nil {
				return "–"
			}
			return fmt.Sprint(*p)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", n, f(l.WarnAbove), f(l.FailAbove))
	}
	return b.String()
}

// replaceSection swaps the text between <!-- name:begin --> and
// <!-- name:end -->.
func replaceSection(doc, name, body string) (string, bool) {
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return doc, false
	}
	return doc[:i+len(begin)] + body + doc[j:], true
}

// TestDocsListEveryCheck keeps docs/diagnose.md's check table and default
// limits, and the README's list of check ids, equal to the code
// (go test ./diagnose/checks -run TestDocs -update).
func TestDocsListEveryCheck(t *testing.T) {
	for path, sections := range map[string]map[string]string{
		docsPath:   {"checks": checksTable(), "limits": limitsTable()},
		readmePath: {"check-ids": checkIDs()},
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(b)
		want := doc
		for name, body := range sections {
			var ok bool
			if want, ok = replaceSection(want, name, body); !ok {
				t.Fatalf("%s has no %s section markers", path, name)
			}
		}
		if *update && want != doc {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			doc = want
		}
		if want != doc {
			t.Errorf("%s is out of date with the registered checks; run go test ./diagnose/checks -run TestDocs -update", path)
		}
	}
}
