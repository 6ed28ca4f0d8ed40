// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package procs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	for pid, comm := range map[string]string{
		"1": "systemd\n", "99": "slurmd\n", "100": "slurmd\n", "7": "irqbalance\n",
		"8": "irqbalance-ui\n", "self": "rdma_doctor\n", "0": "swapper\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pid, "comm"), []byte(comm), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// exited during the scan: a directory without comm
	if err := os.MkdirAll(filepath.Join(dir, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "interrupts"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Find(context.Background(), hostfs.Dir(dir), "slurmd", "irqbalance", "sshd", "rdma_doctor")
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != "map[irqbalance:[7] slurmd:[99 100]]" {
		t.Errorf("Find = %s", s)
	}

	faulty := &hostfstest.Faulty{Base: hostfs.Dir(dir), Errors: map[string]error{".": syscall.EACCES}}
	if _, err := Find(context.Background(), faulty, "slurmd"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("unreadable table: err %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Find(ctx, hostfs.Dir(dir), "slurmd"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v", err)
	}
}
