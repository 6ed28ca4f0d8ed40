// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

const fixture = "../../fixtures/hosts/numa-remote"

// faultyHost is a Host on the fixture whose sysfs and procfs reads are
// counted, on a clock the test moves.
func faultyHost(t *testing.T, opts Options) (*Host, *hostfstest.Faulty, *hostfstest.Faulty, *time.Time) {
	t.Helper()
	p, err := hostfs.Paths{Rootfs: fixture}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	open := p.Open()
	sys := &hostfstest.Faulty{Base: open.Sys}
	proc := &hostfstest.Faulty{Base: open.Proc}
	now := time.Unix(1_000_000, 0)
	opts.Paths = p
	opts.FS = &hostfs.Host{Root: open.Root, Sys: sys, Proc: proc}
	opts.Now = func() time.Time { return now }
	return New(opts), sys, proc, &now
}

// A snapshot reads each source once however often it is asked; a second
// snapshot reads the live class again and reuses the slow state until
// SlowRefresh passes.
func TestSnapshotReadsEachSourceOnce(t *testing.T) {
	h, sys, proc, now := faultyHost(t, Options{SlowRefresh: time.Minute})
	ctx := context.Background()
	state := "class/infiniband/mlx5_0/ports/1/state"
	numa := "class/infiniband/mlx5_0/device/numa_node"
	for snap := 1; snap <= 2; snap++ {
		s := h.Snapshot()
		for range 3 {
			if c, err := s.Class(ctx); err != nil || len(c.Devices) != 2 {
				t.Fatalf("class: %v", err)
			}
			if _, err := s.PCI(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Placement(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Netdevs(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := sys.Reads(state); n != snap {
			t.Errorf("snapshot %d: %s read %d times, want %d (once per snapshot)", snap, state, n, snap)
		}
		if n := sys.Reads(numa); n != 1 {
			t.Errorf("snapshot %d: %s read %d times, want 1 (slow, reused)", snap, numa, n)
		}
		if n := proc.Reads("interrupts"); n != 1 {
			t.Errorf("snapshot %d: interrupts read %d times, want 1 (slow, reused)", snap, n)
		}
	}
	*now = now.Add(time.Minute)
	if _, err := h.Snapshot().Placement(ctx); err != nil {
		t.Fatal(err)
	}
	if n := proc.Reads("interrupts"); n != 2 {
		t.Errorf("after SlowRefresh: interrupts read %d times, want 2", n)
	}
	if age, ok := h.Ages()[placementSource.Name()]; !ok || age != 0 {
		t.Errorf("irq age %v %v, want 0 right after the refresh", age, ok)
	}
	if _, ok := h.Ages()[tuningSource.Name()]; ok {
		t.Error("tuning has an age but was never read")
	}
}

// The sampler's snapshot takes the class a scrape read within maxAge,
// with its time, and reads it itself when that one is older.
func TestSnapshotReusing(t *testing.T) {
	h, sys, _, now := faultyHost(t, Options{})
	ctx := context.Background()
	state := "class/infiniband/mlx5_0/ports/1/state"
	scrape := h.Snapshot()
	if _, err := scrape.Class(ctx); err != nil {
		t.Fatal(err)
	}
	read := *now
	*now = now.Add(10 * time.Second)
	s := h.SnapshotReusing(15 * time.Second)
	if _, err := s.Class(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sys.Reads(state); n != 1 || !s.Time.Equal(read) {
		t.Errorf("reused: state read %d times, time %v; want 1 and %v", n, s.Time, read)
	}
	*now = now.Add(10 * time.Second)
	s = h.SnapshotReusing(15 * time.Second)
	if _, err := s.Class(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sys.Reads(state); n != 2 || !s.Time.Equal(*now) {
		t.Errorf("too old to reuse: state read %d times, time %v; want 2 and %v", n, s.Time, *now)
	}
}

// A slow source whose read never returns holds one reader: the others
// wait only as long as their context, then get the previous value (or
// their context's error when there is none), and never start a second
// read.
func TestSlowStuckRead(t *testing.T) {
	var c slow[int]
	now := time.Unix(0, 0)
	if v, err := c.get(context.Background(), now, time.Second, func(context.Context) (int, error) { return 1, nil }); v != 1 || err != nil {
		t.Fatalf("first read: %d %v", v, err)
	}
	release := make(chan struct{})
	started := make(chan struct{})
	reads := 0
	stuck := func(context.Context) (int, error) {
		reads++
		close(started)
		<-release
		return 2, nil
	}
	later := now.Add(time.Minute)
	done := make(chan int)
	go func() {
		v, _ := c.get(context.Background(), later, time.Second, stuck)
		done <- v
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, err := c.get(ctx, later, time.Second, stuck)
	if v != 1 || err != nil {
		t.Errorf("waiter with an ended context: %d %v, want the previous value 1", v, err)
	}
	var empty slow[int]
	go func() {
		_, _ = empty.get(context.Background(), later, time.Second, func(context.Context) (int, error) { <-release; return 3, nil })
	}()
	for {
		empty.mu.Lock()
		inFlight := empty.flight != nil
		empty.mu.Unlock()
		if inFlight {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := empty.get(ctx, later, time.Second, stuck); !errors.Is(err, context.Canceled) {
		t.Errorf("no previous value: err %v, want the context's", err)
	}
	close(release)
	if v := <-done; v != 2 || reads != 1 {
		t.Errorf("the stuck read returned %d after %d reads, want 2 after 1", v, reads)
	}
}
