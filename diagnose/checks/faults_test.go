// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/diagnose/report"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/kmsg"
	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// The faults are tested on the recorded ibsim fabric of diagnosetest.RecordedSweep
// (fixtures/tools/iblinkinfo-l-ibsim.txt and the perfquery recordings of
// internal/read/fabric/testdata/perfquery) and, for the host end of a cable, a
// copy of the cx6-hdr-fdr fixture host whose mlx5_0 carries node01's GUID
// as its node GUID: the host at the end of leaf1 port 1's cable (the GUID
// a ConnectX-4 or later prints as node and port GUID alike). Each test
// says what it changed between the samples.

// sweepHost is a host reading with a fabric sweep, as on the host that
// scans the fabric.
type sweepHost struct {
	diagnose.Host
	st   *fabric.SweepStatus
	klog *host.KernelLog
}

func (h sweepHost) FabricSweep() *fabric.SweepStatus { return h.st }

func (h sweepHost) KernelLog() (*host.KernelLog, bool) {
	if h.klog != nil {
		return h.klog, true
	}
	return h.Host.KernelLog()
}

// node01Host copies cx6-hdr-fdr and gives its mlx5_0 node01's GUID.
func node01Host(t *testing.T) string {
	t.Helper()
	root := diagnosetest.CopyTree(t, filepath.Join(diagnosetest.Fixtures, "cx6-hdr-fdr"))
	p := filepath.Join(root, "sys/class/infiniband/mlx5_0/node_guid")
	if err := os.WriteFile(p, []byte("0000:0000:0010:0001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// evaluateWithFabric samples the host root twice, 9 minutes apart, with
// change applied between, each sample with its fabric sweep.
func evaluateWithFabric(t *testing.T, root string, before, after *fabric.Sweep, change func()) *diagnose.Report {
	t.Helper()
	return evaluateWithLog(t, root, before, after, nil, change)
}

// evaluateWithLog is evaluateWithFabric with the kernel log reader's
// events in the later sample.
func evaluateWithLog(t *testing.T, root string, before, after *fabric.Sweep, klog *host.KernelLog, change func()) *diagnose.Report {
	t.Helper()
	cfg := diagnosetest.FixtureConfig(t, root)
	e, err := testEvaluator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := before.Start
	r := &diagnose.Reader{Host: diagnosetest.HostAt(root, cfg, func() time.Time { return now })}
	h := diagnose.HistoryFor(cfg.Diagnose.HistoryWindow(), cfg.Diagnose.SampleInterval())
	read := func(sw *fabric.Sweep, n uint64) *diagnose.Reading {
		s := r.Read(context.Background())
		sh := sweepHost{Host: s.Host, st: &fabric.SweepStatus{Last: sw, Sweeps: n}}
		if n == 2 {
			sh.klog = klog
		}
		s.Host = sh
		h.Add(s)
		return s
	}
	read(before, 1)
	if change != nil {
		change()
	}
	now = after.Start
	return e.Evaluate(read(after, 2), h)
}

func faultsOf(r *diagnose.Report, class diagnose.FaultClass) []diagnose.Fault {
	var out []diagnose.Fault
	for _, f := range r.Faults {
		if f.Class == class {
			out = append(out, f)
		}
	}
	return out
}

// faultNaming is the fault whose ends include the port guid/port.
func faultNaming(r *diagnose.Report, guid string, port int) []diagnose.Fault {
	var out []diagnose.Fault
	for _, f := range r.Faults {
		if slices.ContainsFunc(f.Ends, func(e diagnose.FaultEnd) bool { return e.GUID == guid && e.Port == port }) {
			out = append(out, f)
		}
	}
	return out
}

func endOf(f *diagnose.Fault, node string) *diagnose.FaultEnd {
	for i := range f.Ends {
		if f.Ends[i].Node == node {
			return &f.Ends[i]
		}
	}
	return nil
}

// TestFaultsOneCableBothEnds: symbol errors rise at both ends of leaf1
// port 1's cable, the switch end in the sweep and the host end on this
// host's mlx5_0 port 1. One cable fault names both ends and what each saw,
// and groups both findings; on main the report has no faults at all, and
// the two ends are a fabric.errors and a ctr.symbol problem apart.
func TestFaultsOneCableBothEnds(t *testing.T) {
	root := node01Host(t)
	topo := diagnosetest.ReadTopology(t, "../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	before := diagnosetest.RecordedSweep(t, t0, topo)
	diagnosetest.SetValue(t, before, diagnosetest.Leaf1GUID, 1, fabric.SymbolErrors, 0)
	after := diagnosetest.RecordedSweep(t, t0.Add(9*time.Minute), topo)
	r := evaluateWithFabric(t, root, before, after, func() {
		diagnosetest.SetCounter(t, root, "mlx5_0", "ports/1/counters/symbol_error", diagnosetest.ReadCounter(t, root, "mlx5_0", "ports/1/counters/symbol_error")+57)
	})

	fs := faultNaming(r, "0x0000000000200001", 1)
	if len(fs) != 1 {
		t.Fatalf("%d faults name leaf1 port 1, want one: %+v", len(fs), r.Faults)
	}
	f := fs[0]
	if f.Class != diagnose.FaultCable || f.ID != "0x0000000000200001/1" || f.Severity != diagnose.Fail {
		t.Errorf("class %s id %s severity %s, want cable 0x0000000000200001/1 fail", f.Class, f.ID, f.Severity)
	}
	sw, host := endOf(&f, "leaf1"), endOf(&f, "node01 mlx5_0")
	if sw == nil || host == nil || len(f.Ends) != 2 {
		t.Fatalf("ends %+v, want leaf1 and node01 mlx5_0", f.Ends)
	}
	if sw.Role != "switch" || sw.Port != 1 || sw.LID != 2 || sw.Status != diagnose.EndSeen || !slices.Contains(sw.Seen, "symbol_error +4200") {
		t.Errorf("switch end %+v", *sw)
	}
	if host.Role != "host" || host.Port != 1 || host.GUID != "0x0000000000100001" || host.Device != "mlx5_0" || host.Status != diagnose.EndSeen ||
		!slices.ContainsFunc(host.Seen, func(s string) bool { return strings.Contains(s, "symbol_error +57") }) {
		t.Errorf("host end %+v", *host)
	}
	for _, want := range []diagnose.FindingRef{{Check: "fabric.errors", Target: "0x0000000000200001/1"}, {Check: "ctr.symbol", Target: "mlx5_0/1"}} {
		if !slices.Contains(f.Findings, want) {
			t.Errorf("findings %v lack %v", f.Findings, want)
		}
	}
	if f.Runbook != "docs/runbook.md#cable" || !strings.Contains(f.Action, "reseat") {
		t.Errorf("runbook %q action %q", f.Runbook, f.Action)
	}
	// The host's second port (mlx5_1, another GUID, no link in this
	// scan) and the rest of the fabric have no cable fault.
	if n := len(faultsOf(r, diagnose.FaultCable)); n != 1 {
		t.Errorf("%d cable faults, want 1: %+v", n, faultsOf(r, diagnose.FaultCable))
	}

	// The text leads with the fault, both ends named, before the
	// per-check problems.
	var b bytes.Buffer
	if err := report.Text(&b, r, report.View{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	fi, pi := strings.Index(out, "\nFaults (1), one per physical link and class:\n"), strings.Index(out, "\nProblems (")
	if fi < 0 || pi < 0 || fi > pi {
		t.Fatalf("no Faults section before Problems:\n%s", out)
	}
	block := out[fi:pi]
	if os.Getenv("PEEK") != "" {
		t.Log(out)
	}
	for _, want := range []string{
		`FAIL cable: "leaf1" port 1 (GUID 0x0000000000200001, LID 2) <-> "node01 mlx5_0" port 1 (GUID 0x0000000000100001, LID 4) = mlx5_0`,
		`switch "leaf1" port 1: symbol_error +4200`,
		`host "node01 mlx5_0" port 1 = mlx5_0`,
		"symbol_error +57",
		"runbook:  docs/runbook.md#cable",
		"findings: fabric.errors 0x0000000000200001/1, ctr.symbol mlx5_0/1",
	} {
		if !strings.Contains(block, want) {
			t.Errorf("faults section lacks %q:\n%s", want, block)
		}
	}

	// HTML (/diagnose?format=html): the same fault first.
	b.Reset()
	if err := report.HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	fi, pi = strings.Index(page, `<h2 id="faults">Faults (1), one per physical link and class</h2>`), strings.Index(page, `<h2 id="problems">`)
	if fi < 0 || pi < 0 || fi > pi {
		t.Fatalf("no faults before the problems in the page")
	}
	for _, want := range []string{`<code class="check">cable</code>`, `&#34;leaf1&#34; port 1 (GUID 0x0000000000200001, LID 2)`,
		`<td>switch</td>`, `symbol_error &#43;4200`, `<code>docs/runbook.md#cable</code>`, `<code>ctr.symbol mlx5_0/1</code>`} {
		if !strings.Contains(page[fi:pi], want) {
			t.Errorf("page's faults lack %q:\n%s", want, page[fi:pi])
		}
	}

	// JSON: the faults, every field documented.
	checkFaultsSchema(t, r)
}

// checkFaultsSchema renders r as JSON and checks docs/diagnose-schema.md
// documents every field of its faults.
func checkFaultsSchema(t *testing.T, r *diagnose.Report) {
	t.Helper()
	var b bytes.Buffer
	if err := report.JSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Faults []map[string]any `json:"faults"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Faults) == 0 {
		t.Fatalf("JSON faults: %v %v", err, back.Faults)
	}
	doc, err := os.ReadFile("../../docs/diagnose-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{"faults": true}
	for _, f := range back.Faults {
		diagnosetest.CollectKeys(f, keys)
	}
	for k := range keys {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/diagnose-schema.md does not document field %q", k)
		}
	}
}

// TestFaultsHostNICWhenSwitchEndClean: the same host errors, the switch
// end swept clean in both sweeps: the NIC's fault, not the cable's.
func TestFaultsHostNICWhenSwitchEndClean(t *testing.T) {
	root := node01Host(t)
	topo := diagnosetest.ReadTopology(t, "../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r := evaluateWithFabric(t, root, diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(9*time.Minute), topo), func() {
		diagnosetest.SetCounter(t, root, "mlx5_0", "ports/1/counters/symbol_error", diagnosetest.ReadCounter(t, root, "mlx5_0", "ports/1/counters/symbol_error")+57)
	})
	fs := faultNaming(r, "0x0000000000200001", 1)
	if len(fs) != 1 || fs[0].Class != diagnose.FaultHostNIC {
		t.Fatalf("faults naming leaf1 port 1: %+v, want one host_nic", fs)
	}
	f := fs[0]
	wantID := "mlx5_0"
	if r.Host != "" {
		wantID = r.Host + "/mlx5_0"
	}
	if f.ID != wantID || f.Runbook != "docs/runbook.md#host_nic" {
		t.Errorf("id %q runbook %q", f.ID, f.Runbook)
	}
	if sw := endOf(&f, "leaf1"); sw == nil || sw.Status != diagnose.EndClean || len(sw.Seen) != 0 {
		t.Errorf("switch end %+v, want clean", sw)
	}
	if host := endOf(&f, "node01 mlx5_0"); host == nil || host.Status != diagnose.EndSeen || host.Device != "mlx5_0" {
		t.Errorf("host end %+v", host)
	}
	if n := len(faultsOf(r, diagnose.FaultCable)); n != 0 {
		t.Errorf("cable faults with a clean switch end: %+v", faultsOf(r, diagnose.FaultCable))
	}

	// The later sweep could not read leaf1 (perfquery failed, as in the
	// recording leaf2-l-1-36-error): the switch end is not judged, and
	// unknown is never clean, so the cable is blamed, as the alerts do.
	root = node01Host(t)
	unread := diagnosetest.RecordedSweep(t, t0.Add(9*time.Minute), topo)
	for i := range unread.Ports {
		if p := &unread.Ports[i]; p.GUID == diagnosetest.Leaf1GUID {
			p.Unknown, p.Reason, p.Values = true, fabric.ReasonMAD, [fabric.NumCounters]fabric.Value{}
		}
	}
	r = evaluateWithFabric(t, root, diagnosetest.RecordedSweep(t, t0, topo), unread, func() {
		diagnosetest.SetCounter(t, root, "mlx5_0", "ports/1/counters/symbol_error", diagnosetest.ReadCounter(t, root, "mlx5_0", "ports/1/counters/symbol_error")+57)
	})
	fs = faultNaming(r, "0x0000000000200001", 1)
	if len(fs) != 1 || fs[0].Class != diagnose.FaultCable {
		t.Fatalf("switch end unread: %+v, want one cable fault", fs)
	}
	if sw := endOf(&fs[0], "leaf1"); sw == nil || sw.Status != diagnose.EndUnknown {
		t.Errorf("switch end unread: %+v, want unknown", sw)
	}
}

// TestFaultsHostNICFirmwareFatal: mlx5_0's firmware reports a fatal
// error (the real mlx5 message of internal/read/kmsg's testdata) while its
// cable's switch end is swept clean: one host_nic fault naming the device
// and the clean switch end, no cable fault.
func TestFaultsHostNICFirmwareFatal(t *testing.T) {
	root := node01Host(t)
	topo := diagnosetest.ReadTopology(t, "../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	klog := &host.KernelLog{Status: kmsg.Status{Reading: true}, Events: []host.KernelEvent{{
		Device: "mlx5_0", Event: kmsg.Events[kmsg.EventIndex("fw_fatal_error")], Family: kmsg.FamilyMLX5, Live: 1, HasLast: true,
		Last: kmsg.Last{Message: "mlx5_core 0000:3b:00.0: poll_health:817:(pid 0): Fatal error 1 detected", Last: t0.Add(8 * time.Minute), Repeats: 1},
	}}}
	r := evaluateWithLog(t, root, diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(9*time.Minute), topo), klog, nil)
	fs := faultsOf(r, diagnose.FaultHostNIC)
	if len(fs) != 1 {
		t.Fatalf("host_nic faults %+v, want one", r.Faults)
	}
	f := fs[0]
	host, sw := endOf(&f, "node01 mlx5_0"), endOf(&f, "leaf1")
	if host == nil || host.Device != "mlx5_0" || host.Status != diagnose.EndSeen || len(host.Seen) != 1 || !strings.Contains(host.Seen[0], "fw_fatal_error") {
		t.Errorf("host end %+v", host)
	}
	if sw == nil || sw.Port != 1 || sw.Status != diagnose.EndClean {
		t.Errorf("switch end %+v, want leaf1 port 1 clean", sw)
	}
	if !slices.Contains(f.Findings, diagnose.FindingRef{Check: "kernel.events", Target: "mlx5_0"}) {
		t.Errorf("findings %v", f.Findings)
	}
	if c := faultNaming(r, "0x0000000000200001", 1); len(c) != 1 {
		t.Errorf("faults naming leaf1 port 1: %+v, want the NIC's only", c)
	}
}

// TestFaultsSwitchIsOneFault: errors rise on three links of leaf1 (two
// host ports and an uplink): one switch fault, not three cables.
func TestFaultsSwitchIsOneFault(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	before, after := diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(time.Minute), topo)
	diagnosetest.SetValue(t, before, diagnosetest.Leaf1GUID, 1, fabric.SymbolErrors, 0)
	diagnosetest.SetValue(t, after, diagnosetest.Leaf1GUID, 35, fabric.LinkErrorRecovery, 12)
	diagnosetest.SetValue(t, after, diagnosetest.Leaf1GUID, 36, fabric.ReceiveErrors, 7)
	r := evalFabricReport(t, before, after)
	sws := faultsOf(r, diagnose.FaultSwitch)
	if len(sws) != 1 {
		t.Fatalf("switch faults %+v, want one", r.Faults)
	}
	f := sws[0]
	if f.ID != "0x0000000000200001" || f.Ends[0].Node != "leaf1" || f.Ends[0].Role != "switch" || f.Runbook != "docs/runbook.md#switch" {
		t.Errorf("switch fault %+v", f)
	}
	for _, want := range []string{"port 1: symbol_error +4200", "port 35: link_error_recovery +12", "port 36: port_rcv_errors +7"} {
		if !slices.Contains(f.Ends[0].Seen, want) {
			t.Errorf("switch end saw %v, lacks %q", f.Ends[0].Seen, want)
		}
	}
	if endOf(&f, "node01 mlx5_0") == nil || endOf(&f, "spine1") == nil {
		t.Errorf("the far ends are not named: %+v", f.Ends)
	}
	if !strings.Contains(f.Summary, "3 of its links") || len(f.Findings) != 3 {
		t.Errorf("summary %q findings %v", f.Summary, f.Findings)
	}
	if c := faultsOf(r, diagnose.FaultCable); len(c) != 0 {
		t.Errorf("cable faults beside the switch fault: %+v", c)
	}

	// Two bad links of one switch are two cables.
	diagnosetest.SetValue(t, after, diagnosetest.Leaf1GUID, 36, fabric.ReceiveErrors, 0)
	diagnosetest.SetValue(t, before, diagnosetest.Leaf1GUID, 36, fabric.ReceiveErrors, 0)
	r = evalFabricReport(t, before, after)
	if n, m := len(faultsOf(r, diagnose.FaultCable)), len(faultsOf(r, diagnose.FaultSwitch)); n != 2 || m != 0 {
		t.Errorf("two bad links: %d cable, %d switch faults: %+v", n, m, r.Faults)
	}
}

// evalFabricReport is evalFabric's report.
func evalFabricReport(t *testing.T, sweeps ...*fabric.Sweep) *diagnose.Report {
	t.Helper()
	e, err := testEvaluator(nil, []string{"fabric.*"})
	if err != nil {
		t.Fatal(err)
	}
	h := diagnose.NewHistory(time.Hour, 10)
	var snap *diagnose.Reading
	for i, sw := range sweeps {
		snap = &diagnose.Reading{Time: sw.Start.Add(time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: sw, Sweeps: uint64(i + 1)}}}
		h.Add(snap)
	}
	return e.Evaluate(snap, h)
}

// TestFaultsCongestionAndPulledCable: XmitWait on leaf1's uplink is a
// congestion fault of that link; node03's pulled cable (the recording
// edited as in TestFabricPortDown) a cable fault naming both ends.
func TestFaultsCongestionAndPulledCable(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	unplugged := diagnosetest.ReadTopology(t, "../../fixtures/tools/iblinkinfo-l-ibsim.txt", func(s string) string {
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
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	a, b := diagnosetest.RecordedSweep(t, t0, topo), diagnosetest.RecordedSweep(t, t0.Add(10*time.Second), unplugged)
	diagnosetest.SetValue(t, b, diagnosetest.Leaf1GUID, 35, fabric.TransmitWait, 123456+2_000_000_000)
	r := evalFabricReport(t, a, b)

	cg := faultsOf(r, diagnose.FaultCongestion)
	if len(cg) != 1 {
		t.Fatalf("congestion faults %+v, want one", r.Faults)
	}
	// The link's switch end is the lower GUID of two switches: spine1.
	if cg[0].ID != "0x0000000000200000/1" || cg[0].Runbook != "docs/runbook.md#congestion" {
		t.Errorf("congestion %+v", cg[0])
	}
	leaf, spine := endOf(&cg[0], "leaf1"), endOf(&cg[0], "spine1")
	if leaf == nil || leaf.Port != 35 || leaf.Status != diagnose.EndSeen || len(leaf.Seen) != 1 || !strings.Contains(leaf.Seen[0], "XmitWait +2000000000") {
		t.Errorf("leaf1 end %+v", leaf)
	}
	if spine == nil || spine.Port != 1 || spine.Status != diagnose.EndClean {
		t.Errorf("spine1 end %+v, want clean (swept, not congested)", spine)
	}

	pulled := faultNaming(r, "0x0000000000200002", 1)
	if len(pulled) != 1 || pulled[0].Class != diagnose.FaultCable || pulled[0].ID != "0x0000000000200002/1" {
		t.Fatalf("pulled cable: %+v", pulled)
	}
	sw, host := endOf(&pulled[0], "leaf2"), endOf(&pulled[0], "node03 mlx5_0")
	if sw == nil || host == nil || !strings.HasPrefix(strings.Join(sw.Seen, ""), "DOWN, ACTIVE in the sweep of 2026-12-03T10:00:00Z") ||
		host.GUID != "0x0000000000100005" || host.Status != diagnose.EndUnknown {
		t.Errorf("pulled cable ends %+v", pulled[0].Ends)
	}
	checkFaultsSchema(t, r)
}

// TestFaultsSubnetManager: links in INIT (the recording edited as in
// TestFabricInitAndGUID) are one subnet_manager fault.
func TestFaultsSubnetManager(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../fixtures/tools/iblinkinfo-l-ibsim.txt", func(s string) string {
		return regexp.MustCompile(`(node0[34] mlx5_0".*?)Active/  LinkUp|(\b3    [12]\[  \] ==\( [24]X +[0-9.]+ Gbps )Active/  LinkUp`).
			ReplaceAllString(s, "${1}${2}Initialize/  LinkUp")
	})
	sw := &fabric.Sweep{Start: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), Topology: topo}
	for _, pl := range topo.PortLines {
		if pl.Switch {
			sw.Ports = append(sw.Ports, fabric.PortCounters{PortLine: pl})
		}
	}
	r := evalFabricReport(t, sw)
	sm := faultsOf(r, diagnose.FaultSubnetManager)
	if len(sm) != 1 || sm[0].ID != "subnet_manager" || len(sm[0].Findings) != 2 || sm[0].Runbook != "docs/runbook.md#subnet_manager" {
		t.Fatalf("subnet manager faults %+v, want one grouping the two INIT links", r.Faults)
	}
}

// TestFaultsBounded: a fabric whose every link is in INIT (no subnet
// manager; the 16-host ibsim recording of internal/read/fabric/testdata
// edited) is one subnet_manager fault whose ends are bounded, its summary
// saying how many there were.
func TestFaultsBounded(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../internal/read/fabric/testdata/ibqueryerrors/ibsim16-iblinkinfo.stdout", func(s string) string {
		return strings.ReplaceAll(s, "Active/  LinkUp", "Initialize/  LinkUp")
	})
	sw := &fabric.Sweep{Start: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), Topology: topo}
	for _, pl := range topo.PortLines {
		if pl.Switch {
			sw.Ports = append(sw.Ports, fabric.PortCounters{PortLine: pl})
		}
	}
	r := evalFabricReport(t, sw)
	if len(r.Faults) != 1 || r.Faults[0].Class != diagnose.FaultSubnetManager {
		t.Fatalf("faults %+v, want one subnet_manager fault", r.Faults)
	}
	f := r.Faults[0]
	if len(f.Ends) != diagnose.MaxFaultEnds || len(f.Findings) != len(topo.Links) ||
		!strings.Contains(f.Summary, fmt.Sprintf("(%d ends, the first %d listed)", len(topo.Links), diagnose.MaxFaultEnds)) {
		t.Errorf("%d ends, %d findings of %d links, summary %q", len(f.Ends), len(f.Findings), len(topo.Links), f.Summary)
	}
}

// TestSwitchFaultLinksIsTheAlerts: diagnose's switch fault and the
// alerts' RdmaSwitchFault count the same number of bad links.
func TestSwitchFaultLinksIsTheAlerts(t *testing.T) {
	if want := mixin.Default().Thresholds.SwitchFaultLinks; float64(diagnose.SwitchFaultLinks) != want {
		t.Errorf("switchFaultLinks %d, the mixin's switch_fault_links %v", diagnose.SwitchFaultLinks, want)
	}
}

// TestFaultClassesHaveRunbookSections: every class's runbook link has its
// anchor in docs/runbook.md.
func TestFaultClassesHaveRunbookSections(t *testing.T) {
	b, err := os.ReadFile("../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range diagnose.FaultClasses {
		_, anchor, _ := strings.Cut(c.Runbook(), "#")
		if !strings.Contains(string(b), `<a id="`+anchor+`"></a>`) {
			t.Errorf("docs/runbook.md has no anchor %q for the class %s", anchor, c)
		}
		if c.Action() == "" {
			t.Errorf("class %s has no action", c)
		}
	}
}
