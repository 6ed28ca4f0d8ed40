// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/diagnose/report"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// TestFabricFindingDescriptionBounded: a switch named by 3,000 bytes
// (a byte that is not UTF-8 among them) in the recorded scan is named by
// its label value in the findings and in every rendering of /diagnose,
// not by the 3,000 bytes.
func TestFabricFindingDescriptionBounded(t *testing.T) {
	long := "leaf1 \xff" + strings.Repeat("é", 1496) + "x"
	topo := diagnosetest.ReadTopology(t, "../../../fixtures/tools/iblinkinfo-l-ibsim.txt", func(s string) string {
		return strings.ReplaceAll(s, `leaf1"`, long+`"`)
	})
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	before := diagnosetest.RecordedSweep(t, t0, topo)
	diagnosetest.SetValue(t, before, diagnosetest.Leaf1GUID, 1, fabric.SymbolErrors, 0)
	after := diagnosetest.RecordedSweep(t, t0.Add(time.Minute), topo)

	e, err := testEvaluator(&config.Config{}, []string{"fabric.*"})
	if err != nil {
		t.Fatal(err)
	}
	h := diagnose.NewHistory(time.Hour, 10)
	var snap *diagnose.Reading
	for i, sw := range []*fabric.Sweep{before, after} {
		snap = &diagnose.Reading{Time: sw.Start.Add(time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: sw, Sweeps: uint64(i + 1)}}}
		h.Add(snap)
	}
	r := e.Evaluate(snap, h)
	f := diagnosetest.FindingFor(r.Findings, "fabric.errors", "0x0000000000200001/1")
	if f == nil {
		t.Fatalf("no fabric.errors finding for leaf1 port 1: %+v", diagnosetest.FindingsOf(r.Findings, "fabric.errors"))
	}
	label := names.Label(long)
	if !strings.Contains(f.Observed, label) || !strings.HasPrefix(label, "leaf1 \uFFFDé") {
		t.Errorf("observed %.200q does not name leaf1 by its label value", f.Observed)
	}
	// The label value holds at most 64 two-byte characters; the whole
	// description 1,496.
	for _, format := range report.Formats {
		var b bytes.Buffer
		if err := report.Render(&b, r, format, report.View{Verbose: true}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(b.String(), strings.Repeat("é", names.MaxLabelBytes/2+1)); n != 0 {
			t.Errorf("%s: %d runs of leaf1's description longer than a label value", format, n)
		}
		if strings.Contains(b.String(), "\xff") {
			t.Errorf("%s: the byte that is not UTF-8 is written as is", format)
		}
	}
}
