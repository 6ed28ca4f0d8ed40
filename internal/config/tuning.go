// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Tuning configures the tuning collector (internal/tuning).
type Tuning struct {
	// MemlockProcesses are process names, as the kernel's comm has them,
	// whose RLIMIT_MEMLOCK is exported: the daemons that launch RDMA jobs
	// (slurmd, slurmstepd, a Kubernetes device plugin...).
	MemlockProcesses []string `yaml:"memlock_processes"`
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
	*t = Tuning(p)
	return nil
}
