// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
)

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
		if got := diagnose.ReplaceWord(tc.s, tc.word, "X"); got != tc.want {
			t.Errorf("replaceWord(%q, %q) = %q, want %q", tc.s, tc.word, got, tc.want)
		}
	}
}

// TestProblemsOnTheDemoHost: the bundled demo host's failures and
// warnings group into fewer problems, its two ports with a saturated
// link_downed one of them; its nine 4-bit overrun counters pinned at 15
// are no problem at all (they cannot be judged: ctr.integrity).
func TestProblemsOnTheDemoHost(t *testing.T) {
	r := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "dgx-h100"), func() {})
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
	if r.Summary.Problems[0].Severity != diagnose.Fail {
		t.Errorf("the first problem is not the failure: %+v", r.Summary.Problems[0])
	}
}
