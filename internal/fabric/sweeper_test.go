// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/testenv"
)

func pqFixture(name string) string {
	p, _ := filepath.Abs(filepath.Join("testdata", "perfquery", name))
	return p
}

// fakePerfquery writes a perfquery that answers the recorded ibsim
// fabric (testdata/README.md) by LID, as the real one did, and logs its
// arguments one run a line. cases is extra shell case arms tried first.
func fakePerfquery(t *testing.T, cases string) (path, argsLog string) {
	t.Helper()
	dir := t.TempDir()
	argsLog = filepath.Join(dir, "args")
	body := `echo "$*" >>` + argsLog + `
cat ` + pqFixture("umad2sim-attach.stderr") + ` >&2
case "$*" in
` + cases + `
"-l 1 1-36") cat ` + pqFixture("spine1-l-1-36.stdout") + ` ;;
"-x -l 1 1-36") cat ` + pqFixture("spine1-x-l-1-36.stdout") + ` ;;
"-l 2 1-36") cat ` + pqFixture("leaf1-l-1-36.stdout") + ` ;;
"-x -l 2 1-36") cat ` + pqFixture("leaf1-x-l-1-36.stdout") + ` ;;
"-l 3 1-36") cat ` + pqFixture("leaf2-l-1-36.stdout") + ` ;;
"-x -l 3 1-36") cat ` + pqFixture("leaf2-x-l-1-36.stdout") + ` ;;
"-l 4 1") cat ` + pqFixture("node01-l-1.stdout") + ` ;;
"-x -l 4 1") cat ` + pqFixture("node01-x-l-1.stdout") + ` ;;
*) echo "perfquery: iberror: failed: unexpected $*"; exit 255 ;;
esac
`
	path = filepath.Join(dir, "perfquery")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, argsLog
}

func ibsimTopology(t *testing.T) *Fabric {
	return parse(t, tool(t, "iblinkinfo-l-ibsim.txt"))
}

const (
	spine1 = 0x0000000000200000
	leaf1  = 0x0000000000200001
	leaf2  = 0x0000000000200002
)

func sweepWith(t *testing.T, cfg SweeperConfig) *Sweep {
	t.Helper()
	if cfg.Topology == nil {
		topo := ibsimTopology(t)
		cfg.Topology = func() *Fabric { return topo }
	}
	s := NewSweeper(cfg)
	s.SweepOnce(context.Background())
	st := s.Status()
	if st.Last == nil {
		t.Fatal("no sweep recorded")
	}
	return st.Last
}

func mustFind(t *testing.T, sw *Sweep, guid uint64, port int) *PortCounters {
	t.Helper()
	p := sw.Find(guid, port)
	if p == nil {
		t.Fatalf("port 0x%x/%d not swept", guid, port)
	}
	return p
}

