// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
)

// TestDiagnoseStatus: rdma_diagnose_status is rendered from a report here,
// with the other metrics: nothing before the first report, the worst
// severity of a repeated (check, target), skips absent, and the report's
// time; a pedantic registry accepts it.
func TestDiagnoseStatus(t *testing.T) {
	var rep *diagnose.Report
	c := NewDiagnoseStatus(func() *diagnose.Report { return rep })
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("before the first sample: %d series", n)
	}
	rep = &diagnose.Report{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Findings: []diagnose.Finding{
		{Check: "port.phys", Severity: diagnose.Pass, Target: "mlx5_0/1"},
		{Check: "ctr.downed", Severity: diagnose.Warn, Target: "mlx5_5/1", Unknown: true},
		{Check: "port.rate", Severity: diagnose.Fail, Target: "mlx5_0/1"},
		{Check: "port.rate", Severity: diagnose.Fail, Target: "mlx5_1/1"},
		{Check: "irq.local", Severity: diagnose.Skip, Target: "host"},
		// A duplicate (check, target) keeps the worst severity.
		{Check: "port.phys", Severity: diagnose.Warn, Target: "mlx5_0/1"},
		{Check: "port.rate", Severity: diagnose.Pass, Target: "mlx5_1/1"},
	}}
	want := `# HELP rdma_diagnose_status Latest diagnose result per check and target: 0 pass, 1 warn, 2 fail (skipped checks are absent).
# TYPE rdma_diagnose_status gauge
rdma_diagnose_status{check="ctr.downed",target="mlx5_5/1"} 1
rdma_diagnose_status{check="port.phys",target="mlx5_0/1"} 1
rdma_diagnose_status{check="port.rate",target="mlx5_0/1"} 2
rdma_diagnose_status{check="port.rate",target="mlx5_1/1"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "rdma_diagnose_status"); err != nil {
		t.Error(err)
	}
	wantTS := fmt.Sprintf(`# HELP rdma_diagnose_report_timestamp_seconds When the sample behind the latest diagnose report was taken; time() minus it is how stale /diagnose and rdma_diagnose_status are (absent before the first report).
# TYPE rdma_diagnose_report_timestamp_seconds gauge
rdma_diagnose_report_timestamp_seconds %g
`, float64(rep.Time.UnixNano())/1e9)
	if err := testutil.CollectAndCompare(c, strings.NewReader(wantTS), "rdma_diagnose_report_timestamp_seconds"); err != nil {
		t.Error(err)
	}
	// A new report is rendered anew, not served from the last one's series.
	rep = &diagnose.Report{Time: rep.Time.Add(time.Minute), Findings: []diagnose.Finding{
		{Check: "port.rate", Severity: diagnose.Pass, Target: "mlx5_0/1"},
	}}
	want = `# HELP rdma_diagnose_status Latest diagnose result per check and target: 0 pass, 1 warn, 2 fail (skipped checks are absent).
# TYPE rdma_diagnose_status gauge
rdma_diagnose_status{check="port.rate",target="mlx5_0/1"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "rdma_diagnose_status"); err != nil {
		t.Errorf("second report: %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic registry: %v", err)
	}
}
