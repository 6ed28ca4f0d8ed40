// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package portwatch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
)

// tree is a sysfs with one port whose state files a test rewrites.
type tree struct {
	t    *testing.T
	root string
}

func newTree(t *testing.T, devs ...string) *tree {
	tr := &tree{t, t.TempDir()}
	for _, d := range devs {
		tr.set(d, 1, "4: ACTIVE", "5: LinkUp")
	}
	return tr
}

func (tr *tree) set(dev string, port int, state, phys string) {
	tr.t.Helper()
	dir := filepath.Join(tr.root, "class/infiniband", dev, "ports", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tr.t.Fatal(err)
	}
	// In place, as the kernel's attribute changes under an open fd.
	for name, v := range map[string]string{"state": state, "phys_state": phys} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			tr.t.Fatal(err)
		}
		if _, err := f.WriteString(v + "\n"); err != nil {
			tr.t.Fatal(err)
		}
		f.Close()
	}
}

// TestFlapsBetweenScrapes: down-up cycles a 15 s scrape would never see are
// counted, by state entered, with the time spent down and the cycles of the
// window; a port that never was ACTIVE accrues no down time.
func TestFlapsBetweenScrapes(t *testing.T) {
	tr := newTree(t, "mlx5_0")
	tr.set("mlx5_1", 1, "1: DOWN", "2: Polling") // a spare port
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := New(Options{Sys: hostfs.Dir(tr.root), Window: 10 * time.Minute, Now: func() time.Time { return now }})
	defer w.close()
	tick := func(state, phys string) {
		tr.set("mlx5_0", 1, state, phys)
		w.Sample()
		now = now.Add(time.Second)
	}
	tick("4: ACTIVE", "5: LinkUp")
	for i := 0; i < 3; i++ { // three flaps, two seconds down each
		tick("1: DOWN", "2: Polling")
		tick("1: DOWN", "2: Polling")
		tick("4: ACTIVE", "5: LinkUp")
	}
	tick("1: DOWN", "3: Disabled") // down now
	hs := w.Ports()
	if len(hs) != 2 {
		t.Fatalf("%d ports watched, want 2", len(hs))
	}
	h := hs[0]
	if h.Device != "mlx5_0" || h.Transitions["down"] != 4 || h.Transitions["active"] != 3 || len(h.Cycles) != 3 {
		t.Errorf("transitions %v, cycles %d; want 4 down, 3 active, 3 cycles", h.Transitions, len(h.Cycles))
	}
	if h.DownSeconds != 6 {
		t.Errorf("down %v s, want 6 (three times two seconds)", h.DownSeconds)
	}
	if h.DownSince.IsZero() || h.State.Value != 1 || h.PhysState.Value != 3 {
		t.Errorf("last state %+v/%+v down since %v", h.State, h.PhysState, h.DownSince)
	}
	spare := hs[1]
	if spare.WasActive || spare.DownSeconds != 0 || len(spare.Transitions) != 0 {
		t.Errorf("a port that never came up: %+v", spare)
	}
	// Eleven minutes later the cycles have left the window.
	now = now.Add(11 * time.Minute)
	tick("1: DOWN", "3: Disabled")
	if c := w.Ports()[0].Cycles; len(c) != 0 {
		t.Errorf("%d cycles kept past the window", len(c))
	}
}

// TestDeviceComesAndGoes: a device that appears is watched after the next
// rescan, one that vanishes is dropped by the next, and the device filter
// is honoured. (On sysfs a removed device's open attribute answers ENODEV,
// the reopen ENOENT, and the round rescans at once; a deleted regular file
// stays readable through its descriptor, so here the rescan finds it.)
func TestDeviceComesAndGoes(t *testing.T) {
	tr := newTree(t, "mlx5_0", "mlx5_9")
	w := New(Options{Sys: hostfs.Dir(tr.root), Keep: func(d string) bool { return d != "mlx5_9" }})
	defer w.close()
	w.Sample()
	if hs := w.Ports(); len(hs) != 1 || hs[0].Device != "mlx5_0" {
		t.Fatalf("watched %+v, want mlx5_0 only (mlx5_9 filtered)", hs)
	}
	tr.set("mlx5_1", 1, "4: ACTIVE", "5: LinkUp")
	for i := 0; i < RescanEvery; i++ {
		w.Sample()
	}
	if n := len(w.Ports()); n != 2 {
		t.Fatalf("%d ports after a rescan, want 2", n)
	}
	if err := os.RemoveAll(filepath.Join(tr.root, "class/infiniband/mlx5_1")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < RescanEvery; i++ {
		w.Sample()
	}
	if hs := w.Ports(); len(hs) != 1 || hs[0].Device != "mlx5_0" {
		t.Errorf("after mlx5_1 vanished: %+v", hs)
	}
}

// TestNoRDMACore: a host without class/infiniband watches nothing, quietly.
func TestNoRDMACore(t *testing.T) {
	w := New(Options{Sys: hostfs.Dir(t.TempDir())})
	w.Sample()
	if n := len(w.Ports()); n != 0 {
		t.Errorf("%d ports on a host without RDMA", n)
	}
}