// TestSweepRecordedIbsim: the faults set through ibsim's console before
// the recording (testdata/README.md) read back with their widths, the
// saturated ones flagged; a clean port reads a real zero; down ports are
// swept and keep their state; data counters come from the 64-bit
// extended attribute the PMA advertises (CapMask 0x1300).
func TestSweepRecordedIbsim(t *testing.T) {
	pq, argsLog := fakePerfquery(t, "")
	sw := sweepWith(t, SweeperConfig{Path: pq})
	if !sw.OK() || sw.Unknown != 0 || len(sw.Failures) != 0 {
		t.Fatalf("sweep not OK: unknown %d failures %v", sw.Unknown, sw.Failures)
	}
	if len(sw.Ports) != 3*36 {
		t.Errorf("%d ports swept, want the 108 switch ports (CAs are off)", len(sw.Ports))
	}
	if sw.Queries != 3 {
		t.Errorf("queries = %d, want one per switch", sw.Queries)
	}
	b, _ := os.ReadFile(argsLog)
	if runs := strings.Count(string(b), "\n"); runs != 6 {
		t.Errorf("perfquery runs = %d, want 2 per switch (PortCounters, then -x): %s", runs, b)
	}
	p1 := mustFind(t, sw, leaf1, 1)
	if v := p1.Values[SymbolErrors]; v.V != 4200 || v.Bits != 16 || v.Saturated() {
		t.Errorf("leaf1/1 symbol errors %+v, want 4200 in 16 bits, not saturated", v)
	}
	if v := mustFind(t, sw, leaf1, 2).Values[SymbolErrors]; v.V != 65535 || !v.Saturated() {
		t.Errorf("leaf1/2 symbol errors %+v: 70000 was set, ibsim clipped it to 65535: saturated", v)
	}
	p36 := mustFind(t, sw, leaf1, 36)
	if v := p36.Values[LocalLinkIntegrityErrors]; v.V != 15 || v.Bits != 4 || !v.Saturated() {
		t.Errorf("leaf1/36 local link integrity %+v, want 15 of 4 bits, saturated", v)
	}
	if v := p36.Values[LinkDowned]; v.V != 3 || v.Bits != 8 || v.Saturated() {
		t.Errorf("leaf1/36 link downed %+v", v)
	}
	if v := mustFind(t, sw, leaf1, 35).Values[TransmitWait]; v.V != 123456 || v.Bits != 32 {
		t.Errorf("leaf1/35 xmit wait %+v", v)
	}
	clean := mustFind(t, sw, leaf2, 1)
	for id := range NumCounters {
		v := clean.Values[id]
		if !v.Present {
			t.Errorf("leaf2/1 %s absent", Counters[id].Field)
		}
		if Counters[id].Error && v.V != 0 {
			t.Errorf("leaf2/1 %s = %d, want a real zero", Counters[id].Field, v.V)
		}
	}
	if clean.HasErrors() || !p1.HasErrors() {
		t.Error("HasErrors wrong")
	}
	if v := p1.Values[DataReceived]; v.Bits != 64 || v.V == 0 {
		t.Errorf("leaf1/1 data received %+v, want the 64-bit extended value", v)
	}
	if got, _ := p1.Scaled(DataReceived); got != float64(p1.Values[DataReceived].V)*4 {
		t.Errorf("data received scaled %g, want words x 4", got)
	}
	down := mustFind(t, sw, leaf1, 3)
	if down.State != infiniband.StateDown || down.PhysState != infiniband.PhysStatePolling || down.Unknown {
		t.Errorf("down port leaf1/3: %+v", down.PortLine)
	}
}

// TestSweepPartialFailure: a switch whose PMA stopped answering midway
// (ibsim `Error "S-leaf2" 25`, recorded: perfquery printed 3 ports, then
// `_do_madrpc failed` on stderr and `iberror` on stdout, exit 255) costs
// only its unread ports, which are unknown, not zero; the rest of the
// sweep goes on.
func TestSweepPartialFailure(t *testing.T) {
	pq, _ := fakePerfquery(t, `"-l 3 1-36") cat `+pqFixture("leaf2-l-1-36-error.stdout")+`; cat `+pqFixture("leaf2-l-1-36-error.stderr")+` >&2; exit 255 ;;
"-x -l 3 1-3") awk '/^# Port/ { n++ } n <= 3' `+pqFixture("leaf2-x-l-1-36.stdout")+` ;;
`)
	sw := sweepWith(t, SweeperConfig{Path: pq})
	if sw.OK() || sw.Unknown != 33 || sw.Failures[ReasonMAD] != 1 {
		t.Fatalf("unknown %d failures %v, want 33 ports unknown from 1 failed run", sw.Unknown, sw.Failures)
	}
	for port := 1; port <= 36; port++ {
		p := mustFind(t, sw, leaf2, port)
		if port <= 3 {
			if p.Unknown || !p.Values[SymbolErrors].Present || p.Values[DataReceived].Bits != 64 {
				t.Errorf("leaf2/%d was answered: %+v", port, p)
			}
			continue
		}
		if !p.Unknown || p.Reason != ReasonMAD {
			t.Errorf("leaf2/%d unknown %v reason %q", port, p.Unknown, p.Reason)
		}
		for id := range NumCounters {
			if p.Values[id].Present {
				t.Errorf("leaf2/%d %s present on an unread port", port, Counters[id].Field)
			}
		}
	}
	if p := mustFind(t, sw, leaf1, 1); p.Unknown || p.Values[SymbolErrors].V != 4200 {
		t.Errorf("leaf1 must be read whatever leaf2 does: %+v", p)
	}
}

