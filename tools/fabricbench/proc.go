// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of the times in /proc/PID/stat: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// statCPU is utime+stime+cutime+cstime, in seconds, from the text of
// /proc/PID/stat: the process's own CPU and that of the children it has
// reaped (a server's tool children, once waited for). The command name
// (field 2) may hold spaces and parentheses: fields count from the last ')'.
func statCPU(stat []byte) (float64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("stat %q: no command name", head(stat))
	}
	f := strings.Fields(string(stat[end+1:]))
	// After "pid (comm) " come state (field 3) ... utime (14), stime
	// (15), cutime (16), cstime (17).
	const first, last = 14 - 3, 17 - 3
	if len(f) <= last {
		return 0, fmt.Errorf("stat %q: %d fields after the name, want at least %d", head(stat), len(f), last+1)
	}
	var ticks uint64
	for _, s := range f[first : last+1] {
		// cutime and cstime are signed in the kernel's format (long).
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("stat %q: time field %q", head(stat), s)
		}
		ticks += uint64(v)
	}
	return float64(ticks) / clockTicks, nil
}

// cpu is statCPU of process pid.
func cpu(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return statCPU(b)
}

// statusBytes is the "<n> kB" field key of /proc/PID/status, in bytes.
func statusBytes(status []byte, key string) (uint64, error) {
	for line := range strings.SplitSeq(string(status), "\n") {
		v, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("status %s %q: want \"<n> kB\"", key, v)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("status %s: %w", key, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("status has no %s line", key)
}

// memory is VmRSS and VmHWM (the peak resident set) of process pid.
func memory(pid int) (rss, hwm uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	if rss, err = statusBytes(b, "VmRSS"); err != nil {
		return 0, 0, err
	}
	hwm, err = statusBytes(b, "VmHWM")
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

func head(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}
