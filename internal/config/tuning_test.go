// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"slices"
	"strings"
	"testing"
)

func TestTuning(t *testing.T) {
	c, err := Parse([]byte("tuning:\n  memlock_processes: [slurmd, slurmstepd]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Tuning.MemlockProcesses, []string{"slurmd", "slurmstepd"}) {
		t.Errorf("memlock_processes = %q", c.Tuning.MemlockProcesses)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"tuning:\n  memlock_processes: [\"\"]\n", "not a process name"},
		{"tuning:\n  memlock_processes: [a/b]\n", "not a process name"},
		{"tuning:\n  memlock_processes: [k8s-rdma-shared-dev-plugin]\n", "longer than the kernel's 15-byte"},
		{"tuning:\n  memlock_process: [slurmd]\n", "memlock_process"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