// TestSweepExitZeroLies: perfquery exiting 0 is not taken for success:
// with error text on stderr and nothing on stdout, or with output that is
// not perfquery's, every port of that switch is unknown and counted.
func TestSweepExitZeroLies(t *testing.T) {
	for _, c := range []struct {
		name, arm string
		reason    Reason
	}{
		{"stderr only", `"-l 3 1-36") echo "ibwarn: [99] mad_rpc: _do_madrpc failed; dport (Lid 3)" >&2; exit 0 ;;`, ReasonMAD},
		{"nothing", `"-l 3 1-36") exit 0 ;;`, ReasonUnparsable},
		{"garbage", `"-l 3 1-36") echo "hello"; echo "# Port counters: Lid 3 port 1 (CapMask: 0x1300)"; echo "SymbolErrorCounter:......x12"; exit 0 ;;`, ReasonUnparsable},
		{"truncated block", `"-l 3 1-36") head -5 ` + pqFixture("leaf2-l-1-36.stdout") + `; exit 0 ;;`, ReasonUnparsable},
	} {
		t.Run(c.name, func(t *testing.T) {
			pq, _ := fakePerfquery(t, c.arm+"\n")
			sw := sweepWith(t, SweeperConfig{Path: pq})
			if sw.OK() || sw.Unknown != 36 || sw.Failures[c.reason] != 1 {
				t.Errorf("unknown %d failures %v, want leaf2's 36 ports unknown, 1 %s", sw.Unknown, sw.Failures, c.reason)
			}
			if p := mustFind(t, sw, leaf2, 1); !p.Unknown || p.Values[SymbolErrors].Present {
				t.Errorf("leaf2/1: %+v", p)
			}
		})
	}
}

// TestSweepExtendedFailsDropsData: PortCounters answered but the extended
// query failed: the port is unknown and its data counters absent, never
// the 32-bit values in place of the 64-bit ones (the series would jump).
func TestSweepExtendedFailsDropsData(t *testing.T) {
	pq, _ := fakePerfquery(t, `"-x -l 3 1-36") exit 1 ;;
`)
	sw := sweepWith(t, SweeperConfig{Path: pq})
	p := mustFind(t, sw, leaf2, 1)
	if !p.Unknown || p.Values[DataReceived].Present || !p.Values[SymbolErrors].Present {
		t.Errorf("leaf2/1 %+v", p)
	}
	if sw.Failures[ReasonMAD] != 1 || sw.Unknown != 36 {
		t.Errorf("failures %v unknown %d", sw.Failures, sw.Unknown)
	}
}

// TestSweepHugeOutputBounded: a perfquery that never stops printing is
// killed at MaxOutput; its ports are unknown (output_too_large) and the
// parser held one block at a time.
func TestSweepHugeOutputBounded(t *testing.T) {
	pq, _ := fakePerfquery(t, `"-l 3 1-36") yes "PortXmitData:....................1" ;;
`)
	sw := sweepWith(t, SweeperConfig{Path: pq, MaxOutput: 1 << 20})
	if sw.Failures[ReasonOutputTooLarge] != 1 || sw.Unknown != 36 {
		t.Errorf("failures %v unknown %d", sw.Failures, sw.Unknown)
	}
}

func TestSweepToolMissingAndTimeout(t *testing.T) {
	sw := sweepWith(t, SweeperConfig{Path: filepath.Join(t.TempDir(), "no-perfquery")})
	if sw.Failures[ReasonStart] != 3 || sw.Unknown != 108 {
		t.Errorf("missing tool: failures %v unknown %d", sw.Failures, sw.Unknown)
	}
	pq, _ := fakePerfquery(t, `"-l 3 1-36") exec sleep 1000 ;;
`)
	sw = sweepWith(t, SweeperConfig{Path: pq, Timeout: 300 * time.Millisecond})
	if sw.Failures[ReasonTimeout] != 1 || sw.Unknown != 36 {
		t.Errorf("hung tool: failures %v unknown %d", sw.Failures, sw.Unknown)
	}
}

