// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/routes"
	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// The blast radius and congestion's root are tested on the recorded
// forwarding tables and scan of the ibsim fat tree (internal/read/fabric/
// testdata/lft: opensm's min-hop tables, 4 leaves, 2 spines, 16 hosts),
// with sweeps of every switch port of that scan whose counters the tests
// set, as the other fabric tests set theirs.

const (
	lftSpine001 = 0x0000000000200000
	lftLeaf001  = 0x0000000000200002
	lftLeaf002  = 0x0000000000200003
)

// lftRoutes reads dump with a dump_fts that prints it, for topo.
func lftRoutes(t *testing.T, topo *fabric.Fabric, dump string) *routes.Status {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out"), []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "dump_fts")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\ncat '"+dir+"/out'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rr := routes.NewReader(routes.Config{DumpFTS: tool, Loop: fabric.Loop{Topology: func() *fabric.Fabric { return topo }}})
	rr.ReadOnce(context.Background())
	st := rr.Status()
	return &st
}

// zeroSweep is a sweep of every switch port of topo, every counter read
// 0 (the data counters 64-bit: the extended PortCounters).
func zeroSweep(start time.Time, topo *fabric.Fabric) *fabric.Sweep {
	sw := &fabric.Sweep{Start: start, Topology: topo, Failures: map[fabric.Reason]int{}}
	for _, pl := range topo.PortLines {
		if !pl.Switch || pl.Port == 0 {
			continue
		}
		pc := fabric.PortCounters{PortLine: pl}
		for id := range fabric.NumCounters {
			bits := uint8(fabric.Counters[id].Spec.Bits)
			if bits == 0 || id == fabric.TransmitWait {
				bits = 32
			}
			if id == fabric.DataTransmitted || id == fabric.DataReceived {
				bits = 64
			}
			pc.Values[id] = fabric.Value{Bits: bits, Present: true}
		}
		sw.Ports = append(sw.Ports, pc)
	}
	return sw
}

// evalBlast runs the fabric checks over the sweeps with the route read st
// (nil: no reader), and returns the report.
func evalBlast(t *testing.T, st *routes.Status, sweeps ...*fabric.Sweep) *diagnose.Report {
	t.Helper()
	e, err := testEvaluator(&config.Config{}, []string{"fabric.*"})
	if err != nil {
		t.Fatal(err)
	}
	h := diagnose.NewHistory(time.Hour, 10)
	var snap *diagnose.Reading
	for i, sw := range sweeps {
		fh := &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: sw, Sweeps: uint64(i + 1)}}
		snap = &diagnose.Reading{Time: sw.Start.Add(time.Second), Host: fh}
		if st != nil {
			snap.Host = routedHost{fh, st}
		}
		h.Add(snap)
	}
	return e.Evaluate(snap, h)
}

// ibrouteCA is ibfindnodesusing's get_hosts_routed, over the recorded
// dump_fts text: the channel adapters a switch's table sends out of port,
// matched with the script's own regular expression.
var ibrouteCA = regexp.MustCompile(`\w+\s+(\d+)\s+:\s+\(Channel Adapter.*:\s+'(.*)'\)`)

