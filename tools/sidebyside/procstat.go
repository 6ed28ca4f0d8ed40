// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/procstat"
)

// procCPU is the CPU seconds process pid has used, all threads.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	t, err := procstat.ParseStat(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return t.Self(), nil
}

// procRSS is process pid's resident set size in bytes.
func procRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	n, err := procstat.StatusBytes(b, "VmRSS")
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
		if *f.dst, err = procstat.StatusBytes(b, f.key); err != nil {
			return 0, 0, 0, fmt.Errorf("pid %d: %w", pid, err)
		}
	}
	return rss, anon, file, nil
}

// procOpenFiles counts the files process pid holds open: its descriptors
// whose link names a path, less devices (/dev); sockets, pipes and
// anonymous inodes name none.
func procOpenFiles(pid int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue // closed since the listing
		}
		if strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "/dev/") {
			n++
		}
	}
	return n, nil
}
