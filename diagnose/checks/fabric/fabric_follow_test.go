// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// TestFabricSweepsFasterThanSamples: the host publishes three sweeps of
// the recorded ibsim fabric (fabrictest) before the sampler's first
// sample, leaf001 port 1's SymbolErrorCounter rising 4000, 4100, 4200
// (the recorded errors run, edited); the one sample that follows reads
// only the latest sweep, yet judges the rise of all three, because the
// sampler follows every published sweep. Before, the rise was never
// judged: the sample held one sweep ("needs two sweeps").
func TestFabricSweepsFasterThanSamples(t *testing.T) {
	rec, err := os.ReadFile(fabrictest.Recording("ibsim16-errors.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	const recorded = "port 1: [SymbolErrorCounter == 4200]"
	if !strings.Contains(string(rec), recorded) {
		t.Fatalf("the recorded errors run lacks %q", recorded)
	}
	answer := filepath.Join(t.TempDir(), "errors.stdout")
	tools := fabrictest.InstallWith(t, fabrictest.Answers{Errors: "cat " + answer + "; exit 1"})
	p, _ := hostfs.Paths{Rootfs: filepath.Join(diagnosetest.Fixtures, "cx6-hdr-fdr")}.Resolve()
	h := host.New(host.Options{Paths: p, Fabric: &host.FabricOptions{
		Path: tools.IBLinkInfo, Counters: true, IBQueryErrorsPath: tools.IBQueryErrors,
		IBNetDiscoverPath: tools.IBNetDiscover, SMInfoPath: tools.SMInfo, CacheDir: t.TempDir(),
	}})
	e, err := testEvaluator(&config.Config{}, []string{"fabric.*"})
	if err != nil {
		t.Fatal(err)
	}
	s := &diagnose.Sampler{Reader: &diagnose.Reader{Host: h}, Eval: e, History: diagnose.NewHistory(time.Hour, 10)}
	s.FollowSweeps()

	var published []*fabric.Sweep
	h.OnFabricSweep(func(sw *fabric.Sweep) { published = append(published, sw) })
	for _, v := range []string{"4000", "4100", "4200"} {
		edited := strings.Replace(string(rec), recorded, "port 1: [SymbolErrorCounter == "+v+"]", 1)
		if err := os.WriteFile(answer, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		h.Round(t.Context())
	}
	if len(published) != 3 {
		t.Fatalf("%d sweeps published, want 3", len(published))
	}

	r := s.Sample(t.Context())
	if got := s.History.Sweeps(); len(got) != 3 || got[2] != published[2] {
		t.Errorf("%d sweeps in the window, want the 3 published", len(got))
	}
	f := diagnosetest.FindingFor(r.Findings, "fabric.errors", "0x0000000000200002/1")
	if f == nil {
		t.Fatalf("leaf001 port 1's rise not judged: %+v", diagnosetest.FindingsOf(r.Findings, "fabric.errors"))
	}
	if f.Severity == diagnose.Pass || !strings.Contains(f.Observed, "symbol_error +200") || !strings.Contains(f.Evidence, "over 3 sweeps (4000 → 4200)") {
		t.Errorf("leaf001 port 1: %s, observed %q, evidence %q; want symbol_error +200 over the 3 sweeps", f.Severity, f.Observed, f.Evidence)
	}
}

// TestFabricHistoryAheadOfReading: a sweep published while a sample reads
// (the hook adds it before the sample's reading is judged) is newer than
// the sweep the reading holds. The reading is judged on the sweeps up to
// its own, in order: not with the newer one after it (a false reset),
// and the reading's older sweep is not taken for a clock step that
// empties the window.
func TestFabricHistoryAheadOfReading(t *testing.T) {
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", nil)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	before := diagnosetest.RecordedSweep(t, t0, topo)
	diagnosetest.SetValue(t, before, diagnosetest.Leaf1GUID, 1, fabric.SymbolErrors, 0)
	at := diagnosetest.RecordedSweep(t, t0.Add(time.Minute), topo) // 4200
	newer := diagnosetest.RecordedSweep(t, t0.Add(2*time.Minute), topo)
	diagnosetest.SetValue(t, newer, diagnosetest.Leaf1GUID, 1, fabric.SymbolErrors, 100) // a reset after the reading

	e, err := testEvaluator(&config.Config{}, []string{"fabric.*"})
	if err != nil {
		t.Fatal(err)
	}
	h := diagnose.NewHistory(time.Hour, 10)
	for _, sw := range []*fabric.Sweep{before, at, newer} {
		h.AddSweep(sw)
	}
	snap := &diagnose.Reading{Time: at.Start.Add(time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: at, Sweeps: 2}}}
	h.Add(snap)
	if n := len(h.Sweeps()); n != 3 {
		t.Fatalf("%d sweeps held after the sample, want 3", n)
	}
	f := diagnosetest.FindingFor(e.Evaluate(snap, h).Findings, "fabric.errors", "0x0000000000200001/1")
	if f == nil {
		t.Fatal("no fabric.errors finding for leaf1 port 1")
	}
	if !strings.Contains(f.Evidence, "symbol_error +4200 in the last 1m0s over 2 sweeps (0 → 4200)") || strings.Contains(f.Evidence, "reset") {
		t.Errorf("evidence %q, want +4200 over the 2 sweeps up to the reading's, no reset", f.Evidence)
	}
}
