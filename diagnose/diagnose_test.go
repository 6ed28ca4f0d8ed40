// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"errors"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/cpulist"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/tuning"
)

func mustParse(t testing.TB, y string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// snapWith is a snapshot with one healthy InfiniBand port, for checks that
// only read the class.
func snapWith(devs ...infiniband.Device) *Reading {
	return &Reading{Time: time.Unix(1000, 0), Host: &fixedHost{class: &infiniband.Class{Devices: devs}}}
}

// TestEvaluatorNeverCrashes: a check that panics, errors, returns nothing,
// or needs data that is missing becomes a skip finding saying why; the
// checks after it still run.
func TestEvaluatorNeverCrashes(t *testing.T) {
	pass := func(*Reading, *History, *config.Config) ([]Finding, error) {
		return []Finding{{Severity: Pass, Target: "x"}}, nil
	}
	checks := []*Check{
		{ID: "t.panic", Run: func(*Reading, *History, *config.Config) ([]Finding, error) {
			var p *infiniband.Port
			_ = p.Num // nil dereference
			return nil, nil
		}},
		{ID: "t.error", Run: func(*Reading, *History, *config.Config) ([]Finding, error) {
			return []Finding{{Severity: Warn, Target: "y"}}, errors.New("boom")
		}},
		{ID: "t.empty", Run: func(*Reading, *History, *config.Config) ([]Finding, error) { return nil, nil }},
		{ID: "t.pending", Pending: "no collector reads X yet"},
		{ID: "t.nodata", Reads: []Source{SourceInfiniband}, Run: pass},
		{ID: "t.noirq", Reads: []Source{SourceIRQ}, Run: pass},
		{ID: "t.defaults", Run: func(*Reading, *History, *config.Config) ([]Finding, error) {
			return []Finding{{Check: "wrong"}}, nil
		}},
		{ID: "t.ok", Run: pass},
	}
	e, err := newEvaluator(nil, nil, checks)
	if err != nil {
		t.Fatal(err)
	}
	r := e.Evaluate(&Reading{Host: &fixedHost{classErr: infiniband.ErrNoClass}}, nil)
	got := map[string][]Finding{}
	for _, f := range r.Findings {
		got[f.Check] = append(got[f.Check], f)
	}
	want := []struct {
		id       string
		sev      Severity
		evidence string
	}{
		{"t.panic", Skip, "check failed: panic: runtime error: invalid memory address"},
		{"t.error", Skip, "check failed: boom"},
		{"t.empty", Skip, "nothing to judge"},
		{"t.pending", Skip, "no collector reads X yet"},
		{"t.nodata", Skip, "no RDMA devices"},
		{"t.noirq", Skip, "PCI functions and IRQs were not read"},
		{"t.defaults", Skip, ""},
		{"t.ok", Pass, ""},
	}
	for _, w := range want {
		fs := got[w.id]
		if len(fs) == 0 {
			t.Errorf("%s: no finding", w.id)
			continue
		}
		last := fs[len(fs)-1]
		if last.Severity != w.sev || !strings.Contains(last.Evidence, w.evidence) || last.Target == "" {
			t.Errorf("%s: got %+v, want %s with evidence %q", w.id, last, w.sev, w.evidence)
		}
	}
	if len(got["t.error"]) != 2 || got["t.error"][0].Severity != Warn {
		t.Errorf("an erroring check keeps its findings and adds the error: %+v", got["t.error"])
	}
	if len(got["wrong"]) != 0 {
		t.Error("a check cannot report under another id")
	}
	// The status is the worst severity: the warn t.error kept.
	if r.Status != Warn || r.Summary.Pass != 1 || r.Summary.Warn != 1 || r.Summary.Skip != 7 || r.Version != SchemaVersion {
		t.Errorf("status %s summary %+v", r.Status, r.Summary)
	}
	if len(r.Checks) != len(checks) || r.Checks[0].Status != Skip || r.Checks[len(checks)-1].Status != Pass {
		t.Errorf("checks %+v", r.Checks)
	}
}

func TestEvaluatorSelection(t *testing.T) {
	checks := []*Check{{ID: "a.one", Pending: "p"}, {ID: "a.two", Pending: "p"}, {ID: "b.one", Pending: "p"}}
	ids := func(e *Evaluator) string {
		var s []string
		for _, c := range e.Checks() {
			s = append(s, c.ID)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		cfg  string
		only []string
		want string
		err  string
	}{
		{"", nil, "a.one,a.two,b.one", ""},
		{"", []string{"a.*"}, "a.one,a.two", ""},
		{"", []string{"b.one", "a.two"}, "a.two,b.one", ""},
		{"diagnose:\n  disable: [a.two]\n", nil, "a.one,b.one", ""},
		{"diagnose:\n  disable: [\"a.*\"]\n", []string{"a.one", "b.one"}, "b.one", ""},
		{"diagnose:\n  disable: [c.one]\n", nil, "", "line 2"},
		{"", []string{"c.*"}, "", "matches no check"},
		{"", []string{"a.["}, "", "syntax error"},
	} {
		e, err := newEvaluator(mustParse(t, tc.cfg), tc.only, checks)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %v: err %v, want %q", tc.cfg, tc.only, err, tc.err)
			}
			continue
		}
		if err != nil || ids(e) != tc.want {
			t.Errorf("%q %v: %v %v, want %s", tc.cfg, tc.only, ids(e), err, tc.want)
		}
	}
}

