// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// tree is a small host tree: one attribute, one counter, two hw_counters
// and a file whose reads block.
var tree = map[string]string{
	"sys/class/infiniband/mlx5_0/node_guid":                             "946d:ae03:00cd:e72c\n",
	"sys/class/infiniband/mlx5_0/ports/1/counters/link_downed":          "255\n",
	"sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer":     "0\n",
	"sys/class/infiniband/mlx5_0/ports/1/hw_counters/rx_write_requests": "1234567\n",
	"sys/class/infiniband/mlx5_0/ports/1/state":                         "4: ACTIVE\n",
}

const blockedFile = "sys/class/infiniband/mlx5_0/ports/1/state"

// mount serves tree with delays d (and blockedFile blocked) and returns the
// mount point. CI runs as root with /dev/fuse: a machine without them fails
// here, on purpose, rather than skipping the only test of slowfs.
func mount(t *testing.T, d Delays) (string, *Server) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("slowfs needs FUSE: /dev/fuse is missing (%v); run as root on a machine with the fuse module", err)
	}
	src := t.TempDir()
	for name, content := range tree {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := NewServer(d, []string{blockedFile})
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	fsrv, err := Mount(src, mnt, srv)
	if err != nil {
		t.Fatalf("mount failed (CI runs as root with /dev/fuse; FUSE must work there): %v", err)
	}
	t.Cleanup(func() {
		srv.Release()
		if err := fsrv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return mnt, srv
}

func TestPassthrough(t *testing.T) {
	mnt, srv := mount(t, Delays{})
	srv.Release()
	for name, want := range tree {
		got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if err := os.WriteFile(filepath.Join(mnt, "sys/class/infiniband/mlx5_0/node_guid"), []byte("x\n"), 0o644); err == nil {
		t.Error("a write to the read-only tree succeeded")
	}
}

// TestDelays asserts only that each read took at least its delay: never an
// upper bound, which a loaded machine cannot promise.
func TestDelays(t *testing.T) {
	d := Delays{Counter: 30 * time.Millisecond, HWRefresh: 40 * time.Millisecond, HWWindow: time.Hour, Other: 20 * time.Millisecond}
	mnt, _ := mount(t, d)
	for _, tc := range []struct {
		name string
		min  time.Duration
	}{
		{"sys/class/infiniband/mlx5_0/ports/1/counters/link_downed", d.Counter},
		{"sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer", d.HWRefresh},
		{"sys/class/infiniband/mlx5_0/node_guid", d.Other},
	} {
		start := time.Now()
		got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(tc.name)))
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < tc.min {
			t.Errorf("%s read in %v, want at least %v", tc.name, el, tc.min)
		}
		if string(got) != tree[tc.name] {
			t.Errorf("%s = %q through the delay", tc.name, got)
		}
	}
}

// TestHWRefreshOncePerWindow: the second file of a hw_counters/ directory,
// read within the window, does not refresh again. The refresh clock is
// checked, not the read's duration.
func TestHWRefreshOncePerWindow(t *testing.T) {
	mnt, srv := mount(t, Delays{HWRefresh: time.Millisecond, HWWindow: time.Hour})
	dir := filepath.Join(mnt, "sys/class/infiniband/mlx5_0/ports/1/hw_counters")
	for _, f := range []string{"out_of_buffer", "rx_write_requests"} {
		if _, err := os.ReadFile(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	srv.hwMu.Lock()
	defer srv.hwMu.Unlock()
	if len(srv.hw) != 1 {
		t.Fatalf("%d hw_counters clocks, want 1: %v", len(srv.hw), srv.hw)
	}
}

func TestBlockedReadReturnsAfterRelease(t *testing.T) {
	mnt, srv := mount(t, Delays{})
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := os.ReadFile(filepath.Join(mnt, blockedFile))
		done <- result{b, err}
	}()
	// The read is blocked once it waits on the gate; the test's own
	// deadline bounds this loop.
	for srv.Waiting() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("blocked read returned before release: %q, %v", r.b, r.err)
	default:
	}
	srv.Release()
	r := <-done
	if r.err != nil || string(r.b) != tree[blockedFile] {
		t.Fatalf("after release: %q, %v", r.b, r.err)
	}
}

func TestBadPattern(t *testing.T) {
	if _, err := NewServer(Delays{}, []string{"["}); err == nil {
		t.Error("a malformed pattern was accepted")
	}
}
