// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
)

// fakeBackground is a background source whose loop publishes the values
// the test sends it, one at a time, and whose rounds publish a count.
type fakeBackground struct {
	src *Background[*int]
	// send makes the loop publish a value; acked says it did.
	send  chan int
	acked chan struct{}
	// loops counts the loops started, exited each loop that ended,
	// rounds the rounds run, opens the times open was called.
	loops, rounds, opens atomic.Int32
	exited               chan struct{}
}

func newFakeBackground(t *testing.T, name string, onDemand, off bool) *fakeBackground {
	f := &fakeBackground{send: make(chan int), acked: make(chan struct{}), exited: make(chan struct{}, 2)}
	f.src = &Background[*int]{name: name, onDemand: onDemand, open: func(_ *Host, _ runEnv, published func()) *task[*int] {
		f.opens.Add(1)
		if off {
			return nil
		}
		var mu sync.Mutex
		v := new(int) // 0 before a publish, as a runner's empty status
		set := func(n int) {
			mu.Lock()
			v = &n
			mu.Unlock()
			published()
		}
		return &task[*int]{
			run: func(ctx context.Context) {
				if f.loops.Add(1) > 1 {
					t.Error("a second loop started")
				}
				defer func() { f.exited <- struct{}{} }()
				for {
					select {
					case <-ctx.Done():
						return
					case n := <-f.send:
						set(n)
						f.acked <- struct{}{}
					}
				}
			},
			round:  func(context.Context) { set(int(f.rounds.Add(1))) },
			latest: func() *int { mu.Lock(); defer mu.Unlock(); return v },
		}
	}}
	saved := sources
	sources = append(slices.Clip(sources), f.src)
	t.Cleanup(func() { sources = saved })
	return f
}

// startLoops runs h's background sources as the server does: Workers
// under one group, until ctx ends.
func startLoops(t *testing.T, ctx context.Context, h *Host) *worker.Group {
	t.Helper()
	g, err := worker.NewGroup(nil, h.Workers(nil, nil)...)
	if err != nil {
		t.Fatal(err)
	}
	g.Start(ctx)
	return g
}

// health is the named worker's status in g.
func health(g *worker.Group, name string) worker.Status {
	for _, r := range g.Reports() {
		if r.Name == name {
			return r.Status
		}
	}
	return worker.Status{Problem: "not registered"}
}

func (f *fakeBackground) read(h *Host) (int, bool) {
	v := latest(context.Background(), h.Snapshot(), f.src)
	if v == nil {
		return 0, false
	}
	return *v, true
}

