// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// evalFabric runs the fabric checks over the sweeps, in order, as the
// sampler would see them.
func evalFabric(t *testing.T, sweeps ...*fabric.Sweep) []diagnose.Finding {
	t.Helper()
	e, err := testEvaluator(&config.Config{}, []string{"fabric.*"})
	if err != nil {
		t.Fatal(err)
	}
	h := diagnose.NewHistory(time.Hour, 10)
	var snap *diagnose.Reading
	for i, sw := range sweeps {
		snap = &diagnose.Reading{Time: sw.Start.Add(time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: sw, Sweeps: uint64(i + 1)}}}
		h.Add(snap)
	}
	return e.Evaluate(snap, h).Findings
}

func TestFabricErrorsNamesBothEnds(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	// The sweep before the fault: leaf1 port 1's symbol errors not yet set.
	before := diagnosetest.RecordedSweep(t, t0, topo)
	diagnosetest.SetValue(t, before, diagnosetest.Leaf1GUID, 1, fabric.SymbolErrors, 0)
	after := diagnosetest.RecordedSweep(t, t0.Add(time.Minute), topo)

	fs := evalFabric(t, before, after)
	f := diagnosetest.FindingFor(fs, "fabric.errors", "0x0000000000200001/1")
	if f == nil {
		t.Fatalf("no fabric.errors finding for leaf1 port 1: %+v", diagnosetest.FindingsOf(fs, "fabric.errors"))
	}
	if f.Severity != diagnose.Fail {
		t.Errorf("symbol_error +4200: severity %s, want fail", f.Severity)
	}
	for _, want := range []string{`"leaf1" port 1`, "GUID 0x0000000000200001", `"node01 mlx5_0" port 1`, "GUID 0x0000000000100001", "symbol_error +4200"} {
		if !strings.Contains(f.Observed, want) {
			t.Errorf("observed %q lacks %q", f.Observed, want)
		}
	}
	for _, want := range []string{"reseat", "optic", "perfquery 2 1", "perfquery 4 1", "iblinkinfo --line -G 0x0000000000200001"} {
		if !strings.Contains(f.Remedy, want) {
			t.Errorf("remedy %q lacks %q", f.Remedy, want)
		}
	}
	if !strings.Contains(f.Evidence, "(0 → 4200)") {
		t.Errorf("evidence %q lacks the increase", f.Evidence)
	}

	// leaf2 port 35 has PortRcvErrors 48 in both sweeps (an absolute value
	// from before the window): no increase, no finding. The spine's ports
	// and leaf1's host ports 35 are clean too.
	for _, clean := range []string{"0x0000000000200002/35", "0x0000000000200000/3", "0x0000000000200000/1", "0x0000000000200002/1"} {
		if g := diagnosetest.FindingFor(fs, "fabric.errors", clean); g != nil {
			t.Errorf("clean port %s has a finding: %+v", clean, *g)
		}
	}
	var pass *diagnose.Finding
	for _, g := range diagnosetest.FindingsOf(fs, "fabric.errors") {
		if g.Severity == diagnose.Pass {
			pass = &g
		}
	}
	if pass == nil || !strings.Contains(pass.Observed, "swept ports without rising error counters") {
		t.Errorf("no pass finding counting the clean ports: %+v", diagnosetest.FindingsOf(fs, "fabric.errors"))
	}
}

func TestFabricErrorsSaturatedIsUnknown(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	fs := evalFabric(t, diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(time.Minute), topo))
	for _, c := range []struct{ target, counter string }{
		{"0x0000000000200001/2", "symbol_error is saturated at 65535 (16-bit"},
	} {
		f := diagnosetest.FindingFor(fs, "fabric.errors", c.target)
		if f == nil {
			t.Fatalf("%s: no finding", c.target)
		}
		if f.Severity != diagnose.Warn || !f.Unknown {
			t.Errorf("%s: severity %s unknown %v, want warn and unknown", c.target, f.Severity, f.Unknown)
		}
		if !strings.Contains(f.Evidence, c.counter) {
			t.Errorf("%s: evidence %q lacks %q", c.target, f.Evidence, c.counter)
		}
		if strings.Contains(f.Observed, "+") {
			t.Errorf("%s: a saturated counter is reported as an increase: %q", c.target, f.Observed)
		}
		if !strings.Contains(f.Remedy, "perfquery -R 2 ") {
			t.Errorf("%s: remedy %q does not say how to clear it", c.target, f.Remedy)
		}
	}
	// A 4-bit counter pinned at 15 in every sweep cannot be judged: the
	// host's rule (ctr.integrity), skipped with the reason, neither warn nor
	// unknown; RdmaFabricPortCounterSaturated agrees (alerts/tests/quiet.yml).
	if f := diagnosetest.FindingFor(fs, "fabric.errors", "0x0000000000200001/36"); f == nil || f.Severity != diagnose.Skip || f.Unknown ||
		!strings.Contains(f.Evidence, "local_link_integrity_errors reads 15, its maximum (4-bit PortCounters field), and did not rise to it within the window") {
		t.Errorf("pinned 4-bit counter: %+v", f)
	}
	// No increase anywhere between two identical sweeps: nothing fails.
	for _, f := range diagnosetest.FindingsOf(fs, "fabric.errors") {
		if f.Severity == diagnose.Fail {
			t.Errorf("identical sweeps gave a failure: %+v", f)
		}
	}
}

