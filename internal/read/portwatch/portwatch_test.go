// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package portwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
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
	tr.write(dev, port, map[string]string{"state": state, "phys_state": phys})
}

// setDowned sets a port's link_downed counter.
func (tr *tree) setDowned(dev string, port int, n uint64) {
	tr.t.Helper()
	tr.write(dev, port, map[string]string{"counters/link_downed": strconv.FormatUint(n, 10)})
}

func (tr *tree) write(dev string, port int, files map[string]string) {
	tr.t.Helper()
	dir := filepath.Join(tr.root, "class/infiniband", dev, "ports", strconv.Itoa(port))
	if err := os.MkdirAll(filepath.Join(dir, "counters"), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	// In place, as the kernel's attribute changes under an open fd.
	for name, v := range files {
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

// hangFS is a sysfs whose reads of one file block until released, as a
// read stuck in a wedged driver does (the e2e hang tests do the same over
// FUSE with tools/slowfs).
type hangFS struct {
	hostfs.FS
	path    string
	release chan struct{}
	once    sync.Once
	entered chan struct{}
}

func (h *hangFS) ReadFile(name string) ([]byte, error) {
	if name == h.path {
		h.once.Do(func() { close(h.entered) })
		<-h.release
	}
	return h.FS.ReadFile(name)
}

// TestHungPortDoesNotStopOthers: while the state read of mlx5_0 hangs,
// mlx5_1 flaps 48 times and every flap is counted; mlx5_0 says why it is
// not read, and is read again once its read returns. Before, one round
// read the ports one after the other and the hung read stopped them all.
func TestHungPortDoesNotStopOthers(t *testing.T) {
	tr := newTree(t, "mlx5_0", "mlx5_1")
	hang := &hangFS{FS: hostfs.Dir(tr.root), path: "class/infiniband/mlx5_0/ports/1/state",
		release: make(chan struct{}), entered: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(hang.release)
		}
	}()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := New(Options{Sys: hang, Window: time.Hour, Now: func() time.Time { return now }})
	defer w.close()
	w.Sample() // mlx5_1 read; mlx5_0's read begins and hangs
	<-hang.entered
	const flaps = 48
	for i := 0; i < flaps; i++ {
		for _, st := range [][2]string{{"1: DOWN", "2: Polling"}, {"4: ACTIVE", "5: LinkUp"}} {
			tr.set("mlx5_1", 1, st[0], st[1])
			now = now.Add(time.Second)
			w.Sample()
		}
	}
	hs := w.Ports()
	if len(hs) != 2 {
		t.Fatalf("%d ports, want 2", len(hs))
	}
	if h := hs[1]; h.Transitions["down"] != flaps || h.Transitions["active"] != flaps || len(h.Cycles) != flaps {
		t.Errorf("mlx5_1: transitions %v, %d cycles; want %d down, %d active, %d cycles", h.Transitions, len(h.Cycles), flaps, flaps, flaps)
	}
	if h := hs[0]; !errors.Is(h.Err, hostfs.ErrStuck) || !h.Changed.IsZero() {
		t.Errorf("mlx5_0 while its read hangs: err %v, changed %v; want ErrStuck and no state", h.Err, h.Changed)
	}
	close(hang.release)
	released = true
	// The hung read returns and is applied; the next rounds read the
	// port again.
	for deadline := time.Now().Add(30 * time.Second); ; {
		w.Sample()
		if h := w.Ports()[0]; h.Err == nil && h.State.Value == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mlx5_0 not read again after its read returned: %+v", w.Ports()[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLinkDownedBetweenRounds: link downs no round saw are counted from
// link_downed as whole cycles; downs a round saw are not counted twice,
// also when the counter shows them a round late; a saturated or cleared
// counter tells nothing.
func TestLinkDownedBetweenRounds(t *testing.T) {
	tr := newTree(t, "mlx5_0")
	tr.setDowned("mlx5_0", 1, 7)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := New(Options{Sys: hostfs.Dir(tr.root), Window: time.Hour, Now: func() time.Time { return now }})
	defer w.close()
	round := func(state string, downed uint64) History {
		t.Helper()
		phys := "5: LinkUp"
		if state != "4: ACTIVE" {
			phys = "2: Polling"
		}
		tr.set("mlx5_0", 1, state, phys)
		tr.setDowned("mlx5_0", 1, downed)
		now = now.Add(15 * time.Second)
		w.Sample()
		return w.Ports()[0]
	}
	check := func(step string, h History, downs, inferred uint64) {
		t.Helper()
		if h.Transitions["down"] != downs || h.Transitions["active"]+1 < downs || h.Inferred != inferred {
			t.Errorf("%s: transitions %v, inferred %d; want %d down, %d inferred", step, h.Transitions, h.Inferred, downs, inferred)
		}
	}
	check("first read", round("4: ACTIVE", 7), 0, 0) // 7 before the watch: not ours
	h := round("4: ACTIVE", 10)
	check("three flaps between two rounds", h, 3, 3)
	if len(h.Cycles) != 3 || h.DownSeconds != 0 {
		t.Errorf("cycles %d, down %v s; want 3 cycles and no time down (unknown)", len(h.Cycles), h.DownSeconds)
	}
	check("a down the round saw", round("1: DOWN", 11), 4, 3)
	check("back up", round("4: ACTIVE", 11), 4, 3)
	check("a down the counter shows a round late", round("1: DOWN", 11), 5, 3)
	check("the counter catches up", round("4: ACTIVE", 12), 5, 3)
	check("one more unseen", round("4: ACTIVE", 13), 6, 4)
	check("cleared (perfquery -R)", round("4: ACTIVE", 0), 6, 4)
	check("after clearing", round("4: ACTIVE", 2), 8, 6)
	if h := round("4: ACTIVE", 255); h.Inferred != 259 || !h.Blind {
		t.Errorf("up to saturation: inferred %d, blind %v; want 259 and blind (the counter stopped)", h.Inferred, h.Blind)
	}
	if h := round("1: DOWN", 255); h.Transitions["down"] != 262 || h.Inferred != 259 {
		t.Errorf("a down seen at saturation: %v, inferred %d", h.Transitions, h.Inferred)
	}
}

// TestEventsAskForRounds: without an interval the watcher runs a round at
// each event and none otherwise; Refresh runs one when asked.
func TestEventsAskForRounds(t *testing.T) {
	tr := newTree(t, "mlx5_0")
	events := make(chan struct{})
	w := New(Options{Sys: hostfs.Dir(tr.root), Events: events})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan struct{})
	ran := make(chan struct{})
	go func() { w.Run(ctx, first); close(ran) }()
	defer func() { cancel(); <-ran }()
	<-first
	if r, _ := w.Cost(); r != 1 {
		t.Fatalf("%d rounds after the first, want 1", r)
	}
	tr.set("mlx5_0", 1, "1: DOWN", "3: Disabled")
	events <- struct{}{} // unbuffered: Run has taken it
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if h := w.Ports()[0]; h.Transitions["down"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event's round did not read the port: %+v", w.Ports()[0])
		}
	}
	tr.set("mlx5_0", 1, "4: ACTIVE", "5: LinkUp")
	time.Sleep(fresh) // so Refresh does not reuse the event's round
	w.Refresh()
	if h := w.Ports()[0]; h.Transitions["active"] != 1 {
		t.Errorf("Refresh did not read the port: %+v", h)
	}
}
