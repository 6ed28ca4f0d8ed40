// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every listed source has its own non-empty name, and once read it is in
// Ages under that name, at the age the clock says; a background source
// the options leave off never is.
func TestSourcesTable(t *testing.T) {
	h, _, _, now := faultyHost(t, Options{SlowRefresh: time.Minute})
	seen := map[string]bool{}
	for _, src := range sources {
		if src.Name() == "" {
			t.Errorf("a source of type %T has no name", src)
		}
		if seen[src.Name()] {
			t.Errorf("two sources are named %q", src.Name())
		}
		seen[src.Name()] = true
	}
	if ages := h.Ages(); len(ages) != 0 {
		t.Errorf("ages before any read: %v, want none", ages)
	}
	s := h.Snapshot()
	for _, src := range sources {
		// The fixture is not the running kernel: devlink answers
		// ErrNotLive, which is a reading too.
		_ = src.load(context.Background(), s)
	}
	*now = now.Add(5 * time.Second)
	ages := h.Ages()
	slow := 0
	for _, src := range sources {
		age, ok := ages[src.Name()]
		if src.Freshness() == Published {
			if ok {
				t.Errorf("Ages()[%q] = %v for a background source the options leave off", src.Name(), age)
			}
			continue
		}
		slow++
		if !ok || age != 5*time.Second {
			t.Errorf("Ages()[%q] = %v, %v after a read 5s ago, want 5s", src.Name(), age, ok)
		}
	}
	if len(ages) != slow {
		t.Errorf("Ages has %d sources, the table %d slow ones: %v", len(ages), slow, ages)
	}
}

// A new slow source is its declaration through register: the generic
// getter reads it through the Host's cache, and Ages reports it.
func TestSourceAddedByDeclaration(t *testing.T) {
	saved := sources
	t.Cleanup(func() { sources = saved })
	sources = slices.Clip(sources)
	reads := 0
	fake := register(&Source[int]{name: "fake", read: func(context.Context, *Snapshot) (int, error) {
		reads++
		return 42, nil
	}})

	h, _, _, now := faultyHost(t, Options{SlowRefresh: time.Minute})
	ctx := context.Background()
	for range 2 {
		if v, err := get(ctx, h.Snapshot(), fake); v != 42 || err != nil {
			t.Fatalf("get: %d %v, want 42", v, err)
		}
	}
	if reads != 1 {
		t.Errorf("two snapshots within SlowRefresh read the source %d times, want 1", reads)
	}
	*now = now.Add(time.Second)
	if age, ok := h.Ages()["fake"]; !ok || age != time.Second {
		t.Errorf("Ages()[fake] = %v, %v, want 1s", age, ok)
	}
	*now = now.Add(time.Minute)
	if _, err := get(ctx, h.Snapshot(), fake); err != nil || reads != 2 {
		t.Errorf("after SlowRefresh: %d reads (err %v), want 2", reads, err)
	}
}

// A source made without register (a literal) has no cache and no pin:
// reading it is an error value that names it, never a panic.
func TestUnregisteredSourceIsAnError(t *testing.T) {
	h, _, _, _ := faultyHost(t, Options{})
	s := h.Snapshot()
	ctx := context.Background()
	lost := &Source[int]{name: "lost", read: func(context.Context, *Snapshot) (int, error) { return 1, nil }}
	var unregistered errUnregistered
	if v, err := get(ctx, s, lost); v != 0 || !errors.As(err, &unregistered) || !strings.Contains(err.Error(), "lost") {
		t.Errorf("get of an unregistered source: %d, %v; want an error naming it", v, err)
	}
	if _, _, err := getFresh(ctx, s, lost); !errors.As(err, &unregistered) {
		t.Errorf("getFresh of an unregistered source: %v", err)
	}
	bg := &Background[*int]{name: "lost_bg", onDemand: true, open: func(*Host, runEnv, func()) *task[*int] {
		t.Error("an unregistered background source was opened")
		return nil
	}}
	if v := published(ctx, s, bg); v != nil {
		t.Errorf("published of an unregistered background source: %v, want nil", v)
	}
}

// A Snapshot pins what it hands out: a slow source whose cache another
// snapshot refreshes between two calls, and a background source whose
// loop publishes between two calls, give the first snapshot the same
// value both times, while a new snapshot sees the new one.
func TestSnapshotPinsSlowAndBackground(t *testing.T) {
	saved := sources
	t.Cleanup(func() { sources = saved })
	sources = slices.Clip(sources)
	reads := 0
	counted := register(&Source[int]{name: "counted", read: func(context.Context, *Snapshot) (int, error) {
		reads++
		return reads, nil
	}})
	bg := newFakeBackground(t, "pinned_bg", false, false) // registers it

	h, _, _, now := faultyHost(t, Options{SlowRefresh: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startLoops(t, ctx, h)
	bg.send <- 1
	<-bg.acked

	s := h.Snapshot()
	if v, _ := get(ctx, s, counted); v != 1 {
		t.Fatalf("first read %d, want 1", v)
	}
	if v := published(ctx, s, bg.src); v == nil || *v != 1 {
		t.Fatalf("first background read %v, want 1", v)
	}
	*now = now.Add(2 * time.Minute) // past SlowRefresh
	if v, _ := get(ctx, h.Snapshot(), counted); v != 2 {
		t.Fatalf("a later snapshot read %d, want the refresh 2", v)
	}
	bg.send <- 2
	<-bg.acked
	if v, _ := get(ctx, s, counted); v != 1 {
		t.Errorf("the first snapshot read %d after the cache refreshed, want its pinned 1", v)
	}
	if v := published(ctx, s, bg.src); v == nil || *v != 1 {
		t.Errorf("the first snapshot read background %v after a publish, want its pinned 1", v)
	}
	if v := published(ctx, h.Snapshot(), bg.src); v == nil || *v != 2 {
		t.Errorf("a new snapshot read background %v, want the published 2", v)
	}
	if reads != 2 {
		t.Errorf("%d reads, want 2 (one per refresh)", reads)
	}
}
