// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"testing"
)

func TestCPUTicks(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     uint64
	}{
		{"plain", "4242 (node_exporter) S 1 4242 4242 0 -1 4194560 1931 0 0 0 137 41 0 0 20 0 9 0 1234 1262350336 4500 18446744073709551615", 178},
		// A command name with spaces and a ')' of its own.
		{"odd comm", "77 (a b) c) R 1 77 77 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1 1 1 1", 11},
	} {
		got, err := cpuTicks([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 7"} {
		if _, err := cpuTicks([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestVmRSS(t *testing.T) {
	got, err := vmRSS([]byte("Name:\tnode_exporter\nVmPeak:\t 1262348 kB\nVmRSS:\t   17284 kB\nRssAnon:\t 9000 kB\n"))
	if err != nil || got != 17284*1024 {
		t.Errorf("%d, %v", got, err)
	}
	for _, bad := range []string{"Name: x\n", "VmRSS: 12 MB\n", "VmRSS: lots kB\n"} {
		if _, err := vmRSS([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestOwnProcess reads this process's own files: the real kernel format.
func TestOwnProcess(t *testing.T) {
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Error(err)
	}
	if rss, err := procRSS(os.Getpid()); err != nil || rss == 0 {
		t.Errorf("rss %d, %v", rss, err)
	}
}

// The memory split of this process: the real kernel format, the parts
// within the whole; and the loadable size of this test binary, an ELF file.
func TestOwnMemory(t *testing.T) {
	rss, anon, file, err := procMemory(os.Getpid())
	if err != nil || rss == 0 || anon == 0 || file == 0 || anon+file > rss+4096 {
		t.Errorf("rss %d, anon %d, file %d, %v", rss, anon, file, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := loadBytes(exe); err != nil || n == 0 || n > uint64(st.Size()) {
		t.Errorf("loadable %d of a %d-byte file, %v", n, st.Size(), err)
	}
	if _, err := statusBytes([]byte("VmRSS:\t1 kB\n"), "RssAnon"); err == nil {
		t.Error("a missing RssAnon accepted")
	}
}
