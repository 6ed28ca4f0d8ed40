// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks"
)

// TestDiagnose: the store's results reach the probe checks through
// diagnose.ProbeResults with what perftest's names mean decided here (a
// bandwidth test, a loopback, a transport failure), and the checks judge
// them as before the seam.
func TestDiagnose(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := NewStore()
	lat := &Latency{Min: 1.1e-6, Typical: 1.2e-6, Max: 3.6e-6, P99: 1.8e-6, HasPercentiles: true}
	st.Record(Result{Peer: "loopback", Test: "ib_write_lat", Mode: ModeLoopback, Device: "mlx5_0", Port: 1, Start: at, Success: true,
		Size: 2, Iterations: 1000, Latency: lat, Notes: []string{"cpu freq"}})
	st.Record(Result{Peer: "peer-b", Test: "ib_write_lat", Mode: ModePeer, Device: "mlx5_0", Port: 1, Start: at, Success: true, Latency: lat})
	st.Record(Result{Peer: "peer-b", Test: "ib_write_lat", Mode: ModePeer, Device: "mlx5_0", Port: 1, Start: at.Add(time.Minute),
		ErrorKind: "retry_exceeded", Error: "perftest said so"})
	st.Record(Result{Peer: "peer-c", Test: "ib_send_bw", Mode: ModePeer, Device: "mlx5_0", Port: 1, Start: at, Success: true,
		Bandwidth: &Bandwidth{Average: 25e9}, PortRate: 50e9})
	st.Record(Result{Peer: "peer-d", Test: "ib_read_bw", Mode: ModePeer, Device: "mlx5_0", Port: 1, Start: at, ErrorKind: "busy", Error: "refused"})

	got := map[string]diagnose.ProbeSeries{}
	for _, s := range Diagnose(st).ProbeSeries() {
		got[s.Peer+" "+s.Test] = s
	}
	if len(got) != 4 {
		t.Fatalf("%d series, want 4: %+v", len(got), got)
	}
	if s := got["loopback ib_write_lat"]; s.Bandwidth || s.Last == nil || !s.Last.Loopback || s.Last.Mode != "loopback" ||
		s.Last.Latency == nil || s.Last.Latency.Typical != 1.2e-6 || !s.Last.Latency.HasPercentiles || s.Last.Size != 2 ||
		len(s.Last.Notes) != 1 || !s.LastSuccess.Equal(at) {
		t.Errorf("loopback latency: %+v %+v", s, s.Last)
	}
	if s := got["peer-b ib_write_lat"]; s.Last == nil || s.Last.Success || !s.Last.TransportFailed || s.Last.Loopback ||
		!s.LastSuccess.Equal(at) || !s.Last.Start.Equal(at.Add(time.Minute)) {
		t.Errorf("transport failure after a success: %+v %+v", s, s.Last)
	}
	if s := got["peer-c ib_send_bw"]; !s.Bandwidth || s.Last == nil || s.Last.Bandwidth == nil || *s.Last.Bandwidth != 25e9 || s.Last.PortRate != 50e9 {
		t.Errorf("bandwidth: %+v %+v", s, s.Last)
	}
	if s := got["peer-d ib_read_bw"]; s.Last == nil || s.Last.TransportFailed || !s.LastSuccess.IsZero() {
		t.Errorf("setup failure: %+v %+v", s, s.Last)
	}

	e, err := diagnose.NewEvaluator(nil, []string{"probe.*"}, checks.All())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]diagnose.Severity{
		"mlx5_0/1 ib_write_lat loopback": diagnose.Pass, // 1.2 µs < 2 µs in loopback
		"mlx5_0/1 ib_write_lat peer-b":   diagnose.Fail, // the transport gave up
		"mlx5_0/1 ib_send_bw peer-c":     diagnose.Warn, // 50 % of the port
		"mlx5_0/1 ib_read_bw peer-d":     diagnose.Warn, // could not measure
	}
	r := e.Evaluate(&diagnose.Reading{Time: at, Probe: Diagnose(st).ProbeSeries()}, nil)
	for _, f := range r.Findings {
		if w, ok := want[f.Target]; !ok || f.Severity != w {
			t.Errorf("%s %s: %s, want %q", f.Check, f.Target, f.Severity, w)
		}
		delete(want, f.Target)
	}
	if len(want) != 0 {
		t.Errorf("no finding for %v", want)
	}
}
