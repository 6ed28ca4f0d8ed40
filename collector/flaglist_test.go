// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

const flagListPath = "testdata/flags.txt"

// flagList is every flag AddFlags declares, one line each, sorted: its
// name, default, placeholder and help, which is all --help shows of it.
func flagList() string {
	app := kingpin.New("rdma_doctor", "")
	AddFlags(app)
	var lines []string
	for _, fl := range app.Model().Flags {
		if !strings.HasPrefix(fl.Name, "collector.") {
			continue // kingpin's own
		}
		lines = append(lines, fmt.Sprintf("--%s %q %q %s", fl.Name, fl.Default, fl.PlaceHolder, fl.Help))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestFlagList keeps the collector flags, their defaults and help as recorded
// (testdata/flags.txt, first written from main before the flags moved
// into their collectors' files), so moving a flag cannot drop or change
// one (go test ./collector -run TestFlagList -update rewrites it).
func TestFlagList(t *testing.T) {
	got := flagList()
	if *updateReadme {
		if err := os.WriteFile(flagListPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(flagListPath)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("collector flags differ from %s:\ngot:\n%s\nwant:\n%s", flagListPath, got, want)
	}
}

// TestFlagsLiveWithTheirCollector: each collector declares its own flags,
// and only flags named after it (collector.NAME.*), so a flag is found
// beside the collector it configures, as in node_exporter.
func TestFlagsLiveWithTheirCollector(t *testing.T) {
	owned := 0
	for _, s := range Table {
		if s.Flags == nil {
			continue
		}
		app := kingpin.New("test", "")
		s.Flags(app, &Flags{})
		for _, fl := range app.Model().Flags {
			if !strings.HasPrefix(fl.Name, "collector.") {
				continue // kingpin's own
			}
			owned++
			if !strings.HasPrefix(fl.Name, "collector."+s.Name+".") {
				t.Errorf("collector %s declares --%s, not named collector.%s.*", s.Name, fl.Name, s.Name)
			}
		}
	}
	// Every flag but --collector.disable-defaults and the
	// --collector.NAME switches belongs to one collector.
	all := strings.Count(flagList(), "\n")
	if owned != all-1-len(Table) {
		t.Errorf("collectors declare %d flags, AddFlags %d (less disable-defaults and %d switches)", owned, all, len(Table))
	}
}