// A background source is its declaration and its line in the table:
// Workers hands out its loop once, a snapshot reads the latest result the loop
// published (none before the first), Ages reports the time since that
// publish, its worker's health follows, and the loop ends with the
// group's context.
func TestBackgroundStartAndStop(t *testing.T) {
	f := newFakeBackground(t, "fake_bg", false, false)
	h, _, _, now := faultyHost(t, Options{})
	if v, ok := f.read(h); ok {
		t.Errorf("read %d before Workers: a source without on-demand rounds reads nothing where no loop runs", v)
	}
	if age, ok := h.Ages()["fake_bg"]; ok {
		t.Errorf("age %v before any publish", age)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := startLoops(t, ctx, h)
	if st := health(g, "fake_bg"); st.Problem != worker.FirstRoundPending || !st.Latest.IsZero() {
		t.Errorf("health %+v before the first publish, want first_round_pending", st)
	}
	if ws := h.Workers(nil, nil); len(ws) != 0 {
		t.Errorf("a second Workers handed out %d loops again", len(ws))
	}
	if age, ok := h.Ages()["fake_bg"]; ok {
		t.Errorf("age %v after Workers, before the loop published", age)
	}
	if v, ok := f.read(h); !ok || v != 0 {
		// The loop runs but has published nothing: latest's zero.
		t.Errorf("read %d, %v before the first publish", v, ok)
	}
	f.send <- 7
	<-f.acked
	*now = now.Add(5 * time.Second)
	if v, _ := f.read(h); v != 7 {
		t.Errorf("read %d, want the published 7", v)
	}
	if age, ok := h.Ages()["fake_bg"]; !ok || age != 5*time.Second {
		t.Errorf("age %v, %v 5s after the publish, want 5s", age, ok)
	}
	f.send <- 8
	<-f.acked
	if st := health(g, "fake_bg"); st.Problem != "" || !st.Latest.Equal(*now) {
		t.Errorf("health %+v after a publish at %v, want healthy with that time", st, *now)
	}
	if age := h.Ages()["fake_bg"]; age != 0 {
		t.Errorf("age %v just after a publish, want 0", age)
	}
	if n := f.opens.Load(); n != 1 {
		t.Errorf("opened %d times, want once per Host", n)
	}
	cancel()
	if !g.Wait(time.Minute) {
		t.Fatal("the loop still runs a minute after its context ended")
	}
	<-f.exited
	if st := health(g, "fake_bg"); st.Problem != worker.Stopped {
		t.Errorf("health %+v after the loop returned, want stopped", st)
	}
	if n := f.loops.Load(); n != 1 {
		t.Errorf("%d loops started, want 1", n)
	}
}

// Without a loop, a source with on-demand rounds runs one for a snapshot
// newer than its latest result, and only one however often the snapshot
// asks; one without them reads nothing until Round runs it.
func TestBackgroundWithoutLoop(t *testing.T) {
	demand := newFakeBackground(t, "fake_demand", true, false)
	driven := newFakeBackground(t, "fake_driven", false, false)
	h, _, _, now := faultyHost(t, Options{})
	ctx := context.Background()
	s := h.Snapshot()
	for range 2 {
		if v := latest(ctx, s, demand.src); v == nil || *v != 1 {
			t.Fatalf("on demand: %v, want the first round's 1", v)
		}
	}
	// Published at the snapshot's time: it serves a snapshot of the
	// same moment too.
	if v := latest(ctx, h.Snapshot(), demand.src); *v != 1 {
		t.Errorf("a snapshot of the same moment ran round %d", *v)
	}
	*now = now.Add(time.Second)
	if v := latest(ctx, h.Snapshot(), demand.src); *v != 2 {
		t.Errorf("a later snapshot read round %d, want its own round 2", *v)
	}
	*now = now.Add(4 * time.Second)
	if age := h.Ages()["fake_demand"]; age != 4*time.Second {
		t.Errorf("age %v, want 4s", age)
	}

	if v, ok := driven.read(h); ok {
		t.Errorf("read %d before Round", v)
	}
	h.Round(ctx)
	if v, ok := driven.read(h); !ok || v != 1 {
		t.Errorf("read %d, %v after Round, want 1", v, ok)
	}
	if n := driven.loops.Load() + demand.loops.Load(); n != 0 {
		t.Errorf("%d loops started without Workers", n)
	}
}

// A source the options leave off reads nothing, starts nothing and has
// no age.
func TestBackgroundOff(t *testing.T) {
	f := newFakeBackground(t, "fake_off", true, true)
	h, _, _, _ := faultyHost(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if ws := h.Workers(nil, nil); len(ws) != 0 {
		t.Errorf("%d workers of a source that is off", len(ws))
	}
	h.Round(ctx)
	if v, ok := f.read(h); ok {
		t.Errorf("read %d from a source that is off", v)
	}
	if _, ok := h.Ages()["fake_off"]; ok {
		t.Error("a source that is off has an age")
	}
	if n := f.opens.Load(); n != 1 {
		t.Errorf("opened %d times, want once", n)
	}
}

// sminfo is the host's: off without Options.SM; with it, one round per
// snapshot where no loop runs (the CLI), and AwaitSMInfo returns once the
// loop Workers hands out has published (the fixture has no umad: a round that
// finds no port to query).
func TestSMInfoSource(t *testing.T) {
	ctx := context.Background()
	h, _, _, _ := faultyHost(t, Options{})
	if st := h.Snapshot().SMStatus(ctx); st != nil {
		t.Errorf("sminfo ran without Options.SM: %+v", st)
	}
	h, _, _, now := faultyHost(t, Options{SM: &SMOptions{SminfoPath: "/nonexistent"}})
	st := h.Snapshot().SMStatus(ctx)
	if st == nil || st.Rounds != 1 || st.TargetsErr == nil {
		t.Fatalf("first snapshot: %+v, want one round that found no umad", st)
	}
	*now = now.Add(time.Second)
	if st := h.Snapshot().SMStatus(ctx); st.Rounds != 2 {
		t.Errorf("a later snapshot read round %d, want its own", st.Rounds)
	}

	h, _, _, _ = faultyHost(t, Options{SM: &SMOptions{SminfoPath: "/nonexistent", Interval: time.Hour}})
	h.AwaitSMInfo(ctx, time.Minute) // no loop: at once
	loop, cancel := context.WithCancel(ctx)
	defer cancel()
	startLoops(t, loop, h)
	h.AwaitSMInfo(ctx, time.Minute)
	if _, ok := h.Ages()["sminfo"]; !ok {
		t.Fatal("AwaitSMInfo returned before the first round was published")
	}
	// The loop's result, not a round of the snapshot's own.
	if st := h.Snapshot().SMStatus(ctx); st.Rounds != 1 {
		t.Errorf("rounds %d with the loop's hourly interval, want 1", st.Rounds)
	}
}

// The fabric's sources are the host's: off without Options.Fabric, the
// sweep off without Counters, neither run on demand; Round scans, then
// sweeps that scan, calling the OnFabricSweep hooks with the sweep it
// then publishes.
func TestFabricSources(t *testing.T) {
	ctx := context.Background()
	tools := fabrictest.Install(t)
	h, _, _, _ := faultyHost(t, Options{})
	h.Round(ctx)
	if sc, sw := h.Snapshot().FabricScan(ctx), h.Snapshot().FabricSweep(ctx); sc != nil || sw != nil {
		t.Errorf("fabric sources ran without Options.Fabric: %v %v", sc, sw)
	}
	h, _, _, _ = faultyHost(t, Options{Fabric: &FabricOptions{Path: tools.IBLinkInfo}})
	if sc := h.Snapshot().FabricScan(ctx); sc != nil {
		t.Errorf("a snapshot scanned on demand: %+v", sc)
	}
	h.Round(ctx)
	if sc := h.Snapshot().FabricScan(ctx); sc == nil || sc.Scans != 1 || sc.Fabric == nil {
		t.Errorf("after Round: scan %+v, want one with a fabric", sc)
	}
	if sw := h.Snapshot().FabricSweep(ctx); sw != nil {
		t.Errorf("a sweep without Counters: %+v", sw)
	}

	h, _, _, _ = faultyHost(t, Options{Fabric: &FabricOptions{Path: tools.IBLinkInfo, Counters: true,
		IBQueryErrorsPath: tools.IBQueryErrors, IBNetDiscoverPath: tools.IBNetDiscover, SMInfoPath: tools.SMInfo, CacheDir: t.TempDir()}})
	var hooked []*fabric.Sweep
	h.OnFabricSweep(func(sw *fabric.Sweep) { hooked = append(hooked, sw) })
	h.Round(ctx)
	sc, sw := h.Snapshot().FabricScan(ctx), h.Snapshot().FabricSweep(ctx)
	if sw == nil || sw.Sweeps != 1 || sw.Last == nil || sw.Last.Topology != sc.Fabric {
		t.Fatalf("after Round: sweep %+v, want one over the scan's fabric", sw)
	}
	if len(hooked) != 1 || hooked[0] != sw.Last {
		t.Errorf("hooks called with %v, want the published sweep once", hooked)
	}
	ages := h.Ages()
	for _, name := range []string{"fabric_scan", "fabric_sweep"} {
		if _, ok := ages[name]; !ok {
			t.Errorf("no age for %s after its round: %v", name, ages)
		}
	}
}

// TestStoppedRemovesSweepDir: once the workers' context ends, the group's
// Wait waits for the loops, and the sweep's private cache directory is gone by then (a
// server that returned without waiting left it behind at SIGTERM).
func TestStoppedRemovesSweepDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	tools := fabrictest.Install(t)
	h, _, _, _ := faultyHost(t, Options{Fabric: &FabricOptions{Path: tools.IBLinkInfo, Counters: true,
		IBQueryErrorsPath: tools.IBQueryErrors, IBNetDiscoverPath: tools.IBNetDiscover, SMInfoPath: tools.SMInfo}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := startLoops(t, ctx, h)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if sw := h.Snapshot().FabricSweep(ctx); sw != nil && sw.Sweeps > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sweep in 60 s") // the bound of a wait, not a timed assertion
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "rdma_doctor-fabric-*")); len(dirs) != 1 {
		t.Fatalf("private cache directories %v, want the sweep's one", dirs)
	}
	cancel()
	if !g.Wait(time.Minute) {
		t.Fatal("the loops did not return within a minute of their context's end")
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "rdma_doctor-fabric-*")); len(dirs) != 0 {
		t.Errorf("left behind: %v", dirs)
	}
}