func TestFabricErrorsReset(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	// Three sweeps: 4200, then cleared (perfquery -R) and 5 new errors.
	a, b := diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(time.Minute), topo)
	diagnosetest.SetValue(t, b, diagnosetest.Leaf1GUID, 1, fabric.SymbolErrors, 0)
	c := diagnosetest.RecordedSweep(t, t0.Add(2*time.Minute), topo)
	diagnosetest.SetValue(t, c, diagnosetest.Leaf1GUID, 1, fabric.SymbolErrors, 5)
	f := diagnosetest.FindingFor(evalFabric(t, a, b, c), "fabric.errors", "0x0000000000200001/1")
	if f == nil || f.Severity != diagnose.Warn || !strings.Contains(f.Observed, "symbol_error +5") || !strings.Contains(f.Evidence, "reset 1 time") {
		t.Fatalf("after a reset, 5 new errors: %+v", f)
	}
}

func TestFabricOneSweepSkips(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	sw := diagnosetest.RecordedSweep(t, time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), topo)
	fs := evalFabric(t, sw)
	// The saturated counters are judged from one sweep; nothing else is.
	for _, f := range diagnosetest.FindingsOf(fs, "fabric.errors") {
		if f.Severity == diagnose.Fail || f.Severity == diagnose.Pass {
			t.Errorf("one sweep judged an increase: %+v", f)
		}
	}
	if f := diagnosetest.FindingsOf(fs, "fabric.port_down"); len(f) != 1 || f[0].Severity != diagnose.Skip {
		t.Errorf("fabric.port_down with one sweep: %+v", f)
	}
}

func TestFabricSkipsWithoutSweeper(t *testing.T) {
	e, err := testEvaluator(&config.Config{}, []string{"fabric.*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		st   *fabric.SweepStatus
		want string
	}{
		{nil, "--collector.fabric"},
		{&fabric.SweepStatus{}, "no fabric counter sweep has completed yet"},
	} {
		r := e.Evaluate(&diagnose.Reading{Time: time.Now(), Host: &diagnosetest.Host{Sweep: c.st}}, nil)
		for _, f := range r.Findings {
			if f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, c.want) {
				t.Errorf("%s: %+v, want a skip saying %q", f.Check, f, c.want)
			}
		}
	}
}

func TestFabricPortDown(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	// The next scan: node03's cable unplugged. leaf2 port 1's line becomes
	// a Down line in iblinkinfo's format and node03's own line is gone.
	unplugged := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			switch {
			case strings.Contains(l, `node03 mlx5_0"      6    1[  ] ==(`):
				continue
			case strings.HasPrefix(l, "0x0000000000200002 ") && strings.Contains(l, `      3    1[  ] ==(`):
				l = `0x0000000000200002 "                         leaf2"      3    1[  ] ==(                Down/ Polling)==>             [  ] "" ( )`
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	})
	fs := evalFabric(t, diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(time.Minute), unplugged))
	f := diagnosetest.FindingFor(fs, "fabric.port_down", "0x0000000000200002/1")
	if f == nil || f.Severity != diagnose.Fail {
		t.Fatalf("unplugged leaf2 port 1: %+v", diagnosetest.FindingsOf(fs, "fabric.port_down"))
	}
	for _, want := range []string{`"leaf2" port 1`, `"node03 mlx5_0" port 1`, "2: Polling"} {
		if !strings.Contains(f.Observed+f.Evidence, want) {
			t.Errorf("finding lacks %q: %+v", want, *f)
		}
	}
	if !strings.Contains(f.Remedy, "ibportstate 3 1 query") {
		t.Errorf("remedy %q", f.Remedy)
	}
	// Ports down in both sweeps (never cabled) are not findings.
	if n := len(diagnosetest.FindingsOf(fs, "fabric.port_down")); n != 1 {
		t.Errorf("%d port_down findings, want only the unplugged port", n)
	}
}

