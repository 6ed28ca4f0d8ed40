// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
)

// TestFabricSweepDirGoneAtSIGTERM: the counter sweep's private cache
// directory (rdma_doctor-fabric-* under $TMPDIR) is removed when the
// server ends on SIGTERM (issue 35 item 7: the server exited without
// waiting for its background loops, and the directory stayed).
func TestFabricSweepDirGoneAtSIGTERM(t *testing.T) {
	// The binary is built (once per run, under $TMPDIR) before TMPDIR
	// points into this test's directory, which is removed when it ends.
	binary(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	tools := fabrictest.Install(t)
	// ibqueryerrors hangs: SIGTERM comes while a sweep runs, the case
	// where the directory stayed (the loop was still killing the run when
	// the process exited).
	hang := filepath.Join(t.TempDir(), "ibqueryerrors")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := start(t, append(hostArgs(t, hosts(t)[0]), "--collector.fabric", "--collector.fabric.iblinkinfo-path="+tools.IBLinkInfo,
		"--collector.fabric.ibqueryerrors-path="+hang, "--collector.fabric.ibnetdiscover-path="+tools.IBNetDiscover, "--collector.fabric.sminfo-path="+tools.SMInfo)...)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, body := e.get(t, "/metrics"); strings.Contains(body, "rdma_fabric_counter_sweep_in_progress_seconds") &&
			!strings.Contains(body, "rdma_fabric_counter_sweep_in_progress_seconds 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no counter sweep running in 60 s\n%s", e.stderr.String()) // the bound of a wait
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "rdma_doctor-fabric-*")); len(dirs) != 1 {
		t.Fatalf("private cache directories %v, want the sweep's one", dirs)
	}
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); e.cmd.Process.Signal(syscall.Signal(0)) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("SIGTERM did not end the server in 30 s\n%s", e.stderr.String())
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "rdma_doctor-fabric-*")); len(dirs) != 0 {
		t.Errorf("left behind at SIGTERM: %v\n%s", dirs, e.stderr.String())
	}
}
