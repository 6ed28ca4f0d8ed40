// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/procstat"
)

// cpu is process pid's CPU in seconds, its reaped children's included
// (utime+stime+cutime+cstime).
func cpu(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	t, err := procstat.ParseStat(b)
	if err != nil {
		return 0, err
	}
	return t.WithChildren(), nil
}

// memory is VmRSS and VmHWM (the peak resident set) of process pid.
func memory(pid int) (rss, hwm uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	if rss, err = procstat.StatusBytes(b, "VmRSS"); err != nil {
		return 0, 0, err
	}
	hwm, err = procstat.StatusBytes(b, "VmHWM")
	return rss, hwm, err
}

// hasChildren says whether process pid has a child now (a sweep's
// perfquery), from every thread's /proc/PID/task/TID/children: a Go
// program forks from whichever thread runs the goroutine.
func hasChildren(pid int) (bool, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		return false, err
	}
	if len(tasks) == 0 {
		return false, fmt.Errorf("pid %d: no /proc/%d/task/*/children (kernel without CONFIG_PROC_CHILDREN?)", pid, pid)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread has exited
		}
		if len(bytes.TrimSpace(b)) > 0 {
			return true, nil
		}
	}
	return false, nil
}