func TestFabricLinkBelowSupported(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	// The generated HDR fabric (fixtures/README.md): leaf2 port 1 trained
	// at FDR, leaf2 port 2 at 2X; the other links run 4X HDR.
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-generated-hdr-fdr-downgrade.txt", nil)
	var sw fabric.Sweep
	sw.Start, sw.Topology = t0, topo
	for _, pl := range topo.PortLines {
		if pl.Switch {
			sw.Ports = append(sw.Ports, fabric.PortCounters{PortLine: pl})
		}
	}
	fs := evalFabric(t, &sw)
	fdr := diagnosetest.FindingFor(fs, "fabric.link", "0x1070fd0300a1b400/1")
	if fdr == nil || fdr.Severity != diagnose.Fail || !strings.Contains(fdr.Observed, "speed FDR") || !strings.Contains(fdr.Expected, "speed HDR") ||
		!strings.Contains(fdr.Evidence, `"gpu03 mlx5_0" port 1`) {
		t.Errorf("FDR on HDR: %+v", fdr)
	}
	narrow := diagnosetest.FindingFor(fs, "fabric.link", "0x1070fd0300a1b400/2")
	if narrow == nil || narrow.Severity != diagnose.Fail || !strings.Contains(narrow.Observed, "width 2X") || !strings.Contains(narrow.Expected, "width 4X") {
		t.Errorf("2X of 4X: %+v", narrow)
	}
	if n := len(diagnosetest.FindingsOf(fs, "fabric.link")); n != 3 { // the two and one pass
		t.Errorf("%d fabric.link findings: %+v", n, diagnosetest.FindingsOf(fs, "fabric.link"))
	}

	// ibsim advertises 12X on every port: a 4X link whose only hint is
	// 12X is not judged (edited from the ibsim recording: its speed hint
	// removed on leaf1 port 1).
	ibsim := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", func(s string) string {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "0x0000000000100001 ") || strings.Contains(l, `"node01 mlx5_0" (Could`) {
				lines[i] = strings.Replace(l, "(Could be 12X Could be 53.125 Gbps)", "(Could be 12X )", 1)
			}
		}
		return strings.Join(lines, "\n")
	})
	sw = fabric.Sweep{Start: t0, Topology: ibsim}
	for _, pl := range ibsim.PortLines {
		if pl.Switch {
			sw.Ports = append(sw.Ports, fabric.PortCounters{PortLine: pl})
		}
	}
	fs = evalFabric(t, &sw)
	if f := diagnosetest.FindingFor(fs, "fabric.link", "0x0000000000200001/1"); f != nil {
		t.Errorf("4X with a 12X hint was judged: %+v", *f)
	}
	// node04's 2X link with a 12X hint lost lanes (both ends do 4X).
	if f := diagnosetest.FindingFor(fs, "fabric.link", "0x0000000000200002/2"); f == nil || !strings.Contains(f.Observed, "width 2X") {
		t.Errorf("2X with a 12X hint: %+v", f)
	}
	// The exporter tells the same story (issue 36): rdma_fabric_link_degraded
	// and rdma_fabric_links_degraded, which RdmaFabricLinksDegraded reads,
	// come from Link.Degraded (alerts/tests/quiet.yml).
	for i := range ibsim.Links {
		l := &ibsim.Links[i]
		judged := diagnosetest.FindingFor(fs, "fabric.link", linkTarget(l)) != nil
		if l.Degraded() != judged {
			t.Errorf("%s: Degraded %v, but diagnose judged it %v", linkText(l), l.Degraded(), judged)
		}
	}
}

