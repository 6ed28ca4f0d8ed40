// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/procstat"
)

// TestParseStatus reads a recorded /proc/PID/status (testdata/README.md).
func TestParseStatus(t *testing.T) {
	b, err := os.ReadFile("testdata/status")
	if err != nil {
		t.Fatal(err)
	}
	c, err := procstat.ParseSwitches(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Voluntary != 0 || c.Nonvoluntary != 35 {
		t.Errorf("parsed %+v, want 0 voluntary and 35 nonvoluntary (the recording's lines)", c)
	}
	if _, err := procstat.ParseSwitches([]byte("Name:\tcat\nvoluntary_ctxt_switches:\t3\n")); err == nil {
		t.Error("a status without nonvoluntary_ctxt_switches parsed")
	}
}

// TestMeasure: a process asleep in the kernel does not wake; a shell that
// waits for a short sleep again and again wakes each time.
func TestMeasure(t *testing.T) {
	r, err := measure("sleep", []string{"sleep", "60"}, 100*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Switches != 0 || r.Threads != 1 {
		t.Errorf("sleep: %+v, want no switch and one thread", r)
	}
	r, err = measure("loop", []string{"sh", "-c", "while :; do sleep 0.05; done"}, 100*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Voluntary == 0 || r.PerSecond <= 0 {
		t.Errorf("a shell waking for its children: %+v, want switches", r)
	}
}
