// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// TestPortLinesKeepDownPorts: the recorded ibsim scan (fixtures/README.md)
// has 3 switches of 36 ports and 4 HCAs; every port line is kept, Down
// ones with their physical state, so a down port can stay a series.
func TestPortLinesKeepDownPorts(t *testing.T) {
	f := parse(t, tool(t, "iblinkinfo-l-ibsim.txt"))
	if len(f.PortLines) != f.Ports {
		t.Fatalf("%d port lines kept, %d counted", len(f.PortLines), f.Ports)
	}
	var sw, down, polling int
	for i, p := range f.PortLines {
		if i > 0 {
			q := f.PortLines[i-1]
			if q.GUID > p.GUID || q.GUID == p.GUID && q.Port >= p.Port {
				t.Fatalf("port lines not sorted at %d: %+v after %+v", i, p, q)
			}
		}
		if p.Switch {
			sw++
		}
		if p.State == infiniband.StateDown {
			down++
			if p.PhysState == infiniband.PhysStatePolling {
				polling++
			}
		} else if p.PhysState != infiniband.PhysStateLinkUp {
			t.Errorf("up port %+v: physical state %d, want LinkUp", p, p.PhysState)
		}
	}
	if sw != 3*36 || down != f.DownPorts || polling != down || down == 0 {
		t.Errorf("switch ports %d (want 108), down %d (counted %d), polling %d", sw, down, f.DownPorts, polling)
	}
}

// TestCountersMatchHost: the swept counters take their names, widths and
// scale from the host's table, so rdma_fabric_port_<x> means rdma_port_<x>.
func TestCountersMatchHost(t *testing.T) {
	want := map[CounterID]struct {
		metric string
		bits   int
		scale  float64
	}{
		SymbolErrors:             {"symbol_errors_total", 16, 1},
		LinkDowned:               {"link_downed_total", 8, 1},
		LocalLinkIntegrityErrors: {"local_link_integrity_errors_total", 4, 1},
		TransmitWait:             {"transmit_wait_total", 32, 1},
		DataReceived:             {"data_received_bytes_total", 0, 4},
	}
	for id, w := range want {
		s := Counters[id].Spec
		if s.Metric != w.metric || s.Bits != w.bits || s.Scale != w.scale {
			t.Errorf("counter %d: %s/%d bits/x%g, want %s/%d/x%g", id, s.Metric, s.Bits, s.Scale, w.metric, w.bits, w.scale)
		}
	}
	seen := map[string]bool{}
	for id, c := range Counters {
		if c.Field == "" || seen[c.Spec.Metric] {
			t.Errorf("counter %d: empty field or duplicate metric %q", id, c.Spec.Metric)
		}
		seen[c.Spec.Metric] = true
	}
}

func TestValueSaturated(t *testing.T) {
	for _, c := range []struct {
		v    Value
		want bool
	}{
		{Value{V: 65535, Bits: 16, Present: true}, true},
		{Value{V: 65534, Bits: 16, Present: true}, false},
		{Value{V: 15, Bits: 4, Present: true}, true},
		{Value{V: 255, Bits: 8, Present: true}, true},
		{Value{V: 1<<32 - 1, Bits: 32, Present: true}, true},
		{Value{V: ^uint64(0), Bits: 64, Present: true}, false},
		{Value{V: 65535, Bits: 16}, false}, // not read
	} {
		if got := c.v.Saturated(); got != c.want {
			t.Errorf("%+v: saturated %v, want %v", c.v, got, c.want)
		}
	}
}

func TestSweepFind(t *testing.T) {
	s := &Sweep{Ports: []PortCounters{
		{PortLine: PortLine{GUID: 1, Port: 1}},
		{PortLine: PortLine{GUID: 1, Port: 2}},
		{PortLine: PortLine{GUID: 2, Port: 1}},
	}}
	if p := s.Find(1, 2); p == nil || p.GUID != 1 || p.Port != 2 {
		t.Errorf("Find(1,2) = %+v", p)
	}
	if p := s.Find(2, 2); p != nil {
		t.Errorf("Find(2,2) = %+v, want nil", p)
	}
}

func TestLinkAt(t *testing.T) {
	f := parse(t, tool(t, "iblinkinfo-l-ibsim.txt"))
	l, peer := f.LinkAt(0x200001, 1) // leaf1 port 1: node01
	if l == nil || peer.Desc != "node01 mlx5_0" || peer.Port != 1 {
		t.Errorf("leaf1/1: %+v peer %+v", l, peer)
	}
	if _, peer := f.LinkAt(0x100001, 1); peer.Desc != "leaf1" || peer.Port != 1 {
		t.Errorf("node01/1 peer %+v", peer)
	}
	if l, _ := f.LinkAt(0x200001, 3); l != nil {
		t.Errorf("a Down port has a link: %+v", l)
	}
}