// TestRegistry: every check has the fields the docs and reports need, ids
// are unique and ordered by concern, and pending checks say why.
func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	last := -1
	for _, c := range Checks() {
		if seen[c.ID] {
			t.Errorf("duplicate id %s", c.ID)
		}
		seen[c.ID] = true
		if c.Title == "" || c.Doc == "" || c.Remedy == "" {
			t.Errorf("%s: title, doc and remedy are required", c.ID)
		}
		if c.Run == nil && c.Pending == "" {
			t.Errorf("%s: no Run and no Pending reason", c.ID)
		}
		if c.Run != nil && c.Pending != "" {
			t.Errorf("%s: has Run and a Pending reason", c.ID)
		}
		if r := concernRank(c.ID); r < last {
			t.Errorf("%s out of concern order", c.ID)
		} else {
			last = r
		}
		if concernRank(c.ID) == len(concernOrder) {
			t.Errorf("%s: concern not in concernOrder", c.ID)
		}
	}
	for _, id := range []string{"dev.present", "fw.version", "fw.uniform", "port.phys", "port.state", "port.rate", "port.layer",
		"port.traffic", "sm.present", "ctr.symbol", "ctr.downed", "hw.retrans", "hw.fatal", "pci.link", "irq.local", "irq.spread",
		"irq.balance", "cpu.governor", "mem.hugepages", "mem.memlock", "sysctl.net", "ipoib.mode", "ipoib.mtu", "roce.gid_v2",
		"sm.master", "probe.latency", "probe.bandwidth"} {
		if !seen[id] {
			t.Errorf("catalogue check %s missing", id)
		}
	}
}

func ibPort(num int, state, phys int, rate string) infiniband.Port {
	r, _ := infiniband.ParseRate(rate)
	return infiniband.Port{Num: num,
		State:     infiniband.Opt[infiniband.Enum]{V: infiniband.Enum{Value: state, Name: map[int]string{1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}[state]}, OK: true},
		PhysState: infiniband.Opt[infiniband.Enum]{V: infiniband.Enum{Value: phys, Name: map[int]string{2: "Polling", 3: "Disabled", 5: "LinkUp", 6: "LinkErrorRecovery"}[phys]}, OK: true},
		Rate:      infiniband.Opt[infiniband.Rate]{V: r, OK: true},
		LinkLayer: infiniband.Opt[string]{V: "InfiniBand", OK: true},
		SMLID:     infiniband.Opt[uint64]{V: 1, OK: true},
	}
}

func ibDev(name string, ports ...infiniband.Port) infiniband.Device {
	return infiniband.Device{Name: name, PCIAddress: "0000:3b:00.0",
		NodeType:    infiniband.Opt[infiniband.Enum]{V: infiniband.Enum{Value: 1, Name: "CA"}, OK: true},
		HCAType:     infiniband.Opt[string]{V: "MT4123", OK: true},
		BoardID:     infiniband.Opt[string]{V: "MT_0000000223", OK: true},
		FirmwareVer: infiniband.Opt[string]{V: "20.41.1000", OK: true},
		Ports:       ports}
}

func findingOf(t testing.TB, fs []Finding, target string) Finding {
	t.Helper()
	for _, f := range fs {
		if f.Target == target {
			return f
		}
	}
	t.Fatalf("no finding for %s in %+v", target, fs)
	return Finding{}
}