func TestFabricCongestion(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	a, b := diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(10*time.Second), topo)
	// leaf1 port 35 (uplink to spine1, 4X EDR, 12.5 GB/s) recorded
	// PortXmitWait 123456; the later sweep adds 2e9 ticks in 10 s: 16 GB
	// of 125 GB the link could carry, 12.8%.
	diagnosetest.SetValue(t, b, diagnosetest.Leaf1GUID, 35, fabric.TransmitWait, 123456+2_000_000_000)
	fs := diagnosetest.FindingsOf(evalFabric(t, a, b), "fabric.congestion")
	if len(fs) != 1 || fs[0].Severity != diagnose.Warn {
		t.Fatalf("congestion: %+v", fs)
	}
	for _, want := range []string{`"leaf1" port 35`, `"spine1" port 1`, "about 13%"} {
		if !strings.Contains(fs[0].Evidence, want) {
			t.Errorf("evidence %q lacks %q", fs[0].Evidence, want)
		}
	}
	if !strings.Contains(fs[0].Remedy, "perfquery 2 35") {
		t.Errorf("remedy %q", fs[0].Remedy)
	}
	// Without the added wait: pass.
	fs = diagnosetest.FindingsOf(evalFabric(t, a, diagnosetest.RecordedSweep(t, t0.Add(10*time.Second), topo)), "fabric.congestion")
	if len(fs) != 1 || fs[0].Severity != diagnose.Pass {
		t.Errorf("no new XmitWait: %+v", fs)
	}
}

func TestFabricInitAndGUID(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	// Edited from the ibsim recording: the leaf2-node03 link in INIT (no
	// SM has configured it), and node02 printed with node01's GUID.
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, "node03 mlx5_0") || strings.Contains(l, `"node03`) {
				l = strings.Replace(l, "Active/  LinkUp", "Initialize/  LinkUp", 1)
			}
			if strings.HasPrefix(l, "0x0000000000100003 ") {
				l = "0x0000000000100001" + l[len("0x0000000000100003"):]
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	})
	sw := &fabric.Sweep{Start: t0, Topology: topo}
	for _, pl := range topo.PortLines {
		if pl.Switch {
			sw.Ports = append(sw.Ports, fabric.PortCounters{PortLine: pl})
		}
	}
	fs := evalFabric(t, sw)
	if f := diagnosetest.FindingFor(fs, "fabric.init", "0x0000000000200002/1"); f == nil || f.Severity != diagnose.Fail || !strings.Contains(f.Observed, "INIT") {
		t.Errorf("INIT link: %+v", diagnosetest.FindingsOf(fs, "fabric.init"))
	}
	if f := diagnosetest.FindingFor(fs, "fabric.guid", "0x0000000000100001"); f == nil || f.Severity != diagnose.Fail {
		t.Errorf("duplicate GUID: %+v", diagnosetest.FindingsOf(fs, "fabric.guid"))
	}
	// The recording as is: no INIT link, no duplicate.
	clean := diagnosetest.RecordedSweep(t, t0, diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil))
	fs = evalFabric(t, clean)
	for _, check := range []string{"fabric.init", "fabric.guid"} {
		if f := diagnosetest.FindingsOf(fs, check); len(f) != 1 || f[0].Severity != diagnose.Pass {
			t.Errorf("%s on the recording: %+v", check, f)
		}
	}
}

func TestFabricHistoryBounded(t *testing.T) {
	h := diagnose.NewHistory(10*time.Minute, 4)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var first *fabric.Sweep
	for i := range 30 {
		sw := &fabric.Sweep{Start: t0.Add(time.Duration(i) * 10 * time.Second)}
		if i == 0 {
			first = sw
		}
		// Each sweep seen by two samples is kept once.
		for j := range 2 {
			h.Add(&diagnose.Reading{Time: sw.Start.Add(time.Duration(j+1) * time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: sw}}})
		}
	}
	got := h.Sweeps()
	if len(got) != diagnose.MaxFabricSweeps {
		t.Fatalf("%d sweeps held, want the bound %d", len(got), diagnose.MaxFabricSweeps)
	}
	if got[0] != first {
		t.Errorf("the oldest sweep in the window was dropped (%v)", got[0].Start)
	}
	if !got[len(got)-1].Start.Equal(t0.Add(290 * time.Second)) {
		t.Errorf("newest %v", got[len(got)-1].Start)
	}
	// Past the window the oldest goes.
	late := &fabric.Sweep{Start: t0.Add(20 * time.Minute)}
	h.Add(&diagnose.Reading{Time: late.Start.Add(time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: late}}})
	for _, sw := range h.Sweeps() {
		if late.Start.Sub(sw.Start) > 10*time.Minute {
			t.Errorf("sweep of %v kept past the window", sw.Start)
		}
	}
}

