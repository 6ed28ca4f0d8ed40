// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
)

func TestProblemsGroupByFix(t *testing.T) {
	var fs []diagnose.Finding
	fs = append(fs, diagnose.Finding{Check: "port.phys", Severity: diagnose.Pass, Target: "mlx5_0/1"})
	for _, d := range []string{"mlx5_0", "mlx5_1", "mlx5_10"} {
		fs = append(fs, diagnosetest.Saturated(d))
	}
	fs = append(fs,
		diagnose.Finding{Check: "cgroup.rdma", Severity: diagnose.Warn, Target: "/slurm mlx5_0", Observed: "hca_handle=max", Action: "rdma-cgroup",
			Remedy: `echo "mlx5_0 hca_handle=64" > /sys/fs/cgroup/slurm/rdma.max`},
		diagnose.Finding{Check: "cgroup.rdma", Severity: diagnose.Warn, Target: "/slurm mlx5_1", Observed: "hca_handle=max", Action: "rdma-cgroup",
			Remedy: `echo "mlx5_1 hca_handle=64" > /sys/fs/cgroup/slurm/rdma.max`},
		// Different fixes of one check stay apart.
		diagnose.Finding{Check: "port.rate", Severity: diagnose.Fail, Target: "mlx5_0/1", Observed: "56 Gb/sec (4X FDR)", Remedy: "mlx5_0/1 trained at FDR lanes: check the switch port"},
		diagnose.Finding{Check: "port.rate", Severity: diagnose.Fail, Target: "mlx5_1/1", Observed: "100 Gb/sec (2X HDR)", Remedy: "mlx5_1/1 trained only 2X: check the cable first"},
		// Same fix, different observations: one problem, each observation kept.
		diagnose.Finding{Check: "ctr.symbol", Severity: diagnose.Warn, Target: "mlx5_0/1", Observed: "symbol_error +3", Expected: "warn above 0", Remedy: "physical lane errors on mlx5_0/1: clean the cable."},
		diagnose.Finding{Check: "ctr.symbol", Severity: diagnose.Warn, Target: "mlx5_1/1", Observed: "symbol_error +5", Expected: "warn above 0", Remedy: "physical lane errors on mlx5_1/1: clean the cable."},
		// Ports of one device: the port number is the placeholder.
		diagnose.Finding{Check: "ctr.downed", Severity: diagnose.Warn, Target: "mlx5_0/1", Remedy: "perfquery -C mlx5_0 -P 1 -R"},
		diagnose.Finding{Check: "ctr.downed", Severity: diagnose.Warn, Target: "mlx5_0/2", Remedy: "perfquery -C mlx5_0 -P 2 -R"},
		// "1" of the port is not the 1 of a PCI function: no false merge.
		diagnose.Finding{Check: "port.phys", Severity: diagnose.Fail, Target: "mlx5_2/1", Remedy: "mlxlink -d 0000:3b:00.0 -p 1"},
		diagnose.Finding{Check: "port.phys", Severity: diagnose.Fail, Target: "mlx5_2/2", Remedy: "mlxlink -d 0000:3b:00.1 -p 2"},
		diagnose.Finding{Check: "irq.local", Severity: diagnose.Skip, Target: "host"},
	)
	got := diagnose.Problems(fs)
	type brief struct {
		Check    string
		Severity diagnose.Severity
		Targets  string
		Observed string
		Remedy   string
	}
	var have []brief
	for _, p := range got {
		have = append(have, brief{p.Check, p.Severity, strings.Join(p.Targets, " "), p.Observed, p.Remedy})
	}
	want := []brief{
		{"port.phys", diagnose.Fail, "mlx5_2/1", "", "mlxlink -d 0000:3b:00.0 -p 1"},
		{"port.phys", diagnose.Fail, "mlx5_2/2", "", "mlxlink -d 0000:3b:00.1 -p 2"},
		{"port.rate", diagnose.Fail, "mlx5_0/1", "56 Gb/sec (4X FDR)", "mlx5_0/1 trained at FDR lanes: check the switch port"},
		{"port.rate", diagnose.Fail, "mlx5_1/1", "100 Gb/sec (2X HDR)", "mlx5_1/1 trained only 2X: check the cable first"},
		{"ctr.integrity", diagnose.Warn, "mlx5_0/1 mlx5_1/1 mlx5_10/1", "excessive_buffer_overrun_errors unknown (saturated)",
			"clear the saturated counters so they count again: perfquery -C <device> -P 1 -R (rdma_doctor judges increases, so clearing loses nothing)"},
		{"cgroup.rdma", diagnose.Warn, "/slurm mlx5_0 /slurm mlx5_1", "hca_handle=max", `echo "<device> hca_handle=64" > /sys/fs/cgroup/slurm/rdma.max`},
		{"ctr.symbol", diagnose.Warn, "mlx5_0/1 mlx5_1/1", "", "physical lane errors on <device>/1: clean the cable."},
		{"ctr.downed", diagnose.Warn, "mlx5_0/1 mlx5_0/2", "", "perfquery -C mlx5_0 -P <port> -R"},
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("problems:\n got %+v\nwant %+v", have, want)
	}
	for _, p := range got {
		if p.Check == "ctr.integrity" && !p.Unknown || p.Check == "cgroup.rdma" && p.Action != "rdma-cgroup" || p.Check == "ctr.symbol" && p.Expected != "warn above 0" {
			t.Errorf("shared fields lost: %+v", p)
		}
	}
	// The text line names each observation when they differ.
	for _, p := range diagnose.GroupProblems(fs) {
		if p.Check == "ctr.symbol" {
			if got, want := problemLine(p, func(_ diagnose.Severity, s string) string { return s }),
				"WARN ctr.symbol on 2 ports (mlx5_0/1, mlx5_1/1): mlx5_0/1 symbol_error +3, mlx5_1/1 symbol_error +5, expected warn above 0 — fix: physical lane errors on <device>/1: clean the cable."; got != want {
				t.Errorf("line\n got %q\nwant %q", got, want)
			}
		}
	}
	if got := diagnose.Problems([]diagnose.Finding{{Check: "a.b", Severity: diagnose.Pass}}); got == nil || len(got) != 0 {
		t.Errorf("no problems must be an empty list (JSON []), got %#v", got)
	}
}
