// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseNameMap: the format of opensm's cl_nodenamemap.c, as
// infiniband-diags' man pages show it (comments, quoted names, an
// unquoted name, a comment after the name, decimal GUIDs).
func TestParseNameMap(t *testing.T) {
	m, err := ParseNameMap(strings.NewReader(`# IB1
# Line cards
0x0008f104003f125c "IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D"

   0x200001	"leaf-1 rack A"   # the first leaf
0x200002 leaf-2
2097152 spine-1 # decimal, as strtoull base 0 reads it
`))
	if err != nil {
		t.Fatal(err)
	}
	want := NameMap{
		0x0008f104003f125c: "IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D",
		0x200001:           "leaf-1 rack A",
		0x200002:           "leaf-2",
		0x200000:           "spine-1",
	}
	if len(m) != len(want) {
		t.Fatalf("got %d names %v, want %v", len(m), m, want)
	}
	for g, n := range want {
		if m[g] != n {
			t.Errorf("0x%x: %q, want %q", g, m[g], n)
		}
	}
}

// TestParseNameMapBadLine: a line infiniband-diags would skip or read
// otherwise is an error naming the line, never a silently missing name.
func TestParseNameMapBadLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0x1 \"a\"\nleaf1 \"x\"\n", `line 2: "leaf1" is not a GUID`},
		{"0x1 \"a\"\n\n0x2\n", "line 3: GUID 0x0000000000000002 without a name"},
		{"0x1 \"\"\n", "line 1: GUID 0x0000000000000001 without a name"},
		{"0x1 \"a\"\n0x1 \"b\"\n", `line 2: GUID 0x0000000000000001 is named "a" on line 1 and "b" here`},
		{"0x1 \"" + strings.Repeat("x", 129) + "\"\n", "line 1: name of GUID 0x0000000000000001 is 129 bytes, over the 128-byte label limit"},
		{"0x1 \"a\xffb\"\n", "line 1: name of GUID 0x0000000000000001 is not UTF-8"},
		{"0x1 \"a\x1bb\"\n", "line 1: name of GUID 0x0000000000000001 holds a control character"},
		{"0x10000000000000000 \"a\"\n", `line 1: "0x10000000000000000" is not a GUID`},
	} {
		_, err := ParseNameMap(strings.NewReader(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
	// The same name twice is no conflict.
	if _, err := ParseNameMap(strings.NewReader("0x1 a\n0x1 \"a\"\n")); err != nil {
		t.Error(err)
	}
}

// TestLoadNameMapNamesFile: the error names the file and the line, on one
// line.
func TestLoadNameMapNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "node-name-map")
	if err := os.WriteFile(p, []byte("0x200001 \"leaf-1\"\nnot-a-guid \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadNameMap(p)
	want := "node name map " + p + `: line 2: "not-a-guid" is not a GUID`
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want one line starting %q", err, want)
	}
	if _, err := LoadNameMap(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "node name map") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestNameMapApply: on the recorded ibsim scan, both ends of every link
// and every port line of a mapped GUID carry the name; the rest keep
// their descriptions.
func TestNameMapApply(t *testing.T) {
	f := parse(t, tool(t, "iblinkinfo-l-ibsim.txt"))
	NameMap{0x200001: "leaf-1 rack A", 0x200000: "spine-1 rack B"}.Apply(f)
	seen := map[string]int{}
	for _, l := range f.Links {
		for _, e := range []End{l.A, l.B} {
			switch e.GUID {
			case 0x200001:
				if e.Desc != "leaf-1 rack A" {
					t.Errorf("link end 0x%x port %d: %q", e.GUID, e.Port, e.Desc)
				}
			case 0x200000:
				if e.Desc != "spine-1 rack B" {
					t.Errorf("link end 0x%x port %d: %q", e.GUID, e.Port, e.Desc)
				}
			}
			seen[e.Desc]++
		}
	}
	for _, p := range f.PortLines {
		if p.GUID == 0x200001 && p.Desc != "leaf-1 rack A" {
			t.Errorf("port line 0x%x/%d: %q", p.GUID, p.Port, p.Desc)
		}
	}
	if seen["leaf1"] > 0 || seen["spine1"] > 0 || seen["leaf-1 rack A"] == 0 || seen["spine-1 rack B"] == 0 || seen["leaf2"] == 0 {
		t.Errorf("descriptions after Apply: %v", seen)
	}
}

// TestRunnerAppliesNames: the runner's published scan carries the names,
// so the collector's series and the diagnose findings, which read it,
// do too.
func TestRunnerAppliesNames(t *testing.T) {
	p := fakeIblinkinfo(t, "cat "+fixturePath("iblinkinfo-l-ibsim.txt")+"\n")
	r := NewRunner(RunnerConfig{Path: p, Names: NameMap{0x200001: "leaf-1 rack A"}})
	r.RunOnce(context.Background())
	st := r.Status()
	if !st.OK || st.Fabric == nil {
		t.Fatalf("status = %+v", st)
	}
	n := 0
	for _, l := range st.Fabric.Links {
		if l.A.GUID == 0x200001 {
			if l.A.Desc != "leaf-1 rack A" {
				t.Errorf("link %d: %q", l.A.Port, l.A.Desc)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no link of 0x200001 in the scan")
	}
}
