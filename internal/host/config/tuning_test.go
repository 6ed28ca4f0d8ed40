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
	c, err = Parse([]byte("tuning:\n  optional_counters: [cc_rx_ce_pkts, cc_tx_cnp_pkts]\n"))
	if err != nil || !slices.Equal(c.Tuning.OptionalCounters, []string{"cc_rx_ce_pkts", "cc_tx_cnp_pkts"}) {
		t.Errorf("optional_counters = %q, %v", c.Tuning.OptionalCounters, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"tuning:\n  memlock_processes: [\"\"]\n", "not a process name"},
		{"tuning:\n  memlock_processes: [a/b]\n", "not a process name"},
		{"tuning:\n  memlock_processes: [k8s-rdma-shared-dev-plugin]\n", "longer than the kernel's 15-byte"},
		{"tuning:\n  memlock_process: [slurmd]\n", "memlock_process"},
		{"tuning:\n  optional_counters: [\"cc_rx_ce_pkts,cc_rx_cnp_pkts\"]\n", "not a counter name"},
		{"tuning:\n  optional_counters: [\"x\\\" RUN+=\\\"/bin/sh\"]\n", "not a counter name"},
		{"tuning:\n  optional_counters: [\"\"]\n", "not a counter name"},
		{"tuning:\n  optional_counters: [cc_rx_ce_pkts, cc_rx_ce_pkts]\n", "listed twice"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
