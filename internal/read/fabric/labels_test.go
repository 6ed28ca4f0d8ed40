// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// HostileDescs are the recorded ibsim scan's (testdata/ibqueryerrors/
// ibsim16-iblinkinfo.stdout) node descriptions replaced for the label
// policy tests: leaf001 gets 3,000 bytes, a byte that is not UTF-8 among
// them and two-byte characters from there on (a cut that ignored
// character boundaries would split one); host0001 only the invalid byte.
var hostileDescs = strings.NewReplacer(
	"leaf001", "leaf001 \xff"+strings.Repeat("é", 1495)+"x",
	"host0001 mlx5_0", "host0001 \xffmlx5_0",
)

// TestParseLabelPolicy: node descriptions come out of the parser as label
// values (names.Label), on every end and port line that prints them, and
// each distinct one cut is counted once per scan.
func TestParseLabelPolicy(t *testing.T) {
	rec, err := os.ReadFile(fabrictest.Recording("ibsim16-iblinkinfo.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	want := parse(t, rec)
	hostile := hostileDescs.Replace(string(rec))
	if !strings.Contains(hostile, strings.Repeat("é", 1495)) || len("leaf001 \xff"+strings.Repeat("é", 1495)+"x") != 3000 {
		t.Fatal("the recording no longer names leaf001")
	}
	cut := names.Limited(names.Cut)
	f := parse(t, []byte(hostile))
	if n := names.Limited(names.Cut) - cut; n != 2 {
		t.Errorf("%d descriptions counted cut, want 2 (leaf001's and host0001's, once each)", n)
	}
	if f.Describe() != want.Describe() || len(f.PortLines) != len(want.PortLines) {
		t.Fatalf("hostile descriptions: %s, %d port lines; the recording %s, %d", f.Describe(), len(f.PortLines), want.Describe(), len(want.PortLines))
	}
	const leaf1, host1 = 0x200002, 0x100001
	seen := map[uint64]int{}
	check := func(where string, guid uint64, desc string) {
		t.Helper()
		if len(desc) > names.MaxLabelBytes || !utf8.ValidString(desc) {
			t.Errorf("%s: description of %d bytes, valid UTF-8 %v", where, len(desc), utf8.ValidString(desc))
		}
		switch guid {
		case leaf1:
			if !strings.HasPrefix(desc, "leaf001 \uFFFDéé") || len(desc) < names.MaxLabelBytes-1 {
				t.Errorf("%s: leaf001 reads %q", where, desc)
			}
		case host1:
			if desc != "host0001 \uFFFDmlx5_0" {
				t.Errorf("%s: host0001 reads %q", where, desc)
			}
		}
		seen[guid]++
	}
	for i := range f.Links {
		l := &f.Links[i]
		check("link A", l.A.GUID, l.A.Desc)
		check("link B", l.B.GUID, l.B.Desc)
	}
	for i := range f.PortLines {
		check("port line", f.PortLines[i].GUID, f.PortLines[i].Desc)
	}
	if seen[leaf1] == 0 || seen[host1] == 0 {
		t.Errorf("leaf001 seen %d times, host0001 %d: not in the recording?", seen[leaf1], seen[host1])
	}
}

// TestTopologyLabelPolicy: an expected topology file's descriptions are
// matched against the scan's, so they are cut the same way; a link that
// only a description names still matches.
func TestTopologyLabelPolicy(t *testing.T) {
	rec, err := os.ReadFile(fabrictest.Recording("ibsim16-ibnetdiscover.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	long := "leaf001 \xff" + strings.Repeat("é", 1495) + "x"
	topo, err := ParseTopology(strings.NewReader(strings.ReplaceAll(string(rec), `"leaf001"`, `"`+long+`"`)))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, l := range topo.Links {
		for _, e := range []TopoEnd{l.A, l.B} {
			if len(e.Desc) > names.MaxLabelBytes || !utf8.ValidString(e.Desc) {
				t.Errorf("end %d bytes, valid UTF-8 %v", len(e.Desc), utf8.ValidString(e.Desc))
			}
			if e.Desc == names.Label(long) {
				found++
			}
		}
	}
	if found == 0 {
		t.Error("no end carries leaf001's cut description")
	}
}