// TestSweepCAsAndShards: CA ports only when asked; shards split the nodes
// by GUID so that their union is every node exactly once.
func TestSweepCAsAndShards(t *testing.T) {
	lid := `$(echo "$*" | awk '{print $(NF-1)}')`
	pq, _ := fakePerfquery(t, `"-l "[5-7]" 1") sed "s/Lid 4/Lid `+lid+`/" `+pqFixture("node01-l-1.stdout")+` ;;
"-x -l "[5-7]" 1") sed "s/Lid 4/Lid `+lid+`/" `+pqFixture("node01-x-l-1.stdout")+` ;;
`)
	// The arm above answers LIDs 5-7 with node01's block relabelled; only
	// node01 (LID 4) is checked for values.
	sw := sweepWith(t, SweeperConfig{Path: pq, CAs: true})
	if len(sw.Ports) != 3*36+4 {
		t.Errorf("%d ports, want 108 switch ports and 4 CA ports", len(sw.Ports))
	}
	if p := mustFind(t, sw, 0x0000000000100001, 1); p.Switch || p.Unknown || !p.Values[SymbolErrors].Present || !p.Values[TransmitWait].Present || p.Values[DataReceived].Bits != 64 {
		t.Errorf("node01 (CapMask 0x1200: extended, XmitWait): %+v", p)
	}
	topo := ibsimTopology(t)
	for _, n := range []int{2, 3} {
		seen := map[PortKey]int{}
		for i := range n {
			pq, _ := fakePerfquery(t, "")
			sw := sweepWith(t, SweeperConfig{Path: pq, Shard: i, Shards: n, Topology: func() *Fabric { return topo }})
			for _, p := range sw.Ports {
				seen[PortKey{p.GUID, p.Port}]++
			}
		}
		if len(seen) != 108 {
			t.Errorf("%d shards cover %d ports, want 108", n, len(seen))
		}
		for k, c := range seen {
			if c != 1 {
				t.Errorf("%d shards: %v swept %d times", n, k, c)
			}
		}
	}
}

// TestSweepSkipsWhenRunning: a tick that finds the previous sweep still
// running is counted and does not start another.
func TestSweepSkipsWhenRunning(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	s := NewSweeper(SweeperConfig{Path: "true", Topology: func() *Fabric {
		entered <- struct{}{}
		<-release
		return nil
	}})
	ctx := context.Background()
	s.tick(ctx)
	<-entered
	s.tick(ctx)
	s.tick(ctx)
	close(release)
	s.wg.Wait()
	if st := s.Status(); st.Skipped != 2 || len(entered) != 0 {
		t.Errorf("skipped %d, extra sweeps started %d", st.Skipped, len(entered))
	}
}

func TestPortList(t *testing.T) {
	for in, want := range map[string]string{"1 2 3": "1-3", "1": "1", "1 3 4": "1,3,4"} {
		var ports []int
		for _, f := range strings.Fields(in) {
			n := 0
			for _, c := range f {
				n = n*10 + int(c-'0')
			}
			ports = append(ports, n)
		}
		if got := portList(ports); got != want {
			t.Errorf("portList(%v) = %q, want %q", ports, got, want)
		}
	}
}

// TestSweepCapabilities: a PMA without PortCountersExtended and without
// PortXmitWait (CapMask 0x0100, the recorded answer edited) gets no -x
// run, 32-bit data counters, and no XmitWait value rather than a zero.
func TestSweepCapabilities(t *testing.T) {
	pq, argsLog := fakePerfquery(t, `"-l 3 1-36") sed 's/CapMask: 0x1300/CapMask: 0x0100/; /PortXmitWait/d' `+pqFixture("leaf2-l-1-36.stdout")+` ;;
`)
	sw := sweepWith(t, SweeperConfig{Path: pq})
	if !sw.OK() {
		t.Fatalf("unknown %d failures %v", sw.Unknown, sw.Failures)
	}
	p := mustFind(t, sw, leaf2, 1)
	if p.Values[TransmitWait].Present || p.Values[DataReceived].Bits != 32 || !p.Values[DataReceived].Present {
		t.Errorf("leaf2/1 %+v", p.Values)
	}
	if b, _ := os.ReadFile(argsLog); strings.Contains(string(b), "-x -l 3") {
		t.Errorf("extended query sent to a PMA that does not advertise it:\n%s", b)
	}
}

