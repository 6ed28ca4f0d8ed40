// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package procs finds processes by name in the procfs root: the one scan of
// /proc/<pid>/comm for whoever needs to know whether a daemon runs.
package procs

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// Find returns the PIDs of the processes whose comm is one of names,
// keyed by name, in ascending PID order. comm is the kernel's task name,
// cut to 15 bytes ("irqbalance", "slurmd"), so names longer than that never
// match. A process that exits during the scan is skipped; only an
// unreadable process table is an error. Only processes of this PID
// namespace are visible.
func Find(ctx context.Context, proc hostfs.FS, names ...string) (map[string][]int, error) {
	entries, err := proc.ReadDir(".")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	found := map[string][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue // not a process: self, sys, interrupts, ...
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := proc.ReadFile(e.Name() + "/comm")
		if err != nil {
			continue // exited since the listing, or a kernel thread we may not read
		}
		comm := strings.TrimSuffix(string(b), "\n")
		if want[comm] {
			found[comm] = append(found[comm], pid)
		}
	}
	// ReadDir sorts by name, so "100" comes before "99".
	for _, pids := range found {
		slices.Sort(pids)
	}
	return found, nil
}
