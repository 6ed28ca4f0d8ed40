// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package ndcache

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
)

// The recorded ibsim fabric (internal/read/fabric/testdata/ibqueryerrors,
// README there): two of its switches and a host port.
const (
	leaf1 = 0x0000000000200002
	leaf4 = 0x0000000000200005
	host3 = 0x0000000000100005 // host0003's port GUID
)

// readIQE is a recording of the ibsim fabric (fabrictest.Recording).
func readIQE(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(fabrictest.Recording(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNDCacheRecorded: the cache ibnetdiscover wrote for the recorded
// ibsim fabric: 6 switches and 15 reachable hosts, each switch's LID and
// port GUIDs as the scan saw them, CA node GUIDs apart from their port
// GUIDs.
func TestNDCacheRecorded(t *testing.T) {
	c, err := Parse(bytes.NewReader(readIQE(t, "ibsim16.cache")), MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	switches, cas := 0, 0
	for _, nd := range c.Nodes {
		switch nd.Type {
		case TypeSwitch:
			switches++
		case TypeCA:
			cas++
		}
	}
	if switches != 6 || cas != 15 {
		t.Errorf("%d switches, %d CAs", switches, cas)
	}
	l4 := c.ByGUID(leaf4)
	if l4 == nil || l4.Desc != "leaf004" || l4.SMALID != 6 || c.ByLID(6) != l4 {
		t.Fatalf("leaf004: %+v", l4)
	}
	if g, ok := l4.LineGUID(3); !ok || g != leaf4 {
		t.Errorf("leaf004 port 3 GUID %#x", g)
	}
	if nd := c.ByPortGUID(host3); nd == nil || nd.GUID == host3 || nd.Type != TypeCA {
		t.Errorf("host0003's port GUID maps to %+v", nd)
	}
}

// TestNDCacheFilter: a filtered cache parses again with the kept nodes,
// the discovering node and no link to a port left out.
func TestNDCacheFilter(t *testing.T) {
	c, err := Parse(bytes.NewReader(readIQE(t, "ibsim16.cache")), MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := c.Filter(&b, func(n *Node) bool { return n.GUID == leaf1 }); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(bytes.NewReader(b.Bytes()), MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Nodes) != 2 || f.ByGUID(leaf1) == nil || f.ByGUID(c.From) == nil {
		t.Fatalf("kept %d nodes", len(f.Nodes))
	}
	in := map[uint64]bool{}
	for _, nd := range f.Nodes {
		for _, p := range nd.Ports {
			in[p.GUID] = true
		}
	}
	for _, nd := range f.Nodes {
		for _, p := range nd.Ports {
			if p.raw[ndPortRemote] != 0 && !in[binary.LittleEndian.Uint64(p.raw[ndPortRemote+1:])] {
				t.Errorf("port 0x%x/%d links to a port not in the cache", p.GUID, p.Num)
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
		if _, err := Parse(bytes.NewReader(b), MaxBytes); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Parse(bytes.NewReader(good), len(good)-1); err == nil {
		t.Error("a cache past the bound was read")
	}
}

func FuzzParseNDCache(f *testing.F) {
	f.Add(readIQE(f, "ibsim16.cache"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(bytes.NewReader(b), 1<<20)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if _, err := c.Filter(&out, func(*Node) bool { return true }); err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(bytes.NewReader(out.Bytes()), 1<<20); err != nil {
			t.Fatalf("a cache that parsed does not parse after filtering: %v", err)
		}
	})
}
