// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose_test

import (
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
)

// TestSampler: the background sampler keeps the latest report and its
// history grows to two samples.
func TestSampler(t *testing.T) {
	e, err := testEvaluator(nil, []string{"ctr.symbol"})
	if err != nil {
		t.Fatal(err)
	}
	now := diagnosetest.T0
	s := &diagnose.Sampler{Reader: &diagnose.Reader{Host: diagnosetest.HostAt("../fixtures/hosts/cx6-hdr-fdr", nil, func() time.Time { return now })},
		Eval: e, History: diagnose.HistoryFor(10*time.Minute, time.Minute), Interval: time.Minute}
	if s.Latest() != nil {
		t.Fatal("report before the first sample")
	}
	r1 := s.Sample(t.Context())
	now = now.Add(time.Minute)
	r2 := s.Sample(t.Context())
	if s.Latest() != r2 || r1.Samples != 1 || r2.Samples != 2 {
		t.Errorf("samples %d %d", r1.Samples, r2.Samples)
	}
	if f, _ := diagnosetest.ReportFinding(r2, "ctr.symbol", "mlx5_0/1"); f.Severity != diagnose.Pass {
		t.Errorf("unchanged fixture, two samples: %+v", f)
	}
}
