// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

var updateReadme = flag.Bool("update", false, "rewrite README.md's collector table")

const (
	readmePath     = "../README.md"
	collectorBegin = "<!-- collectors:begin -->\n"
	collectorEnd   = "<!-- collectors:end -->"
)

// collectorsTable renders README's table of collectors from what --help
// shows: the --collector.NAME flags AddFlags declares, in Table's order,
// their default as kingpin parses it and the collector's help.
func collectorsTable(t *testing.T) string {
	t.Helper()
	app := kingpin.New("rdma_doctor", "")
	AddFlags(app)
	var b strings.Builder
	b.WriteString("| collector | default | what it reads |\n|---|---|---|\n")
	for _, s := range Table {
		fl := app.GetFlag("collector." + s.Name)
		if fl == nil {
			t.Fatalf("--help has no --collector.%s", s.Name)
		}
		def := fl.Model().Default
		if len(def) != 1 || (def[0] != "true" && def[0] != "false") {
			t.Fatalf("--collector.%s defaults to %q, want true or false", s.Name, def)
		}
		state := map[string]string{"true": "on", "false": "off"}[def[0]]
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, state, strings.ReplaceAll(s.Help, "|", `\|`))
	}
	return b.String()
}

// TestReadmeCollectors keeps README's table of collectors, each with its
// default, equal to the flags the binary declares, so the table a new
// user reads cannot go stale (go test ./collector -run
// TestReadmeCollectors -update rewrites it).
func TestReadmeCollectors(t *testing.T) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, collectorBegin)
	j := strings.Index(doc, collectorEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no collectors section markers (%q, %q)", readmePath, collectorBegin, collectorEnd)
	}
	want := doc[:i+len(collectorBegin)] + collectorsTable(t) + doc[j:]
	if *updateReadme && want != doc {
		if err := os.WriteFile(readmePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		doc = want
	}
	if want != doc {
		t.Errorf("%s's collector table differs from the collector flags; run go test ./collector -run TestReadmeCollectors -update", readmePath)
	}
}
