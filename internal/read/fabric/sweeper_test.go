// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/ndcache"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// iqeFixture is a recording in testdata/ibqueryerrors (README.md there).
func iqeFixture(name string) string { return fabrictest.Recording(name) }

// The recorded ibsim fabric's switches (ibsim16-iblinkinfo.stdout).
const (
	spine1 = 0x0000000000200000
	spine2 = 0x0000000000200001
	leaf1  = 0x0000000000200002
	leaf2  = 0x0000000000200003
	leaf3  = 0x0000000000200004
	leaf4  = 0x0000000000200005
	host3  = 0x0000000000100005 // host0003's port GUID
)

// fakeTools is the recorded fabric's tools (fabrictest), with errRun and
// dataRun, when set, in place of each ibqueryerrors run's recorded
// answer; dir is where they log their runs.
func fakeTools(t *testing.T, errRun, dataRun string) (cfg SweeperConfig, dir string) {
	t.Helper()
	tools := fabrictest.InstallWith(t, fabrictest.Answers{Errors: errRun, Counters: dataRun})
	return SweeperConfig{IBQueryErrors: tools.IBQueryErrors, IBNetDiscover: tools.IBNetDiscover, SMInfo: tools.SMInfo, Dir: t.TempDir()}, tools.Dir
}

func runs(t *testing.T, dir string) []string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, "args"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func ibsimTopology(t *testing.T) *Fabric {
	b, err := os.ReadFile(iqeFixture("ibsim16-iblinkinfo.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, b)
}

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
// the recording (testdata/ibqueryerrors/README.md) read back with their
// widths, the saturated one flagged; a clean port reads a real zero; down
// ports are swept and keep their state; data counters are the 64-bit
// extended ones. A sweep is two ibqueryerrors runs; the fabric is
// discovered once, and again only when its nodes change.
func TestSweepRecordedIbsim(t *testing.T) {
	cfg, dir := fakeTools(t, "", "")
	topo := ibsimTopology(t)
	cfg.Topology = func() *Fabric { return topo }
	s := NewSweeper(cfg)
	s.SweepOnce(context.Background())
	sw := s.Status().Last
	if !sw.OK() || sw.Unknown != 0 || len(sw.Failures) != 0 {
		t.Fatalf("sweep not OK: unknown %d failures %v", sw.Unknown, sw.Failures)
	}
	if len(sw.Ports) != 6*8 {
		t.Errorf("%d ports swept, want the 48 switch ports (CAs are off)", len(sw.Ports))
	}
	p1 := mustFind(t, sw, leaf1, 1)
	if v := p1.Values[SymbolErrors]; v.V != 4200 || v.Bits != 16 || v.Saturated() {
		t.Errorf("leaf1/1 symbol errors %+v, want 4200 in 16 bits, not saturated", v)
	}
	if v := mustFind(t, sw, leaf1, 2).Values[SymbolErrors]; v.V != 65535 || !v.Saturated() {
		t.Errorf("leaf1/2 symbol errors %+v: 70000 was set, ibsim clipped it to 65535: saturated", v)
	}
	if v := mustFind(t, sw, spine1, 2).Values[TransmitDiscards]; v.V != 77 || v.Bits != 16 {
		t.Errorf("spine1/2 discards %+v", v)
	}
	if v := mustFind(t, sw, leaf2, 5).Values[LinkDowned]; v.V != 3 || v.Bits != 8 {
		t.Errorf("leaf2/5 link downed %+v", v)
	}
	if v := mustFind(t, sw, leaf3, 6).Values[TransmitWait]; v.V != 100000 || v.Bits != 32 {
		t.Errorf("leaf3/6 xmit wait %+v", v)
	}
	clean := mustFind(t, sw, leaf3, 1)
	for id := range NumCounters {
		v := clean.Values[id]
		if !v.Present {
			t.Errorf("leaf3/1 %s absent", Counters[id].Field)
		}
		if Counters[id].Error && v.V != 0 {
			t.Errorf("leaf3/1 %s = %d, want a real zero", Counters[id].Field, v.V)
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
	down := mustFind(t, sw, leaf4, 4)
	if down.State != infiniband.StateDown || down.Unknown || !down.Values[SymbolErrors].Present {
		t.Errorf("unplugged port leaf4/4: %+v", down)
	}

	s.SweepOnce(context.Background())
	r := runs(t, dir)
	if len(r) != 5 || strings.Count(strings.Join(r, "\n"), "ibnetdiscover") != 1 {
		t.Errorf("two sweeps ran:\n%s\nwant one ibnetdiscover, then two ibqueryerrors per sweep", strings.Join(r, "\n"))
	}
	for _, l := range r[1:] {
		if !strings.Contains(l, "--load-cache") || strings.Contains(l, "-k") || strings.Contains(l, "-K") {
			t.Errorf("%q: every ibqueryerrors reads the cache and none clears counters", l)
		}
	}
	// A topology whose nodes changed (a LID moved) is discovered again.
	moved := *topo
	moved.PortLines = append([]PortLine{}, topo.PortLines...)
	moved.PortLines[0].LID += 100
	s.cfg.Topology = func() *Fabric { return &moved }
	s.SweepOnce(context.Background())
	if n := strings.Count(strings.Join(runs(t, dir), "\n"), "ibnetdiscover"); n != 2 {
		t.Errorf("%d discoveries after the topology changed, want 2", n)
	}
}

// TestSweepSilentSwitch: a switch that stops answering (ibsim `Error
// "S-leaf004" 100`, recorded: every query of it failed on stderr, the runs
// went on and exited 1 and 0) costs only its own ports, which are unknown,
// not zero; the rest of the sweep stands.
func TestSweepSilentSwitch(t *testing.T) {
	cfg, _ := fakeTools(t,
		`cat `+iqeFixture("ibsim16-errors-leaf004-silent.stdout")+`; cat `+iqeFixture("ibsim16-errors-leaf004-silent.stderr")+` >&2; exit 1`,
		`cat `+iqeFixture("ibsim16-counters-leaf004-silent.stdout")+`; cat `+iqeFixture("ibsim16-counters-leaf004-silent.stderr")+` >&2`)
	sw := sweepWith(t, cfg)
	if sw.OK() || sw.Unknown != 8 || sw.Failures[ReasonMAD] != 2 {
		t.Errorf("unknown %d failures %v, want leaf4's 8 ports unknown and both runs counted", sw.Unknown, sw.Failures)
	}
	for port := 1; port <= 8; port++ {
		if p := mustFind(t, sw, leaf4, port); !p.Unknown || p.Reason != ReasonMAD || p.Values[SymbolErrors].Present || p.Values[DataReceived].Present {
			t.Errorf("leaf4/%d: %+v", port, p)
		}
	}
	if p := mustFind(t, sw, leaf1, 1); p.Unknown || p.Values[SymbolErrors].V != 4200 {
		t.Errorf("leaf1/1 %+v", p)
	}
}

// TestSweepExitCodesLie: what a run means is read from its output and
// standard error, not its exit status.
func TestSweepExitCodesLie(t *testing.T) {
	for _, c := range []struct {
		name, errRun string
		reason       Reason
		unknown      int
	}{
		{"exit 0, only error text", `echo "ibwarn: [9] main: loading cached fabric failed" >&2; exit 0`, ReasonMAD, 48},
		{"exit 0, nothing", `exit 0`, ReasonUnparsable, 48},
		{"exit 1, cut short before the summary", `head -4 ` + iqeFixture("ibsim16-errors.stdout") + `; exit 1`, ReasonUnparsable, 48},
		{"failures it does not name", `sed 's/^## Suppressed:/##          3 PMA query failures\n## Suppressed:/' ` + iqeFixture("ibsim16-errors.stdout") + `; exit 1`, ReasonMAD, 48},
		{"thresholds not taken", `sed 's/SymbolErrorCounter = 0/SymbolErrorCounter = 10/' ` + iqeFixture("ibsim16-errors.stdout") + `; exit 1`, ReasonUnparsable, 48},
		{"a stray warning after a full run", `cat ` + iqeFixture("ibsim16-errors.stdout") + `; echo "ibwarn: [9] something: timeout" >&2; exit 1`, ReasonMAD, 0},
		{"lines not in its format", `echo hello; cat ` + iqeFixture("ibsim16-errors.stdout") + `; exit 1`, ReasonUnparsable, 0},
		{"a malformed value", `sed 's/SymbolErrorCounter == 4200/SymbolErrorCounter == x4200/' ` + iqeFixture("ibsim16-errors.stdout") + `; exit 1`, ReasonUnparsable, 1},
		{"exit 2 after a full run", `cat ` + iqeFixture("ibsim16-errors.stdout") + `; exit 2`, ReasonMAD, 48},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := fakeTools(t, c.errRun, "")
			sw := sweepWith(t, cfg)
			if sw.OK() || sw.Unknown != c.unknown || sw.Failures[c.reason] != 1 {
				t.Errorf("unknown %d failures %v, want %d unknown and 1 %s", sw.Unknown, sw.Failures, c.unknown, c.reason)
			}
			if p := mustFind(t, sw, leaf3, 1); p.Unknown != (c.unknown == 48) || p.Unknown && p.Values[SymbolErrors].Present {
				t.Errorf("leaf3/1: %+v", p)
			}
		})
	}
}

// TestSweepDataRunMissingPort: a port the data run did not print is
// unknown, never zeros.
func TestSweepDataRunMissingPort(t *testing.T) {
	cfg, _ := fakeTools(t, "", `grep -v 'GUID 0x200004 port 3:' `+iqeFixture("ibsim16-counters.stdout"))
	sw := sweepWith(t, cfg)
	if p := mustFind(t, sw, leaf3, 3); !p.Unknown || p.Reason != ReasonUnparsable || p.Values[DataReceived].Present || p.Values[SymbolErrors].Present {
		t.Errorf("leaf3/3 %+v", p)
	}
	if sw.Unknown != 1 {
		t.Errorf("%d unknown, want 1", sw.Unknown)
	}
}

// TestSweepHugeOutputBounded: a run that never stops printing is killed
// at MaxOutput; every port is unknown (output_too_large).
func TestSweepHugeOutputBounded(t *testing.T) {
	cfg, _ := fakeTools(t, "", `yes "   GUID 0x200004 port 1: [PortXmitData == 1 (1.000)]"`)
	cfg.MaxOutput = 1 << 20
	sw := sweepWith(t, cfg)
	if sw.Failures[ReasonOutputTooLarge] != 1 || sw.Unknown != 48 {
		t.Errorf("failures %v unknown %d", sw.Failures, sw.Unknown)
	}
}

func TestSweepToolMissingAndTimeout(t *testing.T) {
	cfg, _ := fakeTools(t, "", "")
	cfg.IBNetDiscover = filepath.Join(t.TempDir(), "no-ibnetdiscover")
	sw := sweepWith(t, cfg)
	if sw.Failures[ReasonStart] != 1 || sw.Unknown != 48 {
		t.Errorf("missing tool: failures %v unknown %d", sw.Failures, sw.Unknown)
	}
	cfg, _ = fakeTools(t, "exec sleep 1000", "")
	cfg.Timeout = 300 * time.Millisecond
	sw = sweepWith(t, cfg)
	if sw.Failures[ReasonTimeout] != 1 || sw.Unknown != 48 {
		t.Errorf("hung tool: failures %v unknown %d", sw.Failures, sw.Unknown)
	}
	cfg, _ = fakeTools(t, "", "")
	cfg.Dir = filepath.Join(t.TempDir(), "no", "such", "dir")
	sw = sweepWith(t, cfg)
	if sw.Failures[ReasonStart] != 1 || sw.Unknown != 48 {
		t.Errorf("unwritable cache directory: failures %v unknown %d", sw.Failures, sw.Unknown)
	}
}

// TestSweepCAsAndShards: CA ports only when asked (their data lines name
// the node GUID, not the port's); shards hand ibqueryerrors a cache of
// their own nodes only, and their union is every port exactly once.
func TestSweepCAsAndShards(t *testing.T) {
	cfg, _ := fakeTools(t, "", "")
	cfg.CAs = true
	sw := sweepWith(t, cfg)
	// host0016's cable is pulled: the scan does not reach it.
	if len(sw.Ports) != 48+15 || !sw.OK() {
		t.Errorf("%d ports (OK %v, unknown %d), want 48 switch ports and 15 CA ports", len(sw.Ports), sw.OK(), sw.Unknown)
	}
	if p := mustFind(t, sw, host3, 1); p.Switch || p.Unknown || p.Values[ReceiveErrors].V != 9 || p.Values[DataReceived].Bits != 64 || p.Values[DataReceived].V == 0 {
		t.Errorf("host0003/1: %+v", p)
	}
	topo := ibsimTopology(t)
	for _, n := range []int{2, 3} {
		seen := map[PortKey]int{}
		for i := range n {
			cfg, dir := fakeTools(t, "", "")
			cfg.Shard, cfg.Shards, cfg.Topology = i, n, func() *Fabric { return topo }
			sw := sweepWith(t, cfg)
			for _, p := range sw.Ports {
				seen[PortKey{p.GUID, p.Port}]++
				if p.Unknown {
					t.Errorf("shard %d/%d: 0x%x/%d unknown", i, n, p.GUID, p.Port)
				}
			}
			loaded, _ := filepath.Glob(filepath.Join(dir, "loaded-*"))
			if len(loaded) != 2 {
				t.Fatalf("%d caches handed to ibqueryerrors, want 2", len(loaded))
			}
			b, _ := os.ReadFile(loaded[0])
			c, err := ndcache.Parse(bytes.NewReader(b), ndcache.MaxBytes)
			if err != nil {
				t.Fatalf("shard %d/%d cache: %v", i, n, err)
			}
			for _, nd := range c.Nodes {
				g, _ := nd.LineGUID(1)
				if nd.GUID != c.From && ShardOf(g, n) != i {
					t.Errorf("shard %d/%d's cache holds node 0x%x of shard %d", i, n, nd.GUID, ShardOf(g, n))
				}
			}
		}
		if len(seen) != 48 {
			t.Errorf("%d shards cover %d ports, want 48", n, len(seen))
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
	s := NewSweeper(SweeperConfig{IBQueryErrors: "true", Loop: Loop{Topology: func() *Fabric {
		entered <- struct{}{}
		<-release
		return nil
	}}})
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

// TestSweepWarnsOnce: a switch failing in every sweep makes one warning,
// not one per sweep; recovery is logged once.
func TestSweepWarnsOnce(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "fail")
	cfg, _ := fakeTools(t,
		`if [ -e `+flag+` ]; then cat `+iqeFixture("ibsim16-errors-leaf004-silent.stdout")+`; cat `+iqeFixture("ibsim16-errors-leaf004-silent.stderr")+` >&2; else cat `+iqeFixture("ibsim16-errors.stdout")+`; fi; exit 1`, "")
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Records{}
	topo := ibsimTopology(t)
	cfg.Logger, cfg.Topology = slog.New(logs), func() *Fabric { return topo }
	s := NewSweeper(cfg)
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

// TestSweepUndiscoveredNode: a switch the scan saw but the discovery did
// not reach (it fell silent in between) is unknown, and counted as a
// failure: never a clean sweep.
func TestSweepUndiscoveredNode(t *testing.T) {
	cfg, _ := fakeTools(t, "", "")
	topo := ibsimTopology(t)
	extra := *topo
	extra.PortLines = append([]PortLine{}, topo.PortLines...)
	for p := 1; p <= 4; p++ {
		extra.PortLines = append(extra.PortLines, PortLine{GUID: 0x300000, Desc: "gone", LID: 40, Port: p, Switch: true, State: 4})
	}
	cfg.Topology = func() *Fabric { return &extra }
	sw := sweepWith(t, cfg)
	if sw.OK() || sw.Unknown != 4 || sw.Failures[ReasonMAD] != 1 {
		t.Errorf("unknown %d failures %v, want the 4 undiscovered ports and one failure", sw.Unknown, sw.Failures)
	}
	if p := mustFind(t, sw, 0x300000, 1); !p.Unknown || p.Values[SymbolErrors].Present {
		t.Errorf("undiscovered port: %+v", p)
	}
}

// TestSweepRemovesItsDirectory: the private cache directory a sweeper
// made is gone once Run returns; one given with Dir is left.
func TestSweepRemovesItsDirectory(t *testing.T) {
	cfg, _ := fakeTools(t, "", "")
	given := cfg.Dir
	for _, dir := range []string{"", given} {
		cfg.Dir = dir
		topo := ibsimTopology(t)
		cfg.Topology = func() *Fabric { return topo }
		s := NewSweeper(cfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		for deadline := time.Now().Add(30 * time.Second); s.Status().Sweeps == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no sweep in 30 s") // the bound of a wait, not a timed assertion
			}
		}
		used := s.dir
		cancel()
		<-done
		_, err := os.Stat(used)
		if dir == "" && !os.IsNotExist(err) {
			t.Errorf("the sweeper's own directory %s is still there (%v)", used, err)
		}
		if dir != "" && err != nil {
			t.Errorf("the given directory %s: %v", used, err)
		}
	}
}

// TestSweepValueWiderThanField: a bare value wider than its PortCounters
// field (70000 in the 16-bit SymbolErrorCounter, 300 in the 8-bit
// LinkDownedCounter, both edited into the recorded errors run; ibsim itself
// clips what it is set to) is no PMA's answer: the port is unknown and the
// sweep counts it, never a saturated 65535 with saturated 0. The same
// value with the human-readable figure is a 64-bit one and is read.
func TestSweepValueWiderThanField(t *testing.T) {
	for _, c := range []struct {
		name, sed string
		guid      uint64
		port      int
		unknown   bool
	}{
		{"16-bit field", `s/SymbolErrorCounter == 4200/SymbolErrorCounter == 70000/`, leaf1, 1, true},
		{"8-bit field", `s/port 5: \[LinkDownedCounter == 3\]/port 5: [LinkDownedCounter == 300]/`, leaf2, 5, true},
		{"64-bit field", `s/SymbolErrorCounter == 4200/SymbolErrorCounter == 70000 (70.000K)/`, leaf1, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := fakeTools(t, `sed '`+c.sed+`' `+iqeFixture("ibsim16-errors.stdout")+`; exit 1`, "")
			sw := sweepWith(t, cfg)
			p := mustFind(t, sw, c.guid, c.port)
			if !c.unknown {
				if p.Unknown || !sw.OK() || p.Values[SymbolErrors].V != 70000 || p.Values[SymbolErrors].Bits != 64 {
					t.Errorf("port %+v, sweep OK %v", p, sw.OK())
				}
				return
			}
			if !p.Unknown || p.Reason != ReasonUnparsable || p.Values[SymbolErrors].Present || p.Values[LinkDowned].Present {
				t.Errorf("port: %+v", p)
			}
			if sw.OK() || sw.Unknown != 1 || sw.Failures[ReasonUnparsable] != 1 {
				t.Errorf("unknown %d failures %v, want the one port unknown and counted", sw.Unknown, sw.Failures)
			}
		})
	}
}

// TestSweepDuplicatePortLines: a port printed twice (a clean-looking
// line, then one carrying errors; or a data line repeated) is unknown and
// counted: neither line is kept as the port's read.
func TestSweepDuplicatePortLines(t *testing.T) {
	twice := `s/^   GUID 0x200004 port 6: .*$/   GUID 0x200004 port 1: [PortXmitWait == 1]\n   GUID 0x200004 port 1: [SymbolErrorCounter == 500]\n&/`
	cfg, _ := fakeTools(t, `sed '`+twice+`' `+iqeFixture("ibsim16-errors.stdout")+`; exit 1`,
		`sed '/GUID 0x200005 port 2:/p' `+iqeFixture("ibsim16-counters.stdout"))
	sw := sweepWith(t, cfg)
	for _, k := range []PortKey{{leaf3, 1}, {leaf4, 2}} {
		if p := mustFind(t, sw, k.GUID, k.Port); !p.Unknown || p.Reason != ReasonUnparsable || p.Values[SymbolErrors].Present || p.Values[DataReceived].Present {
			t.Errorf("0x%x/%d: %+v", k.GUID, k.Port, p)
		}
	}
	if sw.OK() || sw.Unknown != 2 || sw.Failures[ReasonUnparsable] != 1 {
		t.Errorf("unknown %d failures %v, want 2 unknown and one failure", sw.Unknown, sw.Failures)
	}
	if p := mustFind(t, sw, leaf3, 6); p.Unknown || p.Values[TransmitWait].V != 100000 {
		t.Errorf("leaf3/6 %+v", p)
	}
}

// TestSweepFailureOnUnknownLID: a failed query naming a LID no node of
// the fabric cache answers on (the recorded silent leaf004's failures,
// re-addressed to LID 99) cannot be placed on a port: every port of the
// run is unknown, never read as clean.
func TestSweepFailureOnUnknownLID(t *testing.T) {
	cfg, _ := fakeTools(t,
		`cat `+iqeFixture("ibsim16-errors-leaf004-silent.stdout")+`; sed 's/Lid 6/Lid 99/' `+iqeFixture("ibsim16-errors-leaf004-silent.stderr")+` >&2; exit 1`, "")
	sw := sweepWith(t, cfg)
	if sw.OK() || sw.Unknown != 48 || sw.Failures[ReasonMAD] != 1 {
		t.Errorf("unknown %d failures %v, want all 48 ports unknown and the run counted", sw.Unknown, sw.Failures)
	}
	if p := mustFind(t, sw, leaf4, 1); !p.Unknown || p.Reason != ReasonMAD || p.Values[SymbolErrors].Present {
		t.Errorf("leaf4/1 %+v", p)
	}
}

// TestSweepCoverage: the runs' summaries must cover the cache they read
// (6 switches, 48 ports here; the recorded runs, made with --ca, say 21
// nodes and 63 ports): a run that says it checked nothing, or fewer ports
// than the cache holds, or two runs that checked different numbers of
// nodes, leave every port unknown, never real zeros.
func TestSweepCoverage(t *testing.T) {
	errs, data := iqeFixture("ibsim16-errors.stdout"), iqeFixture("ibsim16-counters.stdout")
	for _, c := range []struct{ name, errRun, dataRun string }{
		{"errors run checked nothing",
			`sed -e '/GUID/d' -e '/Errors for/d' -e 's/21 nodes checked, 5 bad/0 nodes checked, 0 bad/' -e 's/63 ports checked, 6 ports/0 ports checked, 0 ports/' ` + errs + `; exit 0`, ""},
		{"data run checked fewer ports than the cache holds",
			"", `sed 's/63 ports checked/40 ports checked/' ` + data},
		{"the runs disagree on the nodes",
			`sed 's/21 nodes checked/20 nodes checked/' ` + errs + `; exit 1`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := fakeTools(t, c.errRun, c.dataRun)
			sw := sweepWith(t, cfg)
			if sw.OK() || sw.Unknown != 48 || sw.Failures[ReasonUnparsable] != 1 {
				t.Errorf("unknown %d failures %v, want all 48 ports unknown and one failure", sw.Unknown, sw.Failures)
			}
			if p := mustFind(t, sw, leaf3, 1); !p.Unknown || p.Values[SymbolErrors].Present {
				t.Errorf("leaf3/1 %+v", p)
			}
		})
	}
}

// TestSweepCoverageFloorIsTight: the floor a run's summary must reach is
// exactly what the real ibqueryerrors reported on the recorded fabric:
// 6 nodes and 48 ports with --switch (the leaf004-silent runs), 21 and 63
// with --switch --ca (ibsim16-errors, ibsim16-counters).
func TestSweepCoverageFloorIsTight(t *testing.T) {
	for _, c := range []struct {
		cas  bool
		want coverage
	}{{false, coverage{6, 48}}, {true, coverage{21, 63}}} {
		cfg, _ := fakeTools(t, "", "")
		cfg.CAs = c.cas
		topo := ibsimTopology(t)
		cfg.Topology = func() *Fabric { return topo }
		s := NewSweeper(cfg)
		s.SweepOnce(context.Background())
		if s.expect != c.want || !s.Status().Last.OK() {
			t.Errorf("CAs %v: floor %+v, want %+v (sweep OK %v)", c.cas, s.expect, c.want, s.Status().Last.OK())
		}
	}
}

// TestSweepThresholdsNotZero: an errors run whose summary prints any
// non-zero threshold (not only SymbolErrorCounter's) leaves every port
// unknown: its unprinted counters are not real zeros.
func TestSweepThresholdsNotZero(t *testing.T) {
	for _, field := range []string{"PortXmitWait", "LinkDownedCounter", "VL15Dropped"} {
		cfg, _ := fakeTools(t, `sed 's/\[`+field+` = 0\]/[`+field+` = 100]/' `+iqeFixture("ibsim16-errors.stdout")+`; exit 1`, "")
		sw := sweepWith(t, cfg)
		if sw.OK() || sw.Unknown != 48 || sw.Failures[ReasonUnparsable] != 1 {
			t.Errorf("%s threshold 100: unknown %d failures %v, want all 48 unknown", field, sw.Unknown, sw.Failures)
		}
	}
}

// TestSweepThresholdFileEveryRun: the threshold file is written again
// before every errors run, so one replaced between sweeps is never read.
func TestSweepThresholdFileEveryRun(t *testing.T) {
	seen := t.TempDir()
	cfg, _ := fakeTools(t, `n=0; p=; for x; do [ "$p" = --threshold-file ] && n=$(ls `+seen+` | wc -l) && cp "$x" `+seen+`/$n; p=$x; done
cat `+iqeFixture("ibsim16-errors.stdout")+`; exit 1`, "")
	topo := ibsimTopology(t)
	cfg.Topology = func() *Fabric { return topo }
	s := NewSweeper(cfg)
	s.SweepOnce(context.Background())
	if err := os.WriteFile(filepath.Join(cfg.Dir, "thresholds"), []byte("SymbolErrorCounter=1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.SweepOnce(context.Background())
	for i := range 2 {
		b, err := os.ReadFile(filepath.Join(seen, strconv.Itoa(i)))
		if err != nil || string(b) != thresholds {
			t.Errorf("errors run %d read the threshold file %q (%v), want the zero thresholds", i+1, b, err)
		}
	}
	if !s.Status().Last.OK() {
		t.Errorf("second sweep not OK: %+v", s.Status().Last.Failures)
	}
}

// TestSweepUnsafeCacheDir: a cache directory its group or others can
// write, or owned by another user, is refused with one log line: every
// port is unknown (start_failed) and no tool runs.
func TestSweepUnsafeCacheDir(t *testing.T) {
	other := "/usr" // root's: another user's unless the test runs as root
	if os.Geteuid() == 0 {
		other = t.TempDir()
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		{"world-writable", func(t *testing.T) string { return chmodDir(t, 0o777) }, "group or others"},
		{"group-writable", func(t *testing.T) string { return chmodDir(t, 0o770) }, "group or others"},
		{"another user's", func(t *testing.T) string { return other }, "not owned by"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, tools := fakeTools(t, "", "")
			cfg.Dir = c.dir(t)
			logs := &testenv.Records{}
			topo := ibsimTopology(t)
			cfg.Logger, cfg.Topology = slog.New(logs), func() *Fabric { return topo }
			s := NewSweeper(cfg)
			s.SweepOnce(context.Background())
			s.SweepOnce(context.Background())
			sw := s.Status().Last
			if sw.OK() || sw.Unknown != 48 || sw.Failures[ReasonStart] != 1 {
				t.Errorf("unknown %d failures %v, want all 48 unknown (start_failed)", sw.Unknown, sw.Failures)
			}
			if r := runs(t, tools); len(r) != 1 || r[0] != "" {
				t.Errorf("tools ran in a refused directory: %q", r)
			}
			if n := logged(logs, "refusing the fabric cache directory "+cfg.Dir); n != 1 {
				t.Errorf("%d log lines refusing the directory in 2 sweeps, want 1", n)
			}
			if n := logged(logs, c.want); n != 1 {
				t.Errorf("no log line saying %q", c.want)
			}
		})
	}
}

// logged counts the records whose message or an attribute holds substr.
func logged(logs *testenv.Records, substr string) int {
	n := 0
	for _, r := range logs.Matching("") {
		hit := strings.Contains(r.Message, substr)
		r.Attrs(func(a slog.Attr) bool {
			hit = hit || strings.Contains(a.Value.String(), substr)
			return !hit
		})
		if hit {
			n++
		}
	}
	return n
}

func chmodDir(t *testing.T, mode os.FileMode) string {
	d := t.TempDir()
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}
