// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/portwatch"
)

// TestPortFlapAndDrop judges the sampler's history: three cycles in the
// window fail port.flap, two pass; five minutes down after ACTIVE fails
// port.drop, thirty seconds pass; a port never ACTIVE skips both; and
// without a sampler (the CLI) the checks skip saying why.
func TestPortFlapAndDrop(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cycles := func(n int) []time.Time {
		var c []time.Time
		for i := 0; i < n; i++ {
			c = append(c, now.Add(-time.Duration(i+1)*time.Minute))
		}
		return c
	}
	down := infiniband.Enum{Value: 1, Name: "DOWN"}
	s := &diagnose.Reading{Time: now, Host: &diagnosetest.Host{PortsWatched: true, Ports: []portwatch.History{
		{Device: "mlx5_0", Port: 1, WasActive: true, Cycles: cycles(3), State: infiniband.Enum{Value: 4, Name: "ACTIVE"}},
		{Device: "mlx5_1", Port: 1, WasActive: true, Cycles: cycles(2), State: down, DownSince: now.Add(-5 * time.Minute)},
		{Device: "mlx5_2", Port: 1, WasActive: true, State: down, DownSince: now.Add(-30 * time.Second)},
		{Device: "mlx5_3", Port: 1, State: down},
	}}}
	cfg := &config.Config{}
	flap, _ := checkPortFlap(s, nil, cfg)
	drop, _ := checkPortDrop(s, nil, cfg)
	for _, tc := range []struct {
		fs     []diagnose.Finding
		target string
		want   diagnose.Severity
	}{
		{flap, "mlx5_0/1", diagnose.Fail}, {flap, "mlx5_1/1", diagnose.Pass}, {flap, "mlx5_3/1", diagnose.Skip},
		{drop, "mlx5_0/1", diagnose.Pass}, {drop, "mlx5_1/1", diagnose.Fail}, {drop, "mlx5_2/1", diagnose.Pass}, {drop, "mlx5_3/1", diagnose.Skip},
	} {
		if f := diagnosetest.FindingOf(t, tc.fs, tc.target); f.Severity != tc.want {
			t.Errorf("%s: %s, want %s: %+v", tc.target, f.Severity, tc.want, f)
		}
	}
	if f := diagnosetest.FindingOf(t, flap, "mlx5_0/1"); !strings.Contains(f.Remedy, "3 times in 10m0s") {
		t.Errorf("flap remedy: %q", f.Remedy)
	}
	if f := diagnosetest.FindingOf(t, drop, "mlx5_1/1"); !strings.Contains(f.Observed, "DOWN") || !strings.Contains(f.Observed, "5m0s") {
		t.Errorf("drop observed: %q", f.Observed)
	}
	if why := (&diagnose.Reading{}).Unavailable(diagnose.SourcePortWatch); !strings.Contains(why, "port state sampler") {
		t.Errorf("without a sampler: %q", why)
	}
}
