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
)

func TestTraffic(t *testing.T) {
	mk := func(before, after uint64, extended bool, cfg *config.Config) diagnose.Finding {
		b := map[string]uint64{"port_rcv_data": before}
		a := map[string]uint64{"port_rcv_data": after}
		if extended {
			b["unicast_rcv_packets"], a["unicast_rcv_packets"] = 0, 0
		}
		h := diagnose.NewHistory(0, 10)
		h.Add(diagnosetest.CounterSnap(diagnosetest.T0, b, nil))
		s := diagnosetest.CounterSnap(diagnosetest.T0.Add(10*time.Second), a, nil)
		h.Add(s)
		fs, err := checkTraffic(s, h, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return diagnosetest.FindingOf(t, fs, "mlx5_0/1")
	}
	if f := mk(1000, 1000+2.5e8, true, &config.Config{}); f.Severity != diagnose.Pass || !strings.Contains(f.Observed, "953.7 MiB received in 10s, 95.4 MiB/s") {
		t.Errorf("flowing: %+v", f)
	}
	if f := mk(5, 5, true, &config.Config{}); f.Severity != diagnose.Pass || !strings.HasPrefix(f.Observed, "idle") {
		t.Errorf("idle, reported only: %+v", f)
	}
	if f := mk(5, 5, true, diagnosetest.MustParse(t, "diagnose:\n  policies:\n    expect_traffic: true\n")); f.Severity != diagnose.Warn || !strings.Contains(f.Remedy, "NCCL_IB_HCA=mlx5_0") {
		t.Errorf("idle, traffic expected: %+v", f)
	}
	if f := mk(4294967295, 4294967295, false, &config.Config{}); f.Severity != diagnose.Warn || !f.Unknown {
		t.Errorf("32-bit saturated data counter: %+v", f)
	}
	if f := mk(4294967295, 4294967295, true, &config.Config{}); f.Unknown {
		t.Errorf("a 64-bit counter at 2^32-1 is not saturated: %+v", f)
	}
}
