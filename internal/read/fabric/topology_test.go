// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"strings"
	"testing"
)

func parseTopo(t *testing.T, b []byte) *Topology {
	t.Helper()
	topo, err := ParseTopology(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestTopologyIbnetdiscover parses the recorded ibnetdiscover output of the
// ibsim fabric and matches it against the recorded iblinkinfo --line scan
// of the same fabric: every scanned link is expected, every expected link
// scanned, by GUID.
func TestTopologyIbnetdiscover(t *testing.T) {
	topo := parseTopo(t, tool(t, "ibnetdiscover-ibsim.txt"))
	if topo.Nodes != 7 || len(topo.Links) != 8 {
		t.Fatalf("nodes %d, links %d; want 7 nodes (3 switches, 4 CAs) and 8 links", topo.Nodes, len(topo.Links))
	}
	// leaf1 port 1 <-> node01 port 1: the switch's port GUID from
	// switchguid=, the CA's port GUID (100001, not its node GUID 100000).
	want := TopoLink{A: TopoEnd{GUID: 0x200001, Desc: "leaf1", Port: 1}, B: TopoEnd{GUID: 0x100001, Desc: "node01 mlx5_0", Port: 1}}
	if i := topo.Find(End{GUID: 0x100001, Port: 1}, End{GUID: 0x200001, Port: 1}); i < 0 || topo.Links[i] != want {
		t.Fatalf("leaf1[1]-node01[1]: index %d, links %+v; want %+v", i, topo.Links, want)
	}
	for _, l := range topo.Links {
		if l.A.GUID == 0 || l.B.GUID == 0 {
			t.Errorf("link %+v: an end without a GUID, though ibnetdiscover prints them all", l)
		}
	}
	scan := parse(t, tool(t, "iblinkinfo-l-ibsim.txt"))
	seen := map[int]bool{}
	for i := range scan.Links {
		l := &scan.Links[i]
		j := topo.Find(l.A, l.B)
		if j < 0 {
			t.Errorf("scanned link %s[%d] <-> %s[%d] not in the expected topology", l.A.Desc, l.A.Port, l.B.Desc, l.B.Port)
			continue
		}
		seen[j] = true
	}
	if len(seen) != len(topo.Links) {
		t.Errorf("%d of %d expected links scanned", len(seen), len(topo.Links))
	}
	// A link that is not cabled is not found.
	if i := topo.Find(End{GUID: 0x200001, Port: 3}, End{GUID: 0x100001, Port: 1}); i >= 0 {
		t.Errorf("leaf1[3]-node01[1] found at %d", i)
	}
}

// TestTopologyByDescription parses ibsim's hand-written fabric file, which
// names nodes without GUIDs: its ends match the scan by description.
func TestTopologyByDescription(t *testing.T) {
	topo := parseTopo(t, tool(t, "ibsim-fabric.net"))
	if len(topo.Links) != 8 {
		t.Fatalf("%d links, want 8", len(topo.Links))
	}
	for _, l := range topo.Links {
		if l.A.GUID != 0 || l.B.GUID != 0 {
			t.Errorf("link %+v has a GUID the file does not print", l)
		}
	}
	scan := parse(t, tool(t, "iblinkinfo-l-ibsim.txt"))
	for i := range scan.Links {
		if l := &scan.Links[i]; topo.Find(l.A, l.B) < 0 {
			t.Errorf("scanned link %s[%d] <-> %s[%d] not matched by description", l.A.Desc, l.A.Port, l.B.Desc, l.B.Port)
		}
	}
}

func TestTopologyErrors(t *testing.T) {
	good := string(tool(t, "ibnetdiscover-ibsim.txt"))
	for name, tc := range map[string]struct{ in, want string }{
		"empty":          {"", "no links"},
		"not the format": {"hello world\n", "line 1: not in ibnetdiscover's format"},
		"port first":     {"[1]\t\"S-x\"[2]\n", "before any Switch or Ca line"},
		"bad port":       {"Switch\t36 \"S-a\"\n[x]\t\"S-b\"[1]\n", "line 2: port line"},
		"two peers":      {"Switch\t36 \"S-a\"\n[1]\t\"S-b\"[1]\n[2]\t\"S-b\"[1]\n", "cabled to both"},
		"bad guid":       {"switchguid=0xzz(zz)\n", "switchguid"},
		"iblinkinfo":     {string(tool(t, "iblinkinfo-l-ibsim.txt")), "line 1: not in ibnetdiscover's format"},
		"too big":        {good + strings.Repeat("#\n", MaxTopologyBytes/2+1), "limit"},
	} {
		_, err := ParseTopology(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

func FuzzParseTopology(f *testing.F) {
	f.Add(tool(f, "ibnetdiscover-ibsim.txt"))
	f.Add(tool(f, "ibsim-fabric.net"))
	f.Fuzz(func(t *testing.T, b []byte) {
		topo, err := ParseTopology(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, l := range topo.Links {
			if topo.Find(End{GUID: l.A.GUID, Desc: l.A.Desc, Port: l.A.Port}, End{GUID: l.B.GUID, Desc: l.B.Desc, Port: l.B.Port}) < 0 {
				t.Fatalf("link %+v not found by its own ends", l)
			}
		}
	})
}
