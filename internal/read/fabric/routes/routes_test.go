// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
)

// lftFixture is a recording in internal/read/fabric/testdata/lft (README.md
// there): the fabric's recordings stay in one folder with one README, and
// diagnose's routing tests read the same files.
func lftFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "lft", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The recorded ibsim fabric's switches (testdata/lft/iblinkinfo.stdout,
// the same GUIDs as testdata/ibqueryerrors/ibsim16-iblinkinfo.stdout).
const (
	spine1 = 0x0000000000200000
	spine2 = 0x0000000000200001
	leaf1  = 0x0000000000200002
	leaf4  = 0x0000000000200005
)

// ibsimTopology is the scan of the recorded fabric.
func ibsimTopology(t *testing.T) *fabric.Fabric {
	t.Helper()
	b, err := os.ReadFile(fabrictest.Recording("ibsim16-iblinkinfo.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := fabric.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func parseLFTString(t *testing.T, s string) *lftDump {
	t.Helper()
	d, err := parseLFTs(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestParseLFTsRecorded: dump_fts on the ibsim fat tree (2 spines, 4
// leaves, 16 hosts under opensm's min-hop routing) prints six whole tables;
// a spine forwards each leaf's four hosts down that leaf's port, a leaf its
// own four hosts down their ports and the other twelve split over its two
// uplinks.
func TestParseLFTsRecorded(t *testing.T) {
	d := parseLFTString(t, lftFixture(t, "dump_fts.stdout"))
	if len(d.Switches) != 6 || d.Broken != 0 || d.Junk != 0 {
		t.Fatalf("switches %d broken %d junk %d, want 6 0 0", len(d.Switches), d.Broken, d.Junk)
	}
	by := map[uint64]*SwitchLFT{}
	for _, s := range d.Switches {
		by[s.GUID] = s
		if len(s.Entries) != 22 {
			t.Errorf("switch %#x: %d entries, want 22 (6 switches, 16 hosts)", s.GUID, len(s.Entries))
		}
	}
	spine := by[spine2].CARoutes()
	for port := 1; port <= 4; port++ {
		if spine[port] != 4 {
			t.Errorf("spine002 port %d: %d CA routes, want 4 (%v)", port, spine[port], spine)
		}
	}
	leaf := by[leaf4].CARoutes()
	if leaf[1] != 1 || leaf[4] != 1 || leaf[5]+leaf[6] != 12 || leaf[0] != 0 {
		t.Errorf("leaf004 CA routes %v, want 1 per host port and 12 over ports 5 and 6", leaf)
	}
	// The entry for the switch's own LID goes to port 0 and names it.
	if e := by[leaf4].Entries[5]; e.LID != 6 || e.Port != 0 || e.Kind != KindSwitch || e.PortGUID != leaf4 {
		t.Errorf("leaf004's own entry %+v", e)
	}
}

// TestParseLFTsIbroute: ibroute prints the same block for one switch
// (addressed by LID, "of switch Lid 3"), and the same table as dump_fts.
func TestParseLFTsIbroute(t *testing.T) {
	one := parseLFTString(t, lftFixture(t, "ibroute-3.stdout"))
	all := parseLFTString(t, lftFixture(t, "dump_fts.stdout"))
	if len(one.Switches) != 1 || one.Switches[0].GUID != leaf1 {
		t.Fatalf("ibroute 3: %+v", one.Switches)
	}
	for _, s := range all.Switches {
		if s.GUID == leaf1 && fmt.Sprint(s.Entries) != fmt.Sprint(one.Switches[0].Entries) {
			t.Errorf("dump_fts and ibroute disagree on leaf001:\n%v\n%v", s.Entries, one.Switches[0].Entries)
		}
	}
}

// TestParseLFTsNoDests: dump_fts -n names no destination, so no LID counts
// as a channel adapter's.
func TestParseLFTsNoDests(t *testing.T) {
	d := parseLFTString(t, lftFixture(t, "dump_fts-n.stdout"))
	if len(d.Switches) != 6 {
		t.Fatalf("%d switches", len(d.Switches))
	}
	for _, s := range d.Switches {
		if n := len(s.CARoutes()); n != 0 {
			t.Errorf("switch %#x: %d ports with CA routes from -n output", s.GUID, n)
		}
	}
}

// TestParseLFTsCutShort: a table whose count line is missing or does not
// match what was printed is dropped, never read as fewer routes.
func TestParseLFTsCutShort(t *testing.T) {
	full := lftFixture(t, "dump_fts.stdout")
	lines := strings.SplitAfter(full, "\n")
	// Cut in the middle of the second table.
	cut := strings.Join(lines[:40], "")
	d := parseLFTString(t, cut)
	if len(d.Switches) != 1 || d.Broken != 1 {
		t.Errorf("cut after 40 lines: %d whole, %d broken; want 1, 1", len(d.Switches), d.Broken)
	}
	// One entry line dropped: its count line no longer matches.
	dropped := strings.Replace(full, "0x0009 001 : (Channel Adapter portguid 0x0000000000100005: 'host0003 mlx5_0')\n", "", 1)
	d = parseLFTString(t, dropped)
	if len(d.Switches) != 5 || d.Broken != 1 {
		t.Errorf("an entry dropped: %d whole, %d broken; want 5, 1", len(d.Switches), d.Broken)
	}
	// A line not in the format inside a table.
	garbled := strings.Replace(full, "0x0009 001 : (Channel", "0x0009 0x1 : (Channel", 1)
	d = parseLFTString(t, garbled)
	if len(d.Switches) != 5 || d.Broken != 1 {
		t.Errorf("a garbled entry: %d whole, %d broken; want 5, 1", len(d.Switches), d.Broken)
	}
}

// fakeDumpFTS installs a dump_fts that prints stdout, writes stderr and
// exits rc; it logs each run to dir/runs.
func fakeDumpFTS(t *testing.T, stdout, stderr string, rc int) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out"), []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "err"), []byte(stderr), 0o644); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "dump_fts")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q/runs\ncat %q/out\ncat %q/err >&2\nexit %d\n", dir, dir, dir, rc)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

func readerRuns(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "runs"))
	return strings.Count(string(b), "\n")
}

// TestRouteReaderRecorded: the recorded tables against the recorded
// topology of the same fabric: every switch read, the per-port counts.
func TestRouteReaderRecorded(t *testing.T) {
	path, _ := fakeDumpFTS(t, lftFixture(t, "dump_fts.stdout"), "", 0)
	topo := ibsimTopology(t)
	rr := NewReader(Config{DumpFTS: path, Loop: fabric.Loop{Topology: func() *fabric.Fabric { return topo }, Local: []string{"-C", "mlx5_0"}}})
	rr.ReadOnce(context.Background())
	st := rr.Status()
	r := st.Last
	if r == nil || !r.OK() || len(r.Switches) != 6 || st.Reads != 1 || st.LastSuccess.IsZero() {
		t.Fatalf("read %+v, status %+v", r, st)
	}
	pr := r.PortRoutes()
	if pr[fabric.PortKey{GUID: spine1, Port: 3}] != 4 || pr[fabric.PortKey{GUID: leaf1, Port: 5}]+pr[fabric.PortKey{GUID: leaf1, Port: 6}] != 12 {
		t.Errorf("port routes %v", pr)
	}
}

// TestRouteReaderRereadsOnChange: the tables are read again only when the
// topology's nodes, LIDs or port states change, or MaxAge passes.
func TestRouteReaderRereadsOnChange(t *testing.T) {
	path, dir := fakeDumpFTS(t, lftFixture(t, "dump_fts.stdout"), "", 0)
	topo := ibsimTopology(t)
	now := time.Unix(1000, 0)
	rr := NewReader(Config{DumpFTS: path, Loop: fabric.Loop{Topology: func() *fabric.Fabric { return topo },
		Now: func() time.Time { return now }}, MaxAge: 10 * time.Minute})
	ctx := context.Background()
	rr.ReadOnce(ctx)
	rr.ReadOnce(ctx)
	rr.ReadOnce(ctx)
	if n := readerRuns(dir); n != 2 {
		t.Fatalf("%d runs for an unchanged topology, want 2 (the first read confirmed by one more)", n)
	}
	// A port goes down: the SM reroutes, the tables are read again.
	down := *topo
	down.PortLines = append([]fabric.PortLine{}, topo.PortLines...)
	for i := range down.PortLines {
		if down.PortLines[i].GUID == leaf1 && down.PortLines[i].Port == 5 {
			down.PortLines[i].State = 1
		}
	}
	topo = &down
	rr.ReadOnce(ctx)
	if n := readerRuns(dir); n != 3 {
		t.Fatalf("%d runs after a port went down, want 3", n)
	}
	// The SM reroutes after the read (its next sweep): the confirming
	// read sees new tables, so the one after reads again, and then the
	// tables have settled.
	rerouted := strings.Replace(lftFixture(t, "dump_fts.stdout"), "0x0009 001 : (Channel", "0x0009 002 : (Channel", 1)
	if err := os.WriteFile(filepath.Join(dir, "out"), []byte(rerouted), 0o644); err != nil {
		t.Fatal(err)
	}
	rr.ReadOnce(ctx)
	rr.ReadOnce(ctx)
	rr.ReadOnce(ctx)
	if n := readerRuns(dir); n != 5 {
		t.Fatalf("%d runs after the SM rerouted, want 5", n)
	}
	if got := rr.Status().Last.PortRoutes()[fabric.PortKey{GUID: spine2, Port: 2}]; got != 5 {
		t.Errorf("spine002 port 2 routes %d after the reroute, want 5", got)
	}
	now = now.Add(11 * time.Minute)
	rr.ReadOnce(ctx)
	if n := readerRuns(dir); n != 6 {
		t.Fatalf("%d runs past MaxAge, want 6", n)
	}
	rr.ReadOnce(ctx)
	if n := readerRuns(dir); n != 6 {
		t.Fatalf("%d runs after a settled read past MaxAge, want 6", n)
	}
}

// TestRouteReaderFailures: a failed, cut or partial read leaves the
// switches it did not read whole unknown, and is counted by reason; it is
// retried at the next check.
func TestRouteReaderFailures(t *testing.T) {
	full := lftFixture(t, "dump_fts.stdout")
	topo := ibsimTopology(t)
	for _, tc := range []struct {
		name, stdout, stderr string
		rc                   int
		read                 int
		reason               fabric.Reason
	}{
		{"error exit", "", "ibwarn: [1] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1)\n", 255, 0, fabric.ReasonMAD},
		{"cut short", strings.Join(strings.SplitAfter(full, "\n")[:40], ""), "", 0, 1, fabric.ReasonUnparsable},
		{"one switch silent", full[strings.Index(full[1:], "Unicast lids")+1:], "", 0, 5, fabric.ReasonMAD},
		{"stderr error, exit 0", full, "ibwarn: [1] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1)\n", 0, 6, fabric.ReasonMAD},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, dir := fakeDumpFTS(t, tc.stdout, tc.stderr, tc.rc)
			rr := NewReader(Config{DumpFTS: path, Loop: fabric.Loop{Topology: func() *fabric.Fabric { return topo }}})
			rr.ReadOnce(context.Background())
			st := rr.Status()
			r := st.Last
			if r == nil || r.OK() || r.Reason != tc.reason || len(r.Switches) != tc.read || st.Failures[tc.reason] != 1 || !st.LastSuccess.IsZero() {
				t.Fatalf("read %+v, failures %v; want %d switches read, reason %s", r, st.Failures, tc.read, tc.reason)
			}
			if len(r.Unknown)+len(r.Switches) < 6 && tc.read < 6 {
				t.Errorf("%d unknown + %d read, want the 6 switches", len(r.Unknown), len(r.Switches))
			}
			for g := range r.PortRoutes() {
				for _, u := range r.Unknown {
					if g.GUID == u {
						t.Errorf("unknown switch %#x has port routes", u)
					}
				}
			}
			rr.ReadOnce(context.Background())
			if n := readerRuns(dir); n != 2 {
				t.Errorf("%d runs, want a failed read retried at the next check", n)
			}
		})
	}
}