func hostsRouted(t *testing.T, dump string, guid uint64, port int) []string {
	t.Helper()
	head := fmt.Sprintf(" guid 0x%016x (", guid) // the header, not an entry's "portguid"
	i := strings.Index(dump, head)
	if i < 0 {
		t.Fatalf("no table of %s", head)
	}
	block := dump[i:]
	block = block[:strings.Index(block, "valid lids dumped")]
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if m := ibrouteCA.FindStringSubmatch(l); m != nil {
			if p, _ := strconv.Atoi(m[1]); p == port {
				out = append(out, m[2])
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestFabricBlastRadiusErrors: errors on leaf002's uplink to spine001 name
// the hosts routed over it both ways, exactly those the tables route
// (ibfindnodesusing's lists), with their counts; the fault carries them.
// On main no finding has a blast radius.
func TestFabricBlastRadiusErrors(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../internal/read/fabric/testdata/lft/iblinkinfo.stdout", nil)
	dump := recordedLFT(t, "dump_fts.stdout")
	st := lftRoutes(t, topo, dump)
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	a, b := zeroSweep(t0, topo), zeroSweep(t0.Add(time.Minute), topo)
	diagnosetest.SetValue(t, b, lftLeaf002, 5, fabric.SymbolErrors, 50)
	rep := evalBlast(t, st, a, b)
	f := diagnosetest.FindingFor(rep.Findings, "fabric.errors", "0x0000000000200003/5")
	if f == nil || f.Severity != diagnose.Fail {
		t.Fatalf("no fabric.errors fail for leaf002 port 5: %+v", diagnosetest.FindingsOf(rep.Findings, "fabric.errors"))
	}
	if len(f.BlastRadius) != 1 {
		t.Fatalf("blast radius %+v", f.BlastRadius)
	}
	br := f.BlastRadius[0]
	out, in := hostsRouted(t, dump, lftLeaf002, 5), hostsRouted(t, dump, lftSpine001, 2)
	if len(out) == 0 || len(in) != 4 {
		t.Fatalf("recording changed: out %v in %v", out, in)
	}
	if br.Port != "0x0000000000200003/5" || br.Out.Count != len(out) || !slices.Equal(br.Out.Hosts, out) ||
		br.In.Count != len(in) || !slices.Equal(br.In.Hosts, in) || br.Out.Unknown || br.In.Unknown {
		t.Errorf("blast radius %+v, want out %v, in %v", br, out, in)
	}
	if !strings.Contains(f.Evidence, "into it, to 4 hosts (host0005 mlx5_0, host0006 mlx5_0, host0007 mlx5_0, host0008 mlx5_0)") {
		t.Errorf("evidence %q", f.Evidence)
	}
	var fault *diagnose.Fault
	for i := range rep.Faults {
		// The link's fault is named by its lower GUID's end: spine001's.
		if slices.Contains(rep.Faults[i].Findings, diagnose.FindingRef{Check: "fabric.errors", Target: "0x0000000000200003/5"}) {
			fault = &rep.Faults[i]
		}
	}
	if fault == nil || len(fault.BlastRadius) != 1 || fault.BlastRadius[0].Out.Count != len(out) {
		t.Errorf("fault %+v", fault)
	}
}

// TestFabricBlastRadiusBounded: a spine's port toward a leaf routes its
// four hosts; leaf001's host port one host out and that host's own
// traffic in; the lists are bounded by blastHosts with the count whole.
func TestFabricBlastRadiusBounded(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../internal/read/fabric/testdata/lft/iblinkinfo.stdout", nil)
	st := lftRoutes(t, topo, recordedLFT(t, "dump_fts.stdout"))
	b := newBlastIndex(&diagnose.Reading{Host: routedHost{&diagnosetest.Host{}, st}})
	br, ok := b.at(topo, lftLeaf001, 1)
	if !ok || br.Out.Count != 1 || br.Out.Hosts[0] != "host0001 mlx5_0" || br.In.Count != 1 || br.In.Hosts[0] != "host0001 mlx5_0" {
		t.Errorf("leaf001 port 1: %+v %v", br, ok)
	}
	// From the host's end: the same link, judged at its switch end.
	if hb, ok := b.at(topo, 0x0000000000100001, 1); !ok || hb.Port != "0x0000000000200002/1" {
		t.Errorf("host0001's port: %+v %v", hb, ok)
	}
	var names []string
	for i := range 25 {
		names = append(names, "host"+strconv.Itoa(100+i))
	}
	l := hostList(names)
	if l.Count != 25 || len(l.Hosts) != blastHosts || !strings.Contains(l.Text(), "and 15 more") {
		t.Errorf("bounded list %+v %q", l, l.Text())
	}
}

// TestFabricBlastRadiusUnknown: where the far switch's table was not read
// (its block cut from the dump), the "in" list is unknown, never none.
func TestFabricBlastRadiusUnknown(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../internal/read/fabric/testdata/lft/iblinkinfo.stdout", nil)
	dump := recordedLFT(t, "dump_fts.stdout")
	i := strings.Index(dump, "Unicast lids [0x0-0x16] of switch DR path slid 0; dlid 0; 0 guid 0x0000000000200000 (spine001)")
	if i < 0 {
		t.Fatal("recording changed")
	}
	j := i + strings.Index(dump[i:], "valid lids dumped\n") + len("valid lids dumped\n")
	st := lftRoutes(t, topo, dump[:i]+dump[j:])
	if len(st.Last.Unknown) != 1 {
		t.Fatalf("unknown %v", st.Last.Unknown)
	}
	br, ok := newBlastIndex(&diagnose.Reading{Host: routedHost{&diagnosetest.Host{}, st}}).at(topo, lftLeaf002, 5)
	if !ok || !br.In.Unknown || br.Out.Unknown || br.Out.Count == 0 || !strings.Contains(br.Text(), "into it, to unknown") {
		t.Errorf("%+v %q", br, br.Text())
	}
	// No reader: no blast radius at all.
	if _, ok := newBlastIndex(&diagnose.Reading{Host: &diagnosetest.Host{}}).at(topo, lftLeaf002, 5); ok {
		t.Error("a blast radius without a route read")
	}
}

// TestFabricCongestionRootVictim: leaf002's uplink waits while sending
// 80% of its rate (a root: named with the hosts routed through it);
// leaf001's waits while sending 5% (a victim); the fault of each link
// carries its role. On main the finding tells neither.
func TestFabricCongestionRootVictim(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../internal/read/fabric/testdata/lft/iblinkinfo.stdout", nil)
	st := lftRoutes(t, topo, recordedLFT(t, "dump_fts.stdout"))
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	a, b := zeroSweep(t0, topo), zeroSweep(t0.Add(2*time.Second), topo)
	// 4X HDR, 200 Gb/s of data: 50 GB in 2 s. 20% lost: 1.25e9 ticks of
	// 8 bytes; 80% sent: 1e10 words of 4 bytes; 5%: 6.25e8 words.
	for _, g := range []uint64{lftLeaf001, lftLeaf002} {
		diagnosetest.SetValue(t, b, g, 5, fabric.TransmitWait, 1_250_000_000)
	}
	diagnosetest.SetValue(t, b, lftLeaf002, 5, fabric.DataTransmitted, 10_000_000_000)
	diagnosetest.SetValue(t, b, lftLeaf001, 5, fabric.DataTransmitted, 625_000_000)
	rep := evalBlast(t, st, a, b)
	fs := diagnosetest.FindingsOf(rep.Findings, "fabric.congestion")
	if len(fs) != 1 || fs[0].Severity != diagnose.Warn {
		t.Fatalf("congestion %+v", fs)
	}
	f := fs[0]
	if !strings.Contains(f.Observed, "1 roots, 1 victims, 0 unknown") {
		t.Errorf("observed %q", f.Observed)
	}
	root := strings.Index(f.Evidence, `"leaf002" port 5`)
	victim := strings.Index(f.Evidence, `"leaf001" port 5`)
	if root < 0 || victim < root || !strings.Contains(f.Evidence, "root of congestion (sent 80% of its rate") ||
		!strings.Contains(f.Evidence, "victim of back-pressure (sent only 5% of its rate") {
		t.Errorf("evidence %q", f.Evidence)
	}
	if len(f.BlastRadius) != 1 || f.BlastRadius[0].Port != "0x0000000000200003/5" || f.BlastRadius[0].In.Count != 4 {
		t.Errorf("root's blast radius %+v", f.BlastRadius)
	}
	roles := map[string]string{}
	for _, fl := range rep.Faults {
		if fl.Class == diagnose.FaultCongestion {
			roles[fl.ID] = fl.CongestionRole
		}
	}
	if len(roles) != 2 || !slices.ContainsFunc(rep.Faults, func(fl diagnose.Fault) bool {
		return fl.CongestionRole == CongestionRoot && len(fl.BlastRadius) == 1 && fl.BlastRadius[0].Port == "0x0000000000200003/5"
	}) || !slices.Contains(sortedValues(roles), CongestionVictim) {
		t.Errorf("faults' roles %v", roles)
	}
	// PortXmitData not read over the window: unknown, never a victim.
	for _, p := range []*fabric.Sweep{a, b} {
		for i := range p.Ports {
			p.Ports[i].Values[fabric.DataTransmitted].Present = false
		}
	}
	f = diagnosetest.FindingsOf(evalBlast(t, st, a, b).Findings, "fabric.congestion")[0]
	if !strings.Contains(f.Observed, "0 roots, 0 victims, 2 unknown") || len(f.BlastRadius) != 0 {
		t.Errorf("without PortXmitData: %q %+v", f.Observed, f.BlastRadius)
	}
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// TestCongestionRootRatioIsTheAlerts: diagnose and RdmaLinkCongested's
// congestion_role draw the root/victim line at the same share.
func TestCongestionRootRatioIsTheAlerts(t *testing.T) {
	if want := mixin.Default().Thresholds.CongestionRootRatio; fabricRootDataShare != want {
		t.Errorf("fabricRootDataShare %v, the mixin's congestion_root_ratio %v", fabricRootDataShare, want)
	}
}
