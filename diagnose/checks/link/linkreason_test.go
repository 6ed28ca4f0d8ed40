// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
)

// TestPortDownReason: a RoCE link the driver reports down with a reason
// fails with that reason's remedy; an up link passes; a spare port skips;
// a down link without a reason, or a netdev without a link state, is left
// to port.phys.
func TestPortDownReason(t *testing.T) {
	snap := func(link *netdev.LinkState, wasActive bool) *diagnose.Reading {
		up, down := diagnosetest.IBPort(1, 4, 5, "100 Gb/sec (4X EDR)"), diagnosetest.IBPort(2, 1, 3, "40 Gb/sec (4X QDR)")
		up.LinkLayer.V, down.LinkLayer.V = "Ethernet", "Ethernet"
		up.Netdev, down.Netdev = "enp59s0f0np0", "enp59s0f1np1"
		s := diagnosetest.SnapWith(diagnosetest.IBDev("mlx5_1", up, down))
		diagnosetest.Fixed(s).NetdevsValue = &netdev.Snapshot{Netdevs: []netdev.Netdev{
			{Name: "enp59s0f0np0", Kind: netdev.KindRoCE, Device: "mlx5_1", Port: 1,
				Ethtool: &netdev.EthtoolInfo{Link: &netdev.LinkState{Link: netdev.Opt[bool]{V: true, OK: true}}}},
			{Name: "enp59s0f1np1", Kind: netdev.KindRoCE, Device: "mlx5_1", Port: 2, Ethtool: &netdev.EthtoolInfo{Link: link}},
		}}
		if wasActive {
			diagnosetest.Fixed(s).WasActiveFunc = func(string, int) bool { return true }
		}
		return s
	}
	down := func(st netdev.ExtState, sub uint8) *netdev.LinkState {
		l := &netdev.LinkState{Link: netdev.Opt[bool]{OK: true}, ExtState: netdev.Opt[netdev.ExtState]{V: st, OK: true}}
		if sub != 0 {
			l.ExtSubstate = netdev.Opt[uint8]{V: sub, OK: true}
		}
		return l
	}
	run := func(s *diagnose.Reading) []diagnose.Finding {
		t.Helper()
		fs, err := checkPortDownReason(s, diagnose.NewHistory(0, 2), &config.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	for _, tc := range []struct {
		name     string
		link     *netdev.LinkState
		observed string
		remedy   []string
	}{
		{"no cable", down(netdev.ExtStateNoCable, 0), "link down: no_cable", []string{"plug the cable", "ethtool -m enp59s0f1np1", "mlxlink -d 0000:3b:00.0 -p 2 -m"}},
		{"unsupported cable", down(netdev.ExtStateCableIssue, 1), "link down: cable_issue (unsupported_cable)", []string{"replace it"}},
		{"signal integrity", down(netdev.ExtStateBadSignalIntegrity, 1), "bad_signal_integrity (large_number_of_physical_errors)", []string{"clean the fiber", "mlxlink -d 0000:3b:00.0 -p 2 -c"}},
		{"overheat", down(netdev.ExtStateOverheat, 0), "link down: overheat", []string{"airflow", "rdma_device_temperature_celsius"}},
		{"FEC mismatch", down(netdev.ExtStateLinkLogicalMismatch, 5), "(rs_fec_is_not_locked)", []string{"--set-fec enp59s0f1np1"}},
		{"unknown state", down(netdev.ExtState(99), 0), "link down: state_99", []string{"ethtool enp59s0f1np1"}},
	} {
		f := diagnosetest.FindingOf(t, run(snap(tc.link, true)), "enp59s0f1np1")
		if f.Severity != diagnose.Fail || !strings.Contains(f.Observed, tc.observed) {
			t.Errorf("%s: %s %q, want fail observing %q", tc.name, f.Severity, f.Observed, tc.observed)
		}
		for _, r := range tc.remedy {
			if !strings.Contains(f.Remedy, r) {
				t.Errorf("%s: remedy %q lacks %q", tc.name, f.Remedy, r)
			}
		}
	}
	fs := run(snap(down(netdev.ExtStateNoCable, 0), true))
	if f := diagnosetest.FindingOf(t, fs, "enp59s0f0np0"); f.Severity != diagnose.Pass {
		t.Errorf("up link: %s, want pass", f.Severity)
	}
	if f := diagnosetest.FindingOf(t, run(snap(down(netdev.ExtStateNoCable, 0), false)), "enp59s0f1np1"); f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "spare port") {
		t.Errorf("never-cabled spare port: %s %q, want skip", f.Severity, f.Evidence)
	}
	if f := diagnosetest.FindingOf(t, run(snap(&netdev.LinkState{Link: netdev.Opt[bool]{OK: true}}, true)), "enp59s0f1np1"); f.Severity != diagnose.Skip {
		t.Errorf("down without a reason: %s, want skip (port.phys judges it)", f.Severity)
	}
	if f := diagnosetest.FindingOf(t, run(snap(&netdev.LinkState{}, true)), "enp59s0f1np1"); f.Severity != diagnose.Skip {
		t.Errorf("link unknown: %s, want skip", f.Severity)
	}
	none := diagnosetest.SnapWith(diagnosetest.IBDev("mlx5_1", diagnosetest.IBPort(1, 4, 5, "100 Gb/sec (4X EDR)")))
	diagnosetest.Fixed(none).NetdevsValue = &netdev.Snapshot{}
	if fs := run(none); len(fs) != 1 || fs[0].Severity != diagnose.Skip || fs[0].Target != "host" {
		t.Errorf("no link state anywhere: %+v, want one host skip", fs)
	}
}
