// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Tuning configures the tuning collector (internal/read/tuning).
type Tuning struct {
	// MemlockProcesses are process names, as the kernel's comm has them,
	// whose RLIMIT_MEMLOCK is exported: the daemons that launch RDMA jobs
	// (slurmd, slurmstepd, a Kubernetes device plugin...).
	MemlockProcesses []string `yaml:"memlock_processes"`
	// OptionalCounters are the optional hardware counters the
	// rdma-optional-counters remediate action enables on every port that
	// offers them (`rdma statistic mode supported`: mlx5's cc_rx_ce_pkts,
	// cc_rx_cnp_pkts, cc_tx_cnp_pkts, ...). Empty: the action has nothing
	// to do.
	OptionalCounters []string `yaml:"optional_counters"`
}

// maxCounterName bounds an optional counter's name: the kernel's are
// short identifiers (the longest mlx5 one is 14 bytes).
const maxCounterName = 64

// validCounterName is a driver's counter name: letters, digits and '_'.
// Nothing else, since the name goes into a udev rule's RUN command.
func validCounterName(s string) bool {
	if s == "" || len(s) > maxCounterName {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// commLen is TASK_COMM_LEN - 1: the kernel cuts process names there, so a
// longer name can never match.
const commLen = 15

// UnmarshalYAML decodes strictly and checks the process names.
func (t *Tuning) UnmarshalYAML(n *yaml.Node) error {
	type plain Tuning
	var p plain
	// Decode alone would not inherit the outer decoder's KnownFields.
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	for i, name := range p.MemlockProcesses {
		switch {
		case name == "" || strings.ContainsAny(name, "/\n"):
			return fmt.Errorf("line %d: tuning.memlock_processes[%d]: %q is not a process name", n.Line, i, name)
		case len(name) > commLen:
			return fmt.Errorf("line %d: tuning.memlock_processes[%d]: %q is longer than the kernel's %d-byte process name (comm) and would never match; use its first %d bytes", n.Line, i, name, commLen, commLen)
		}
	}
	seen := map[string]bool{}
	for i, name := range p.OptionalCounters {
		switch {
		case !validCounterName(name):
			return fmt.Errorf("line %d: tuning.optional_counters[%d]: %q is not a counter name (letters, digits and _, at most %d bytes)", n.Line, i, name, maxCounterName)
		case seen[name]:
			return fmt.Errorf("line %d: tuning.optional_counters[%d]: %q is listed twice", n.Line, i, name)
		}
		seen[name] = true
	}
	*t = Tuning(p)
	return nil
}
