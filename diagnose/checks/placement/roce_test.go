// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/read/roce"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

func ecnOn(prio int) map[string][roce.Priorities]sysattr.Opt[bool] {
	var en [roce.Priorities]sysattr.Opt[bool]
	for p := range en {
		en[p] = sysattr.Some(p == prio)
	}
	return map[string][roce.Priorities]sysattr.Opt[bool]{roce.PointNP: en, roce.PointRP: en}
}

func TestRoCELossless(t *testing.T) {
	dscp := func() []rdmanl.App {
		var a []rdmanl.App
		for d := range 64 {
			a = append(a, rdmanl.App{Selector: rdmanl.AppSelDSCP, Priority: uint8(d >> 3), Protocol: uint16(d)})
		}
		return a
	}
	good := roce.Netdev{Name: "eth0", Device: "mlx5_0", Port: 1, ECN: ecnOn(3), CNPPriority: sysattr.Some(uint64(6)), Live: true,
		DCB: &rdmanl.DCB{Netdev: "eth0", PFC: &rdmanl.PFC{Enabled: 1 << 3}, Apps: dscp()}, Pause: &roce.Pause{}}
	pfcOff := good
	pfcOff.DCB = &rdmanl.DCB{Netdev: "eth0", PFC: &rdmanl.PFC{Enabled: 1 << 4}, Apps: dscp()}
	pfcOff.Pause = &roce.Pause{RX: true, TX: true}
	tos := good
	tos.DefaultToS = sysattr.Some(uint64(138)) // DSCP 34: priority 4
	tree := roce.Netdev{Name: "eth1", Device: "mlx5_1", Port: 1, ECN: ecnOn(0)}
	none := roce.Netdev{Name: "eth2", Device: "mlx5_2", Port: 1}
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		n    roce.Netdev
		want diagnose.Severity
		in   string
	}{
		"good":      {good, diagnose.Pass, "PFC on 3, trust dscp, global pause off, ECN roce_np on"},
		"pfc off":   {pfcOff, diagnose.Fail, "--pfc 0,0,0,1,0,0,0,0"},
		"tos prio4": {tos, diagnose.Fail, "prio-pfc 4:on"},
		"tree only": {tree, diagnose.Warn, "echo 1 > /sys/class/net/eth1/ecn/roce_np/enable/3"},
		"nothing":   {none, diagnose.Skip, "no MLNX_OFED ecn tree"},
	} {
		s := &diagnose.Reading{Host: &diagnosetest.Host{RoCEValue: &roce.Snapshot{Netdevs: []roce.Netdev{tc.n}}}}
		fs, err := checkRoCELossless(s, nil, cfg)
		if err != nil || len(fs) != 1 {
			t.Fatalf("%s: %v %v", name, fs, err)
		}
		f := fs[0]
		if f.Severity != tc.want || !strings.Contains(f.Observed+f.Remedy+f.Evidence, tc.in) {
			t.Errorf("%s: %s observed %q remedy %q evidence %q", name, f.Severity, f.Observed, f.Remedy, f.Evidence)
		}
	}
}