// TestSweepWarnsOnce: two switches failing in every sweep, swept in
// parallel, make one warning, not one per sweep; recovery is logged once.
func TestSweepWarnsOnce(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "fail")
	pq, _ := fakePerfquery(t, `"-l "[23]" 1-36") [ -e `+flag+` ] && { echo "ibwarn: [7] mad_rpc: _do_madrpc failed; dport (Lid $2)" >&2; exit 255; }; sed "s/Lid 2/Lid $2/" `+pqFixture("leaf1-l-1-36.stdout")+` ;;
"-x -l "[23]" 1-36") sed "s/Lid 2/Lid $3/" `+pqFixture("leaf1-x-l-1-36.stdout")+` ;;
`)
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Records{}
	topo := ibsimTopology(t)
	s := NewSweeper(SweeperConfig{Path: pq, Concurrency: 3, Logger: slog.New(logs), Topology: func() *Fabric { return topo }})
	for range 4 {
		s.SweepOnce(context.Background())
	}
	if n := len(logs.Matching("some ports could not be read")); n != 1 {
		t.Errorf("%d warnings for the same failure in 4 sweeps, want 1", n)
	}
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	s.SweepOnce(context.Background())
	if n := len(logs.Matching("reads every port again")); n != 1 || !s.Status().Last.OK() {
		t.Errorf("recovery: %d info lines, sweep OK %v", n, s.Status().Last.OK())
	}
}

// TestSweepExtendedOnly: a node whose PMA answered every counter in
// PortCountersExtended (a real switch's recording, CapMask2 0x2) is asked
// with one perfquery -x run, every counter 64 bits wide; the ibsim nodes,
// whose -x answer carries only the data counters (CapMask2 0), are never
// taken for such nodes, and one that was is asked both ways again at once.
func TestSweepExtendedOnly(t *testing.T) {
	const osc = 0x7cfe9003009ce5b0
	path, argsLog := fakePerfquery(t, `"-x -l 1719 1-2") cat `+pqFixture("osc-switch-x-l-1719-1-2.stdout")+` ;;`)
	s := NewSweeper(SweeperConfig{Path: path})
	// Learned from an earlier sweep.
	s.addl.Store(uint64(osc), struct{}{})
	ports := []PortCounters{{PortLine: PortLine{GUID: osc, LID: 1719, Port: 1, Switch: true}}, {PortLine: PortLine{GUID: osc, LID: 1719, Port: 2, Switch: true}}}
	if fails, msg := s.queryNode(context.Background(), 1719, ports); len(fails) != 0 {
		t.Fatalf("failures %v: %s", fails, msg)
	}
	if b, _ := os.ReadFile(argsLog); string(b) != "-x -l 1719 1-2\n" {
		t.Errorf("runs:\n%s\nwant one: -x -l 1719 1-2", b)
	}
	p := &ports[0]
	for id, want := range map[CounterID]uint64{TransmitWait: 22730501, DataTransmitted: 36298026860928, SymbolErrors: 0, LocalLinkIntegrityErrors: 0} {
		if v := p.Values[id]; !v.Present || v.V != want || v.Bits != 64 || v.Saturated() {
			t.Errorf("port 1 %s: %+v, want %d, 64 bits", Counters[id].Field, v, want)
		}
	}
	if p.Unknown || ports[1].Unknown {
		t.Errorf("unknown ports: %+v", ports)
	}
	if _, ok := s.addl.Load(uint64(osc)); !ok {
		t.Error("the node is no longer asked with -x alone")
	}

	// An ibsim leaf wrongly held for such a node: its -x answer lacks the
	// error counters, so it is asked both ways, in this very sweep.
	plain := mustFind(t, sweepWith(t, SweeperConfig{Path: path}), leaf1, 1).Values
	if err := os.Truncate(argsLog, 0); err != nil {
		t.Fatal(err)
	}
	s.addl.Store(uint64(leaf1), struct{}{})
	sw2 := func() *Sweep {
		topo := ibsimTopology(t)
		s.cfg.Topology = func() *Fabric { return topo }
		s.SweepOnce(context.Background())
		return s.Status().Last
	}()
	if got := mustFind(t, sw2, leaf1, 1).Values; got != plain {
		t.Errorf("leaf1/1 after the fallback:\n%+v\nwant as a plain sweep:\n%+v", got, plain)
	}
	if b, _ := os.ReadFile(argsLog); strings.Count(string(b), "-x -l 2 1-36\n") != 2 || !strings.Contains(string(b), "\n-l 2 1-36\n") && !strings.HasPrefix(string(b), "-l 2 1-36\n") {
		t.Errorf("leaf1 was not asked -x alone, then both ways, after its -x answer fell short:\n%s", b)
	}
	for _, g := range []uint64{leaf1, spine1, leaf2, osc} {
		if _, ok := s.addl.Load(g); ok {
			t.Errorf("node 0x%x still asked with -x alone after an ibsim sweep", g)
		}
	}
}
