// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It
// is 100 on every Linux architecture Go supports (the kernel fixes the
// user-visible value; sysconf(_SC_CLK_TCK) reports the same).
const clockTicks = 100

// cpuTicks is utime+stime of a process from the text of /proc/PID/stat.
// The command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so the fields are counted from the last ')'.
func cpuTicks(stat []byte) (uint64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("stat %q: no command name", truncate(stat))
	}
	// After "pid (comm) " come state (field 3) ... utime (14), stime (15).
	f := strings.Fields(string(stat[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("stat %q: %d fields after the name, want at least %d", truncate(stat), len(f), stime+1)
	}
	u, err := strconv.ParseUint(f[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat utime: %w", err)
	}
	s, err := strconv.ParseUint(f[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat stime: %w", err)
	}
	return u + s, nil
}

// vmRSS is VmRSS in bytes from the text of /proc/PID/status.
func vmRSS(status []byte) (uint64, error) { return statusBytes(status, "VmRSS") }

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

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// procCPU is the CPU seconds process pid has used, all threads.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	t, err := cpuTicks(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return float64(t) / clockTicks, nil
}

// procRSS is process pid's resident set size in bytes.
func procRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	n, err := vmRSS(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return n, nil
}

// procMemory is process pid's resident memory: in all, anonymous (heap,
// stacks) and file-backed (its binary's pages, mapped from the page
// cache).
func procMemory(pid int) (rss, anon, file uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, f := range []struct {
		key string
		dst *uint64
	}{{"VmRSS", &rss}, {"RssAnon", &anon}, {"RssFile", &file}} {
		if *f.dst, err = statusBytes(b, f.key); err != nil {
			return 0, 0, 0, fmt.Errorf("pid %d: %w", pid, err)
		}
	}
	return rss, anon, file, nil
}