func TestFabricCongestionSaturatedWait(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	a, b := diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(10*time.Second), topo)
	// Constructed: leaf1 port 35's 32-bit PortXmitWait pinned at its maximum.
	diagnosetest.SetValue(t, a, diagnosetest.Leaf1GUID, 35, fabric.TransmitWait, 1<<32-1)
	diagnosetest.SetValue(t, b, diagnosetest.Leaf1GUID, 35, fabric.TransmitWait, 1<<32-1)
	fs := diagnosetest.FindingsOf(evalFabric(t, a, b), "fabric.congestion")
	var unknown *diagnose.Finding
	for i := range fs {
		if fs[i].Unknown {
			unknown = &fs[i]
		}
		if fs[i].Severity == diagnose.Pass && strings.Contains(fs[i].Observed, "of 12 ") {
			t.Errorf("the saturated port was judged: %+v", fs[i])
		}
	}
	if unknown == nil || unknown.Severity != diagnose.Warn || !strings.Contains(unknown.Evidence, "0x0000000000200001/35") {
		t.Errorf("saturated XmitWait: %+v", fs)
	}
}

func TestFabricErrorsUnreadPortIsNotClean(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	a, b := diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(time.Minute), topo)
	// leaf2's perfquery failed in the later sweep (as in the recording
	// leaf2-l-1-36-error: _do_madrpc failed): its ports are unknown.
	for i := range b.Ports {
		if p := &b.Ports[i]; p.GUID == diagnosetest.Leaf2GUID {
			p.Unknown, p.Reason, p.Values = true, fabric.ReasonMAD, [fabric.NumCounters]fabric.Value{}
		}
	}
	fs := diagnosetest.FindingsOf(evalFabric(t, a, b), "fabric.errors")
	var unread *diagnose.Finding
	for i := range fs {
		if fs[i].Unknown && fs[i].Target == "fabric" {
			unread = &fs[i]
		}
		if strings.HasPrefix(fs[i].Target, "0x0000000000200002/") {
			t.Errorf("an unread port was judged: %+v", fs[i])
		}
	}
	if unread == nil || unread.Severity != diagnose.Warn || !strings.Contains(unread.Evidence, "0x0000000000200002/1 (mad_failed)") || !strings.Contains(unread.Evidence, "and 26 more") {
		t.Fatalf("unread ports: %+v", fs)
	}
}

// TestFabricOverrunIsUnknown: the stand-in a sweeper publishes when its
// sweep overran the interval (every port unknown) makes the fabric.errors
// check warn unknown, never pass, and does not enter the window: the
// sweeps that read stay there for the next judgement.
func TestFabricOverrunIsUnknown(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	a, b := diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(time.Minute), topo)
	over := &fabric.Sweep{Start: t0.Add(2 * time.Minute), Topology: b.Topology, Overrun: true, Failures: map[fabric.Reason]int{}}
	for _, p := range b.Ports {
		over.Ports = append(over.Ports, fabric.PortCounters{PortLine: p.PortLine, Unknown: true, Reason: fabric.ReasonTimeout})
	}
	over.Unknown = len(over.Ports)
	e, err := testEvaluator(&config.Config{}, []string{"fabric.*"})
	if err != nil {
		t.Fatal(err)
	}
	h := diagnose.NewHistory(time.Hour, 10)
	var snap *diagnose.Reading
	for i, sw := range []*fabric.Sweep{a, b, over} {
		snap = &diagnose.Reading{Time: sw.Start.Add(time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: sw, Sweeps: uint64(min(i+1, 2))}}}
		h.Add(snap)
	}
	if got := h.Sweeps(); len(got) != 2 || got[1] != b {
		t.Errorf("history holds %d sweeps (the stand-in among them: %v), want the two that read", len(got), len(got) > 0 && got[len(got)-1] == over)
	}
	var unread *diagnose.Finding
	for _, f := range diagnosetest.FindingsOf(e.Evaluate(snap, h).Findings, "fabric.errors") {
		if f.Severity == diagnose.Pass {
			t.Errorf("a port of the overrun sweep passed: %+v", f)
		}
		if f.Unknown && f.Target == "fabric" {
			unread = &f
		}
	}
	if unread == nil || unread.Severity != diagnose.Warn || !strings.Contains(unread.Observed, "overrun its interval") {
		t.Errorf("overrun: no unknown warning naming the timeout: %+v", unread)
	}
}
