// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func saturated(dev string) Finding {
	return Finding{Check: "ctr.integrity", Severity: Warn, Target: dev + "/1", Unknown: true,
		Observed: "excessive_buffer_overrun_errors unknown (saturated)",
		Remedy:   "clear the saturated counters so they count again: perfquery -C " + dev + " -P 1 -R (rdma_doctor judges increases, so clearing loses nothing)"}
}

func TestProblemsGroupByFix(t *testing.T) {
	var fs []Finding
	fs = append(fs, Finding{Check: "port.phys", Severity: Pass, Target: "mlx5_0/1"})
	for _, d := range []string{"mlx5_0", "mlx5_1", "mlx5_10"} {
		fs = append(fs, saturated(d))
	}
	fs = append(fs,
		Finding{Check: "cgroup.rdma", Severity: Warn, Target: "/slurm mlx5_0", Observed: "hca_handle=max", Action: "rdma-cgroup",
			Remedy: `echo "mlx5_0 hca_handle=64" > /sys/fs/cgroup/slurm/rdma.max`},
		Finding{Check: "cgroup.rdma", Severity: Warn, Target: "/slurm mlx5_1", Observed: "hca_handle=max", Action: "rdma-cgroup",
			Remedy: `echo "mlx5_1 hca_handle=64" > /sys/fs/cgroup/slurm/rdma.max`},
		// Different fixes of one check stay apart.
		Finding{Check: "port.rate", Severity: Fail, Target: "mlx5_0/1", Observed: "56 Gb/sec (4X FDR)", Remedy: "mlx5_0/1 trained at FDR lanes: check the switch port"},
		Finding{Check: "port.rate", Severity: Fail, Target: "mlx5_1/1", Observed: "100 Gb/sec (2X HDR)", Remedy: "mlx5_1/1 trained only 2X: check the cable first"},
		// Same fix, different observations: one problem, each observation kept.
		Finding{Check: "ctr.symbol", Severity: Warn, Target: "mlx5_0/1", Observed: "symbol_error +3", Expected: "warn above 0", Remedy: "physical lane errors on mlx5_0/1: clean the cable."},
		Finding{Check: "ctr.symbol", Severity: Warn, Target: "mlx5_1/1", Observed: "symbol_error +5", Expected: "warn above 0", Remedy: "physical lane errors on mlx5_1/1: clean the cable."},
		// Ports of one device: the port number is the placeholder.
		Finding{Check: "ctr.downed", Severity: Warn, Target: "mlx5_0/1", Remedy: "perfquery -C mlx5_0 -P 1 -R"},
		Finding{Check: "ctr.downed", Severity: Warn, Target: "mlx5_0/2", Remedy: "perfquery -C mlx5_0 -P 2 -R"},
		// "1" of the port is not the 1 of a PCI function: no false merge.
		Finding{Check: "port.phys", Severity: Fail, Target: "mlx5_2/1", Remedy: "mlxlink -d 0000:3b:00.0 -p 1"},
		Finding{Check: "port.phys", Severity: Fail, Target: "mlx5_2/2", Remedy: "mlxlink -d 0000:3b:00.1 -p 2"},
		Finding{Check: "irq.local", Severity: Skip, Target: "host"},
	)
	got := Problems(fs)
	type brief struct {
		Check    string
		Severity Severity
		Targets  string
		Observed string
		Remedy   string
	}
	var have []brief
	for _, p := range got {
		have = append(have, brief{p.Check, p.Severity, strings.Join(p.Targets, " "), p.Observed, p.Remedy})
	}
	want := []brief{
		{"port.phys", Fail, "mlx5_2/1", "", "mlxlink -d 0000:3b:00.0 -p 1"},
		{"port.phys", Fail, "mlx5_2/2", "", "mlxlink -d 0000:3b:00.1 -p 2"},
		{"port.rate", Fail, "mlx5_0/1", "56 Gb/sec (4X FDR)", "mlx5_0/1 trained at FDR lanes: check the switch port"},
		{"port.rate", Fail, "mlx5_1/1", "100 Gb/sec (2X HDR)", "mlx5_1/1 trained only 2X: check the cable first"},
		{"ctr.integrity", Warn, "mlx5_0/1 mlx5_1/1 mlx5_10/1", "excessive_buffer_overrun_errors unknown (saturated)",
			"clear the saturated counters so they count again: perfquery -C <device> -P 1 -R (rdma_doctor judges increases, so clearing loses nothing)"},
		{"cgroup.rdma", Warn, "/slurm mlx5_0 /slurm mlx5_1", "hca_handle=max", `echo "<device> hca_handle=64" > /sys/fs/cgroup/slurm/rdma.max`},
		{"ctr.symbol", Warn, "mlx5_0/1 mlx5_1/1", "", "physical lane errors on <device>/1: clean the cable."},
		{"ctr.downed", Warn, "mlx5_0/1 mlx5_0/2", "", "perfquery -C mlx5_0 -P <port> -R"},
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
	for _, p := range groupProblems(fs) {
		if p.Check == "ctr.symbol" {
			if got, want := problemLine(p, func(_ Severity, s string) string { return s }),
				"WARN ctr.symbol on 2 ports (mlx5_0/1, mlx5_1/1): mlx5_0/1 symbol_error +3, mlx5_1/1 symbol_error +5, expected warn above 0 — fix: physical lane errors on <device>/1: clean the cable."; got != want {
				t.Errorf("line\n got %q\nwant %q", got, want)
			}
		}
	}
	if got := Problems([]Finding{{Check: "a.b", Severity: Pass}}); got == nil || len(got) != 0 {
		t.Errorf("no problems must be an empty list (JSON []), got %#v", got)
	}
}

func TestReplaceWord(t *testing.T) {
	for _, tc := range []struct{ s, word, want string }{
		{"perfquery -C mlx5_1 -P 1", "mlx5_1", "perfquery -C X -P 1"},
		{"mlx5_10 and mlx5_1/1", "mlx5_1", "mlx5_10 and X/1"},
		{"0000:3b:00.1 -p 1", "1", "0000:3b:00.1 -p X"},
		{"bring ib0 up. Then ib0.", "ib0", "bring X up. Then X."},
		{"ib0.100 is a child", "ib0", "ib0.100 is a child"},
		{`echo "mlx5_0 x" > /sys/fs/cgroup/slurm/rdma.max`, "slurm", `echo "mlx5_0 x" > /sys/fs/cgroup/X/rdma.max`},
		{"systemctl edit slurmstepd", "slurm", "systemctl edit slurmstepd"},
		{"", "a", ""},
	} {
		if got := replaceWord(tc.s, tc.word, "X"); got != tc.want {
			t.Errorf("replaceWord(%q, %q) = %q, want %q", tc.s, tc.word, got, tc.want)
		}
	}
}

// TestProblemsOnTheDemoHost: the bundled demo host's failures and
// warnings group into fewer problems, its two ports with a saturated
// link_downed one of them; its nine 4-bit overrun counters pinned at 15
// are no problem at all (they cannot be judged: ctr.integrity).
func TestProblemsOnTheDemoHost(t *testing.T) {
	r := evaluateHost(t, filepath.Join(fixtures, "dgx-h100"), func() {})
	n := r.Summary.Fail + r.Summary.Warn
	total := 0
	for _, p := range r.Summary.Problems {
		total += len(p.Targets)
		if p.Check == "ctr.downed" && (len(p.Targets) != 2 || !strings.Contains(p.Remedy, "perfquery -C <device> -P 1 -R")) {
			t.Errorf("the saturated ports are not one problem: %+v", p)
		}
		if p.Check == "ctr.integrity" {
			t.Errorf("pinned 4-bit counters made a problem: %+v", p)
		}
	}
	if total != n || len(r.Summary.Problems) >= n || len(r.Summary.Problems) == 0 {
		t.Errorf("%d failures and warnings, %d problems covering %d targets", n, len(r.Summary.Problems), total)
	}
	if r.Summary.Problems[0].Severity != Fail {
		t.Errorf("the first problem is not the failure: %+v", r.Summary.Problems[0])
	}
}