// TestRouteReaderShards: each shard keeps its own switches' tables; the
// shards together hold every switch once.
func TestRouteReaderShards(t *testing.T) {
	path, _ := fakeDumpFTS(t, lftFixture(t, "dump_fts.stdout"), "", 0)
	topo := ibsimTopology(t)
	seen := map[uint64]int{}
	for shard := range 3 {
		rr := NewReader(Config{DumpFTS: path, Loop: fabric.Loop{Topology: func() *fabric.Fabric { return topo }, Shard: shard, Shards: 3}})
		rr.ReadOnce(context.Background())
		r := rr.Status().Last
		if !r.OK() {
			t.Fatalf("shard %d: %v", shard, r.Err)
		}
		for g := range r.Switches {
			if fabric.ShardOf(g, 3) != shard {
				t.Errorf("shard %d holds %#x of shard %d", shard, g, fabric.ShardOf(g, 3))
			}
			seen[g]++
		}
	}
	if len(seen) != 6 {
		t.Errorf("shards hold %d switches, want 6: %v", len(seen), seen)
	}
}

// TestRouteReaderBounded: output past MaxOutput kills the run; its tables
// are unknown.
func TestRouteReaderBounded(t *testing.T) {
	path, _ := fakeDumpFTS(t, lftFixture(t, "dump_fts.stdout"), "", 0)
	topo := ibsimTopology(t)
	rr := NewReader(Config{DumpFTS: path, Loop: fabric.Loop{Topology: func() *fabric.Fabric { return topo }, MaxOutput: 1000}})
	rr.ReadOnce(context.Background())
	r := rr.Status().Last
	if r.OK() || r.Reason != fabric.ReasonOutputTooLarge || len(r.Switches) != 0 || len(r.Unknown) != 6 {
		t.Fatalf("read %+v", r)
	}
}

// TestRoutingFingerprintPhysState: a port whose physical state alone
// changes (ibportstate disable on ibsim leaves it logically ACTIVE) is a
// change the tables are read again for.
func TestRoutingFingerprintPhysState(t *testing.T) {
	topo := ibsimTopology(t)
	before := routingFingerprint(topo)
	changed := *topo
	changed.PortLines = append([]fabric.PortLine{}, topo.PortLines...)
	for i := range changed.PortLines {
		if changed.PortLines[i].GUID == leaf1 && changed.PortLines[i].Port == 6 {
			changed.PortLines[i].PhysState = 3 // Disabled
		}
	}
	if routingFingerprint(&changed) == before {
		t.Error("a port physically disabled does not change the routing fingerprint")
	}
}
