// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// procRoot is a proc tree whose self names pid, with PID 548's comm as
// iproute2 commit 96f59e7f records it (ibv_rc_pingpong).
func procRoot(t *testing.T, self int) hostfs.FS {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(strconv.Itoa(self), filepath.Join(dir, "self")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "548"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "548", "comm"), []byte("ibv_rc_pingpong\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return hostfs.Dir(dir)
}

func TestProcessNamer(t *testing.T) {
	name := processNamer(procRoot(t, os.Getpid()))
	if n, ok := name(548); !ok || n != "ibv_rc_pingpong" {
		t.Errorf("548: %q %v", n, ok)
	}
	// Exited between the dump and the read.
	if n, ok := name(981); ok {
		t.Errorf("981: %q", n)
	}
	// A proc root of another PID namespace names nobody: its PIDs are
	// not the kernel's answer's.
	other := processNamer(procRoot(t, os.Getpid()+1))
	if n, ok := other(548); ok {
		t.Errorf("other namespace named 548 %q", n)
	}
}