func TestPortChecks(t *testing.T) {
	cfg := mustParse(t, "expected:\n  boards:\n    - {board_id: MT_0000000223, rate_gbps: 200}\n"+
		"diagnose:\n  link_layers:\n    - {hca_type: MT4123, link_layer: InfiniBand}\n")
	noSM := ibPort(1, 2, 5, "200 Gb/sec (4X HDR)")
	noSM.SMLID.V = 0
	eth := ibPort(1, 4, 5, "200 Gb/sec (4X HDR)")
	eth.LinkLayer.V = "Ethernet"
	s := snapWith(
		ibDev("ok", ibPort(1, 4, 5, "200 Gb/sec (4X HDR)")),
		ibDev("fdr", ibPort(1, 4, 5, "56 Gb/sec (4X FDR)")),
		ibDev("hdr100", ibPort(1, 4, 5, "100 Gb/sec (2X HDR)")),
		ibDev("fast", ibPort(1, 4, 5, "400 Gb/sec (4X NDR)")),
		ibDev("polling", ibPort(1, 1, 2, "10 Gb/sec (4X SDR)")),
		ibDev("disabled", ibPort(1, 1, 3, "10 Gb/sec (4X SDR)")),
		ibDev("flaky", ibPort(1, 1, 6, "10 Gb/sec (4X SDR)")),
		ibDev("nosm", noSM),
		ibDev("armed", ibPort(1, 3, 5, "200 Gb/sec (4X HDR)")),
		ibDev("eth", eth),
	)
	// These ports went down after having been up: they must be up.
	fixed(s).wasActive = func(d string, _ int) bool { return d == "polling" || d == "disabled" || d == "flaky" }
	run := func(c func(*Reading, *History, *config.Config) ([]Finding, error)) []Finding {
		fs, err := c(s, NewHistory(0, 2), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	for _, tc := range []struct {
		name   string
		fs     []Finding
		target string
		sev    Severity
		remedy []string
	}{
		{"rate ok", run(checkPortRate), "ok/1", Pass, nil},
		{"rate FDR", run(checkPortRate), "fdr/1", Fail, []string{"switch-port speed setting", "cable", "mlxlink -d 0000:3b:00.0 -p 1", "FDR"}},
		{"rate 2X", run(checkPortRate), "hdr100/1", Fail, []string{"cable", "switch-port speed/width setting", "2X"}},
		{"rate faster", run(checkPortRate), "fast/1", Warn, []string{"expectation"}},
		{"rate of a down port", run(checkPortRate), "polling/1", Skip, nil},
		{"phys ok", run(checkPortPhys), "ok/1", Pass, nil},
		{"phys polling", run(checkPortPhys), "polling/1", Fail, []string{"no peer", "cable"}},
		{"phys disabled", run(checkPortPhys), "disabled/1", Fail, []string{"administratively disabled", "ibportstate -C disabled -P 1"}},
		{"phys recovery", run(checkPortPhys), "flaky/1", Fail, []string{"unstable"}},
		{"state ok", run(checkPortState), "ok/1", Pass, nil},
		{"state INIT LinkUp", run(checkPortState), "nosm/1", Warn, []string{"no subnet manager", "sminfo -C nosm -P 1"}},
		{"state ARMED", run(checkPortState), "armed/1", Fail, []string{"ARMED"}},
		{"state DOWN", run(checkPortState), "polling/1", Fail, []string{"port.phys"}},
		{"sm ok", run(checkSMPresent), "ok/1", Pass, nil},
		{"sm missing", run(checkSMPresent), "nosm/1", Fail, []string{"opensm"}},
		{"sm down port", run(checkSMPresent), "polling/1", Skip, nil},
		{"layer ok", run(checkPortLayer), "ok/1", Pass, nil},
		{"layer VPI Ethernet", run(checkPortLayer), "eth/1", Fail, []string{"mlxconfig -d 0000:3b:00.0 set LINK_TYPE_P1=1"}},
	} {
		f := findingOf(t, tc.fs, tc.target)
		if f.Severity != tc.sev {
			t.Errorf("%s: %s is %s, want %s: %+v", tc.name, tc.target, f.Severity, tc.sev, f)
		}
		for _, r := range tc.remedy {
			if !strings.Contains(f.Remedy, r) {
				t.Errorf("%s: remedy %q lacks %q", tc.name, f.Remedy, r)
			}
		}
	}
	// RoCE ports have no SM: never judged by sm.present.
	for _, f := range run(checkSMPresent) {
		if f.Target == "eth/1" {
			t.Errorf("sm.present judged a RoCE port: %+v", f)
		}
	}
	// No expectation: skip, never a guess from the width.
	fs, _ := checkPortRate(s, nil, &config.Config{})
	if f := findingOf(t, fs, "hdr100/1"); f.Severity != Skip || !strings.Contains(f.Evidence, "expected.boards") {
		t.Errorf("without an expectation: %+v", f)
	}
}

func TestFirmwareChecks(t *testing.T) {
	dev := func(name, hca, board, fw string) infiniband.Device {
		d := ibDev(name)
		d.HCAType.V, d.BoardID.V, d.FirmwareVer.V = hca, board, fw
		return d
	}
	s := snapWith(
		dev("a", "MT4129", "MT_0000000838", "28.41.1000"),
		dev("b", "MT4129", "MT_0000000838", "28.41.1000"),
		dev("c", "MT4129", "MT_0000000838", "28.39.1002"),
		dev("d", "MT4123", "MT_0000000223", "20.41.1000"),
		dev("e", "MT4125", "MT_X", "22.32.2004"),
	)
	cfg := mustParse(t, "diagnose:\n  firmware:\n    - {hca_type: MT4129, minimum: 28.40.0}\n"+
		"    - {board_id: MT_0000000223, allowed: [20.42.1000]}\n    - {hca_type: MT4123, minimum: 1.0}\n")
	fs, err := checkFWVersion(s, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]Severity{"a": Pass, "c": Warn, "d": Warn, "e": Skip} {
		if f := findingOf(t, fs, target); f.Severity != want {
			t.Errorf("fw.version %s: %s, want %s (%+v)", target, f.Severity, want, f)
		}
	}
	if f := findingOf(t, fs, "d"); !strings.Contains(f.Expected, "board_id MT_0000000223") {
		t.Errorf("the board_id policy must win over hca_type: %+v", f)
	}
	if f := findingOf(t, fs, "c"); !strings.Contains(f.Remedy, "mlxfwmanager") || !strings.Contains(f.Remedy, "28.40.0 or later") {
		t.Errorf("remedy %q", f.Remedy)
	}
	fs, _ = checkFWUniform(s, nil, cfg)
	for target, want := range map[string]Severity{"a": Pass, "b": Pass, "c": Warn, "d": Skip} {
		if f := findingOf(t, fs, target); f.Severity != want {
			t.Errorf("fw.uniform %s: %s, want %s (%+v)", target, f.Severity, want, f)
		}
	}
	if f := findingOf(t, fs, "c"); !strings.Contains(f.Expected, "28.41.1000, as 2 of 3") {
		t.Errorf("fw.uniform reference: %+v", f)
	}
}

func TestSMMaster(t *testing.T) {
	ps := func(dev string, ok bool, err error, state sm.State, stalled bool) sm.PortStatus {
		return sm.PortStatus{Target: sm.Target{Device: dev, Port: 1}, OK: ok, Err: err, Stalled: stalled,
			Info: sm.Info{LID: 1, GUID: "0x0002c90300a1b2c3", Priority: 14, State: state, ActivityCount: 42}, HaveInfo: ok}
	}
	st := &sm.Status{Rounds: 2, Ports: []sm.PortStatus{
		ps("master", true, nil, sm.StateMaster, false),
		ps("standby", true, nil, sm.StateStandby, false),
		ps("hung", true, nil, sm.StateMaster, true),
		ps("nosm", false, errors.New("sminfo: iberror: failed: query"), 0, false),
		ps("noumad", false, errors.New("sminfo: iberror: failed: Failed to open 'mlx5_0' port '1'"), 0, false),
		ps("nobinary", false, fmt.Errorf("start sminfo: %w", exec.ErrNotFound), 0, false),
	}}
	s := snapWith()
	fixed(s).sm = st
	fs, err := checkSMMaster(s, nil, &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]Severity{"master/1": Pass, "standby/1": Warn, "hung/1": Warn, "nosm/1": Fail, "noumad/1": Skip, "nobinary/1": Skip} {
		if f := findingOf(t, fs, target); f.Severity != want {
			t.Errorf("%s: %s, want %s: %+v", target, f.Severity, want, f)
		}
	}
	if f := findingOf(t, fs, "master/1"); !strings.Contains(f.Observed, "state MASTER") || !strings.Contains(f.Observed, "priority 14") {
		t.Errorf("observed %q", f.Observed)
	}
	// The source gate: no runner, no umad, no round yet.
	for _, tc := range []struct {
		st   *sm.Status
		want string
	}{
		{nil, "sm collector is disabled"},
		{&sm.Status{TargetsErr: sm.ErrNoUmad}, "ib_umad not loaded"},
		{&sm.Status{}, "has not completed a run"},
	} {
		fixed(s).sm = tc.st
		if r := s.unavailable(SourceSM); !strings.Contains(r, tc.want) {
			t.Errorf("unavailable(sm) with %+v = %q, want %q", tc.st, r, tc.want)
		}
	}
}

func TestProbeChecks(t *testing.T) {
	at := t0
	// The series as bench/probe.Diagnose hands them over (its test checks
	// that adaptation).
	lat := func(peer string, loopback bool, typical float64) ProbeSeries {
		mode := "peer"
		if loopback {
			mode = "loopback"
		}
		r := &ProbeRun{Mode: mode, Loopback: loopback, Start: at, Success: true, Size: 2, Iterations: 1000,
			Latency: &ProbeLatency{Min: typical * 0.9, Typical: typical, Max: typical * 3, P99: typical * 1.5, HasPercentiles: true}}
		return ProbeSeries{Peer: peer, Test: "ib_write_lat", Device: "mlx5_0", Port: 1, Last: r, LastSuccess: at}
	}
	bw := func(peer string, ratio float64) ProbeSeries {
		avg := 50e9 * ratio
		r := &ProbeRun{Mode: "peer", Start: at, Success: true, Size: 65536, Bandwidth: &avg, PortRate: 50e9}
		return ProbeSeries{Peer: peer, Test: "ib_write_bw", Bandwidth: true, Device: "mlx5_0", Port: 1, Last: r, LastSuccess: at}
	}
	failed := func(peer, test, kind string, transport bool) ProbeSeries {
		r := &ProbeRun{Start: at, ErrorKind: kind, Error: "perftest said so", TransportFailed: transport}
		return ProbeSeries{Peer: peer, Test: test, Bandwidth: strings.HasSuffix(test, "_bw"), Device: "mlx5_0", Port: 1, Last: r}
	}
	s := snapWith()
	s.Probe = []ProbeSeries{
		lat("loopback", true, 1.2e-6), lat("loop-slow", true, 2.5e-6), lat("peer-b", false, 2.5e-6),
		failed("peer-c", "ib_send_lat", "retry_exceeded", true), failed("peer-d", "ib_send_lat", "busy", false),
		bw("peer-b", 0.95), bw("peer-e", 0.5), failed("peer-f", "ib_read_bw", "port_down", true),
	}
	cfg := &config.Config{}
	lf, _ := checkProbeLatency(s, nil, cfg)
	bf, _ := checkProbeBandwidth(s, nil, cfg)
	for _, tc := range []struct {
		fs     []Finding
		target string
		sev    Severity
	}{
		{lf, "mlx5_0/1 ib_write_lat loopback", Pass},
		{lf, "mlx5_0/1 ib_write_lat loop-slow", Warn}, // 2.5 µs > 2 µs loopback
		{lf, "mlx5_0/1 ib_write_lat peer-b", Pass},    // 2.5 µs < 5 µs through a switch
		{lf, "mlx5_0/1 ib_send_lat peer-c", Fail},     // the transport gave up
		{lf, "mlx5_0/1 ib_send_lat peer-d", Warn},     // could not measure
		{bf, "mlx5_0/1 ib_write_bw peer-b", Pass},     // 95 %
		{bf, "mlx5_0/1 ib_write_bw peer-e", Warn},     // 50 %
		{bf, "mlx5_0/1 ib_read_bw peer-f", Fail},      // port down
	} {
		if f := findingOf(t, tc.fs, tc.target); f.Severity != tc.sev {
			t.Errorf("%s: %s, want %s: %+v", tc.target, f.Severity, tc.sev, f)
		}
	}
	if f := findingOf(t, bf, "mlx5_0/1 ib_write_bw peer-e"); !strings.Contains(f.Observed, "200.0 Gb/s average, 50% of the port's 400 Gb/s") {
		t.Errorf("bandwidth observed %q", f.Observed)
	}
	// A stricter config turns the peer latency into a warning.
	strict := mustParse(t, "diagnose:\n  thresholds:\n    probe: {switch_latency_us: 2}\n")
	lf, _ = checkProbeLatency(s, nil, strict)
	if f := findingOf(t, lf, "mlx5_0/1 ib_write_lat peer-b"); f.Severity != Warn {
		t.Errorf("switch_latency_us 2: %+v", f)
	}
	s.Probe = nil
	if fs, _ := checkProbeLatency(s, nil, cfg); len(fs) != 1 || fs[0].Evidence != NoProbeResults {
		t.Errorf("no results: %+v", fs)
	}
}

func TestIPoIBChecks(t *testing.T) {
	opt := func(v bool) infiniband.Opt[bool] { return infiniband.Opt[bool]{V: v, OK: true} }
	nd := func(name, mode string, mtu uint64, enhanced, cm bool) netdev.Netdev {
		return netdev.Netdev{Name: name, Kind: netdev.KindIPoIB, MTU: infiniband.Opt[uint64]{V: mtu, OK: true}, IPv6Disabled: opt(true),
			IPoIB: &netdev.IPoIB{Mode: infiniband.Opt[string]{V: mode, OK: true}, Enhanced: opt(enhanced), ConnectedModeSupported: opt(cm)}}
	}
	s := snapWith()
	fixed(s).netdevs = &netdev.Snapshot{Netdevs: []netdev.Netdev{
		nd("enh", "datagram", 4092, true, false),    // enhanced IPoIB: datagram 4092 is right
		nd("legacy", "datagram", 2044, false, true), // legacy, 2K fabric
		nd("cm", "connected", 65520, false, true),
		nd("cmsmall", "connected", 4092, false, true),
		nd("dgodd", "datagram", 1500, false, true),
	}}
	for _, tc := range []struct {
		cfg    string
		check  func(*Reading, *History, *config.Config) ([]Finding, error)
		target string
		sev    Severity
	}{
		{"", checkIPoIBMode, "enh", Pass},
		{"", checkIPoIBMode, "legacy", Pass},
		{"diagnose:\n  policies:\n    ipoib_mode: connected\n", checkIPoIBMode, "enh", Pass}, // never asks the impossible
		{"diagnose:\n  policies:\n    ipoib_mode: connected\n", checkIPoIBMode, "legacy", Warn},
		{"diagnose:\n  policies:\n    ipoib_mode: datagram\n", checkIPoIBMode, "cm", Warn},
		{"", checkIPoIBMTU, "enh", Pass},
		{"", checkIPoIBMTU, "legacy", Pass},
		{"", checkIPoIBMTU, "cm", Pass},
		{"", checkIPoIBMTU, "cmsmall", Warn},
		{"", checkIPoIBMTU, "dgodd", Warn},
		{"", checkIPoIBIPv6, "enh", Pass},
		{"diagnose:\n  policies:\n    ipoib_ipv6: enabled\n", checkIPoIBIPv6, "enh", Warn},
		{"diagnose:\n  policies:\n    ipoib_ipv6: disabled\n", checkIPoIBIPv6, "enh", Pass},
	} {
		fs, err := tc.check(s, nil, mustParse(t, tc.cfg))
		if err != nil {
			t.Fatal(err)
		}
		if f := findingOf(t, fs, tc.target); f.Severity != tc.sev || (f.Severity == Warn && f.Remedy == "") {
			t.Errorf("%q %s: %+v, want %s", tc.cfg, tc.target, f, tc.sev)
		}
	}
}

func TestIRQIncompleteSkips(t *testing.T) {
	local, _ := cpulist.Parse("0-3")
	q := &irq.IRQ{Number: 100, Name: "mlx5_comp0@pci:0000:3b:00.0"}
	d := irq.Device{Name: "mlx5_0", PCI: pci.Function{Address: "0000:3b:00.0", LocalCPUs: infiniband.Opt[cpulist.Set]{V: local, OK: true}},
		IRQs: []irq.DeviceIRQ{{IRQ: q, Vector: irq.Vector{Kind: irq.Completion}, Affinity: infiniband.Opt[cpulist.Set]{V: cpulist.Of(9), OK: true}}}}
	s := snapWith()
	fixed(s).placement = &irq.Snapshot{Interrupts: &irq.Interrupts{}, Devices: []irq.Device{d}}
	fs, _ := checkIRQLocal(s, nil, &config.Config{})
	if f := findingOf(t, fs, "mlx5_0"); f.Severity != Warn || !strings.Contains(f.Evidence, "irq 100") {
		t.Errorf("off-node IRQ: %+v", f)
	}
	s.placement().Devices[0].Incomplete = true
	fs, _ = checkIRQLocal(s, nil, &config.Config{})
	if f := findingOf(t, fs, "mlx5_0"); f.Severity != Skip || !strings.Contains(f.Evidence, "torn") {
		t.Errorf("incomplete IRQ list: %+v", f)
	}
}

// cgroup.rdma: "*" expands over the host's devices, a named device wins
// over "*", and each way a cgroup can miss its limit says which.
func TestRDMACgroupCheck(t *testing.T) {
	cfg := mustParse(t, `diagnose:
  policies:
    rdma_cgroup_limits:
      - {cgroup: /slurm, device: "*", hca_handle: 64, hca_object: max}
      - {cgroup: /slurm, device: mlx5_1, hca_handle: 8, hca_object: 1000}
      - {cgroup: /gone, device: mlx5_0, hca_handle: 1, hca_object: 1}
      - {cgroup: /slurm, device: mlx5_9, hca_handle: 1, hca_object: 1}
`)
	s := snapWith(ibDev("mlx5_0"), ibDev("mlx5_1"))
	fixed(s).tuning = &tuning.Snapshot{RDMAMaxRead: []string{"/slurm"}, RDMACgroups: []tuning.CgroupRDMALimit{
		{Cgroup: "/slurm", RDMALimit: tuning.RDMALimit{Device: "mlx5_0", HCAHandle: tuning.Unlimited, HCAObject: tuning.Unlimited}},
		{Cgroup: "/slurm", RDMALimit: tuning.RDMALimit{Device: "mlx5_1", HCAHandle: 8, HCAObject: 1000}},
	}}
	wants := RDMACgroupWants(s, cfg)
	var got []string
	for _, w := range wants {
		got = append(got, w.Cgroup+" "+tuning.FormatRDMALimit(w.Limit))
	}
	want := []string{"/slurm mlx5_0 hca_handle=64 hca_object=max", "/slurm mlx5_1 hca_handle=8 hca_object=1000",
		"/gone mlx5_0 hca_handle=1 hca_object=1", "/slurm mlx5_9 hca_handle=1 hca_object=1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wants\n %q\nwant\n %q", got, want)
	}
	fs, err := checkRDMACgroups(s, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		sev    Severity
		text   string
	}{
		{"/slurm mlx5_0", Warn, `echo "mlx5_0 hca_handle=64 hca_object=max" > /sys/fs/cgroup/slurm/rdma.max`},
		{"/slurm mlx5_1", Pass, "hca_handle=8 hca_object=1000"},
		{"/gone mlx5_0", Warn, "echo +rdma > /sys/fs/cgroup/cgroup.subtree_control"},
		{"/slurm mlx5_9", Warn, "not registered with the rdma controller"},
	} {
		f := findingOf(t, fs, c.target)
		if all := f.Observed + " " + f.Remedy; f.Severity != c.sev || !strings.Contains(all, c.text) {
			t.Errorf("%s: %s %q, want %s with %q", c.target, f.Severity, all, c.sev, c.text)
		}
		if (f.Action == "rdma-cgroup") != (c.target == "/slurm mlx5_0") {
			t.Errorf("%s: action %q", c.target, f.Action)
		}
	}
	// Without a policy the check skips; with "*" and no devices too.
	if fs, _ := checkRDMACgroups(s, nil, &config.Config{}); len(fs) != 1 || fs[0].Severity != Skip {
		t.Errorf("no policy: %+v", fs)
	}
	star := mustParse(t, "diagnose:\n  policies:\n    rdma_cgroup_limits: [{cgroup: /a, device: \"*\", hca_handle: 1, hca_object: 1}]\n")
	if fs, _ := checkRDMACgroups(snapWith(), nil, star); len(fs) != 1 || fs[0].Severity != Skip {
		t.Errorf("no devices: %+v", fs)
	}
}

// dev.present names why devices are missing from what the PCI bus shows.
func TestDevPresentBusHint(t *testing.T) {
	cx7 := func(addr, drv string) pci.BusFunction {
		return pci.BusFunction{Address: addr, Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, Driver: drv}
	}
	virtio := pci.BusFunction{Address: "0000:00:03.0", Vendor: 0x1af4, Device: 0x1041, Class: 0x020000, Driver: "virtio-pci"}
	hfi := pci.BusFunction{Address: "0000:18:00.0", Vendor: 0x8086, Device: 0x24f0, Class: 0x020800}
	one := ibDev("mlx5_0")
	one.PCIAddress = "0000:1a:00.0"
	// No RDMA hardware and no devices expected: not judged, whether the
	// class is missing or empty.
	for _, s := range []*Reading{
		{Host: &fixedHost{classErr: infiniband.ErrNoClass}},
		{Host: &fixedHost{classErr: infiniband.ErrNoClass, bus: []pci.BusFunction{virtio}}},
		{Host: &fixedHost{class: &infiniband.Class{}, bus: []pci.BusFunction{virtio}}},
	} {
		fs, err := checkDevPresent(s, nil, mustParse(t, ""))
		if err != nil || len(fs) == 0 {
			t.Fatalf("%v %v", fs, err)
		}
		if f := findingOf(t, fs, "host"); f.Severity != Skip || !strings.Contains(f.Evidence, "no RDMA hardware to judge") {
			t.Errorf("plain host: %+v", f)
		}
	}
	for _, tc := range []struct {
		name     string
		snap     *Reading
		cfg      string
		observed []string
		remedy   []string
	}{
		{"no class, nothing on the bus, 1 expected", &Reading{Host: &fixedHost{classErr: infiniband.ErrNoClass}}, "diagnose:\n  expected_devices: 1\n",
			[]string{"no RDMA devices; no RDMA-capable function of any vendor on the PCI bus"}, []string{"passed through"}},
		{"no class, a virtio NIC, 1 expected", &Reading{Host: &fixedHost{classErr: infiniband.ErrNoClass, bus: []pci.BusFunction{virtio}}}, "diagnose:\n  expected_devices: 1\n",
			[]string{"(network functions: 0000:00:03.0 (1af4:1041, driver virtio-pci))"}, []string{"passed through"}},
		{"no class, an Omni-Path HFI without a driver", &Reading{Host: &fixedHost{classErr: infiniband.ErrNoClass, bus: []pci.BusFunction{virtio, hfi}}}, "",
			[]string{"0000:18:00.0 (8086:24f0, no driver)"}, []string{"load the adapter's RDMA driver"}},
		{"empty class, function without a driver", &Reading{Host: &fixedHost{class: &infiniband.Class{}, bus: []pci.BusFunction{cx7("0000:5e:00.0", "")}}}, "",
			[]string{"0000:5e:00.0 (15b3:1021, no driver)"}, []string{"modprobe mlx5_core"}},
		{"mlx5_core without mlx5_ib", &Reading{Host: &fixedHost{class: &infiniband.Class{}, bus: []pci.BusFunction{cx7("0000:5e:00.0", "mlx5_core")}}}, "",
			[]string{"driver mlx5_core"}, []string{"modprobe mlx5_ib", "dmesg | grep mlx5"}},
		{"one of two devices, the other bound to vfio-pci", &Reading{Host: &fixedHost{class: &infiniband.Class{Devices: []infiniband.Device{one}}, bus: []pci.BusFunction{cx7("0000:1a:00.0", "mlx5_core"), cx7("0000:3c:00.0", "vfio-pci")}}}, "diagnose:\n  expected_devices: 2\n",
			[]string{"1 readable RDMA device(s)", "0000:3c:00.0 (15b3:1021, driver vfio-pci)"}, []string{"bound to vfio-pci"}},
		{"bus unreadable", &Reading{Host: &fixedHost{class: &infiniband.Class{}, busErr: errors.New("EACCES")}}, "",
			[]string{"0 readable"}, []string{genericDevRemedy}},
	} {
		cfg := mustParse(t, tc.cfg)
		fs, err := checkDevPresent(tc.snap, nil, cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f := findingOf(t, fs, "host")
		if f.Severity != Fail {
			t.Errorf("%s: %s, want fail", tc.name, f.Severity)
		}
		for _, o := range tc.observed {
			if !strings.Contains(f.Observed, o) {
				t.Errorf("%s: observed %q lacks %q", tc.name, f.Observed, o)
			}
		}
		for _, r := range tc.remedy {
			if !strings.Contains(f.Remedy, r) {
				t.Errorf("%s: remedy %q lacks %q", tc.name, f.Remedy, r)
			}
		}
		if strings.Contains(f.Observed, "0000:1a:00.0") {
			t.Errorf("%s: a function with its RDMA device is listed: %q", tc.name, f.Observed)
		}
	}
}

// TestSparePorts: a down port nobody needs (never ACTIVE, not in the
// config) never fails, while the same port fails once the config names it,
// once it was ACTIVE, or when no port of the host is up; a down Ethernet
// port gets Ethernet remedies, never ibportstate.
func TestSparePorts(t *testing.T) {
	cx := func() *Reading {
		return snapWith(ibDev("mlx4_0", ibPort(1, 4, 5, "20 Gb/sec (4X DDR)"), ibPort(2, 1, 2, "10 Gb/sec (4X SDR)")))
	}
	judge := func(s *Reading, cfg *config.Config, check func(*Reading, *History, *config.Config) ([]Finding, error), target string) Finding {
		t.Helper()
		fs, err := check(s, NewHistory(0, 2), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return findingOf(t, fs, target)
	}
	none := &config.Config{}
	for _, check := range []func(*Reading, *History, *config.Config) ([]Finding, error){checkPortPhys, checkPortState} {
		if f := judge(cx(), none, check, "mlx4_0/2"); f.Severity != Skip || !strings.Contains(f.Evidence, "spare port") {
			t.Errorf("never-cabled second port: %s %q, want a skip saying spare port", f.Severity, f.Evidence)
		}
		named := &config.Config{}
		named.Diagnose.Ports.Required = []config.PortRef{{Device: "mlx4_0", Port: 2}}
		if f := judge(cx(), named, check, "mlx4_0/2"); f.Severity != Fail {
			t.Errorf("a required port down: %s, want fail", f.Severity)
		}
		was := cx()
		fixed(was).wasActive = func(d string, p int) bool { return d == "mlx4_0" && p == 2 }
		if f := judge(was, none, check, "mlx4_0/2"); f.Severity != Fail {
			t.Errorf("a port down after being ACTIVE: %s, want fail", f.Severity)
		}
		allDown := snapWith(ibDev("mlx4_0", ibPort(1, 1, 2, "10 Gb/sec (4X SDR)"), ibPort(2, 1, 2, "10 Gb/sec (4X SDR)")))
		if f := judge(allDown, none, check, "mlx4_0/2"); f.Severity != Fail {
			t.Errorf("no port up on the host: %s, want fail", f.Severity)
		}
	}

	// RoCE: port 1 up, port 2 Disabled because its netdev is set down.
	roce := func(adminUp bool) *Reading {
		up, down := ibPort(1, 4, 5, "25 Gb/sec (1X EDR)"), ibPort(2, 1, 3, "40 Gb/sec (4X QDR)")
		up.LinkLayer.V, down.LinkLayer.V = "Ethernet", "Ethernet"
		up.Netdev, down.Netdev = "enp1s0f0np0", "enp1s0f1np1"
		s := snapWith(ibDev("mlx5_1", up, down))
		fixed(s).netdevs = &netdev.Snapshot{Netdevs: []netdev.Netdev{
			{Name: "enp1s0f1np1", Kind: netdev.KindRoCE, Device: "mlx5_1", Port: 2,
				AdminUp: netdev.Opt[bool]{V: adminUp, OK: true}, OperState: netdev.Opt[string]{V: "down", OK: true}},
		}}
		fixed(s).wasActive = func(string, int) bool { return true }
		return s
	}
	if f := judge(roce(false), none, checkPortPhys, "mlx5_1/2"); f.Severity != Fail ||
		!strings.Contains(f.Remedy, "ip link set enp1s0f1np1 up") || strings.Contains(f.Remedy, "ibportstate") {
		t.Errorf("admin-down RoCE port: %s %q, want fail with ip link set and no ibportstate", f.Severity, f.Remedy)
	}
	if f := judge(roce(true), none, checkPortPhys, "mlx5_1/2"); !strings.Contains(f.Remedy, "no carrier") || !strings.Contains(f.Remedy, "ethtool -m enp1s0f1np1") {
		t.Errorf("RoCE port up without carrier: %q, want cable and transceiver remedies", f.Remedy)
	}
	spare := roce(false)
	fixed(spare).wasActive = nil
	if f := judge(spare, none, checkPortPhys, "mlx5_1/2"); f.Severity != Skip {
		t.Errorf("admin-down RoCE port never ACTIVE: %s, want skip", f.Severity)
	}
}

// TestIRQUnclassifiedSkips: a device whose IRQs carry names in no known
// form is skipped with a text that says it has IRQs that cannot be
// classified (not "0 IRQs", not "none a completion vector", not "torn"),
// by every IRQ check that counts completion vectors, and says what to do.
func TestIRQUnclassifiedSkips(t *testing.T) {
	local, _ := cpulist.Parse("0-3")
	q := &irq.IRQ{Number: 45, Name: "mlx5_xyz@pci:0000:3b:00.0"}
	for _, known := range []bool{false, true} {
		d := irq.Device{Name: "mlx5_0", PCI: pci.Function{Address: "0000:3b:00.0", LocalCPUs: infiniband.Opt[cpulist.Set]{V: local, OK: true}},
			IRQs:         []irq.DeviceIRQ{{IRQ: q, Vector: irq.Vector{Kind: irq.Other, Address: "0000:3b:00.0"}, Affinity: infiniband.Opt[cpulist.Set]{V: cpulist.Of(9), OK: true}}},
			Unclassified: 1, Incomplete: true}
		if known {
			// Beside a recognised completion vector the unknown one still
			// makes every count over the device a guess.
			d.IRQs = append(d.IRQs, irq.DeviceIRQ{IRQ: &irq.IRQ{Number: 46, Name: "mlx5_comp0@pci:0000:3b:00.0"},
				Vector: irq.Vector{Kind: irq.Completion}, Affinity: infiniband.Opt[cpulist.Set]{V: cpulist.Of(1), OK: true}})
		}
		s := snapWith()
		fixed(s).placement = &irq.Snapshot{Interrupts: &irq.Interrupts{}, Devices: []irq.Device{d}}
		for name, check := range map[string]func(*Reading, *History, *config.Config) ([]Finding, error){"irq.local": checkIRQLocal, "irq.spread": checkIRQSpread} {
			fs, _ := check(s, nil, &config.Config{})
			f := findingOf(t, fs, "mlx5_0")
			if f.Severity != Skip || !strings.Contains(f.Evidence, "names in no naming form") || !strings.Contains(f.Evidence, `irq 45 "mlx5_xyz@pci:0000:3b:00.0"`) ||
				!strings.Contains(f.Evidence, "(not 0)") || !strings.Contains(f.Observed, "1 of the ") ||
				!strings.Contains(f.Remedy, "grep 0000:3b:00.0 /proc/interrupts") || !strings.Contains(f.Remedy, "0-3") {
				t.Errorf("%s (completion vector known too: %v): %+v", name, known, f)
			}
			for _, wrong := range []string{"torn", "none a completion vector", "no line of /proc/interrupts"} {
				if strings.Contains(f.Evidence, wrong) {
					t.Errorf("%s: says %q: %s", name, wrong, f.Evidence)
				}
			}
		}
	}
}
