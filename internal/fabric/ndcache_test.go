// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestNDCacheRecorded: the cache ibnetdiscover wrote for the recorded
// ibsim fabric: 6 switches and 15 reachable hosts, each switch's LID and
// port GUIDs as the scan saw them, CA node GUIDs apart from their port
// GUIDs.
func TestNDCacheRecorded(t *testing.T) {
	c, err := parseNDCache(bytes.NewReader(readIQE(t, "ibsim16.cache")), MaxNDCache)
	if err != nil {
		t.Fatal(err)
	}
	switches, cas := 0, 0
	for _, nd := range c.nodes {
		switch nd.typ {
		case ndTypeSwitch:
			switches++
		case ndTypeCA:
			cas++
		}
	}
	if switches != 6 || cas != 15 {
		t.Errorf("%d switches, %d CAs", switches, cas)
	}
	l4 := c.byGUID[leaf4]
	if l4 == nil || l4.desc != "leaf004" || l4.smaLID != 6 || c.byLID[6] != l4 {
		t.Fatalf("leaf004: %+v", l4)
	}
	if g, ok := l4.lineGUID(3); !ok || g != leaf4 {
		t.Errorf("leaf004 port 3 GUID %#x", g)
	}
	if nd := c.byPortGUID(host3); nd == nil || nd.guid == host3 || nd.typ != ndTypeCA {
		t.Errorf("host0003's port GUID maps to %+v", nd)
	}
}

// TestNDCacheFilter: a filtered cache parses again with the kept nodes,
// the discovering node and no link to a port left out.
func TestNDCacheFilter(t *testing.T) {
	c, err := parseNDCache(bytes.NewReader(readIQE(t, "ibsim16.cache")), MaxNDCache)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := c.filter(&b, func(n *ndNode) bool { return n.guid == leaf1 }); err != nil {
		t.Fatal(err)
	}
	f, err := parseNDCache(bytes.NewReader(b.Bytes()), MaxNDCache)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.nodes) != 2 || f.byGUID[leaf1] == nil || f.byGUID[c.from] == nil {
		t.Fatalf("kept %d nodes", len(f.nodes))
	}
	in := map[uint64]bool{}
	for _, nd := range f.nodes {
		for _, p := range nd.ports {
			in[p.guid] = true
		}
	}
	for _, nd := range f.nodes {
		for _, p := range nd.ports {
			if p.raw[ndPortRemote] != 0 && !in[binary.LittleEndian.Uint64(p.raw[ndPortRemote+1:])] {
				t.Errorf("port 0x%x/%d links to a port not in the cache", p.guid, p.num)
			}
		}
	}
}

// TestNDCacheBadInput: a cache that is not one, truncated, or whose
// counts promise more than it holds is an error, never a panic or a large
// allocation.
func TestNDCacheBadInput(t *testing.T) {
	good := readIQE(t, "ibsim16.cache")
	huge := append([]byte{}, good[:ndHeaderLen]...)
	binary.LittleEndian.PutUint32(huge[8:], 1<<31)
	for name, b := range map[string][]byte{
		"empty":      nil,
		"magic":      append([]byte{1, 2, 3, 4}, good[4:]...),
		"truncated":  good[:len(good)-10],
		"trailing":   append(append([]byte{}, good...), 0),
		"huge count": huge,
	} {
		if _, err := parseNDCache(bytes.NewReader(b), MaxNDCache); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := parseNDCache(bytes.NewReader(good), len(good)-1); err == nil {
		t.Error("a cache past the bound was read")
	}
}

func FuzzParseNDCache(f *testing.F) {
	f.Add(readIQE(f, "ibsim16.cache"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseNDCache(bytes.NewReader(b), 1<<20)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if _, err := c.filter(&out, func(*ndNode) bool { return true }); err != nil {
			t.Fatal(err)
		}
		if _, err := parseNDCache(bytes.NewReader(out.Bytes()), 1<<20); err != nil {
			t.Fatalf("a cache that parsed does not parse after filtering: %v", err)
		}
	})
}
