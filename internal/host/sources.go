// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"time"
)

// Source is one slow host source: state read at most every SlowRefresh
// and shared by every snapshot (and the diagnose sampler) through the
// Host's cache of it. Each is declared once, through register, as a
// package variable in the file of its topic; its Snapshot accessor is one
// line through get, which pins the reading in the snapshot. Nothing else
// names it: New makes its cache and pin slot, Ages reports its age, get
// and checkDevices apply its Freshness.
type Source[T any] struct {
	// name is the source label of rdma_snapshot_age_seconds.
	name string
	// freshness is when it is read again; unset, Slow.
	freshness Freshness
	// read reads the source for the snapshot that found the cache empty,
	// stale or too old. Its ctx is that snapshot's: a read cut short by
	// ctx is returned to it but not kept.
	read func(ctx context.Context, s *Snapshot) (T, error)
}

// Freshness says when a slow source's cached reading is read again.
type Freshness uint8

const (
	// Slow is served until SlowRefresh passes.
	Slow Freshness = iota
	// SlowFollowingDevices is Slow, and read again at once when the
	// class's devices change (one appears, vanishes or is re-registered:
	// checkDevices), so the source's series follow the live class.
	SlowFollowingDevices
	// Published is never read by a snapshot: the source's own loop
	// (its worker, Host.Workers) publishes each result, and a snapshot reads the
	// latest (a Background source, background.go).
	Published
)

// Name is the source's rdma_snapshot_age_seconds label.
func (src *Source[T]) Name() string { return src.name }

// Freshness is when the source is read again.
func (src *Source[T]) Freshness() Freshness { return src.freshness }

// source is a Source or a Background of any type, as the table lists it.
type source interface {
	Name() string
	Freshness() Freshness
	newCache() cache
	// load reads the source through s as its accessor would (tests read
	// every listed source with it).
	load(ctx context.Context, s *Snapshot) error
}

// cache is a slow[T] or a feed[T] of any type.
type cache interface {
	readAt() time.Time
	invalidate()
}

func (src *Source[T]) newCache() cache { return &slow[T]{} }

func (src *Source[T]) load(ctx context.Context, s *Snapshot) error {
	_, err := get(ctx, s, src)
	return err
}

// sources is every slow and background source, in the order of their
// declarations (a source a read of another depends on comes first: the
// fabric scan before the sweep that reads it): New makes a cache and a
// pin slot for each, Ages reports their ages, Workers hands out the
// background ones. A source is declared through register, so a declared
// source is a listed one: there is no separate line to forget.
var sources []source

// register lists src in sources and returns it: each source's
// declaration is its registration (var x = register(&Source[T]{...})).
func register[S source](src S) S {
	sources = append(sources, src)
	return src
}

// newCaches is one empty cache per listed source, and each source's pin
// slot in a Snapshot.
func newCaches() (map[source]cache, map[source]int) {
	caches := make(map[source]cache, len(sources))
	slots := make(map[source]int, len(sources))
	for _, src := range sources {
		if _, twice := caches[src]; !twice {
			caches[src] = src.newCache()
			slots[src] = len(slots)
		}
	}
	return caches, slots
}

// errUnregistered is the reading of a source not declared through
// register: an error, never a panic.
type errUnregistered struct{ name string }

func (e errUnregistered) Error() string {
	return "host source " + e.name + " is not registered (declare it with register)"
}

// cacheOf is the Host's cache of src. The map is made in New and never
// written after, so reading it needs no lock.
func cacheOf[T any](h *Host, src *Source[T]) (*slow[T], error) {
	c, ok := h.caches[src].(*slow[T])
	if !ok {
		return nil, errUnregistered{src.name}
	}
	return c, nil
}

// pinned is src's reading for s: read on s's first call, and the same
// value and error on every later call, however the Host's cache of src
// changes meanwhile (a refresh, a background round published).
func pinned[T any](s *Snapshot, src source, read func() (T, error)) (T, error) {
	i, ok := s.h.slots[src]
	if !ok {
		var zero T
		return zero, errUnregistered{src.Name()}
	}
	v, err := s.pins[i].get(func() (any, error) { return read() })
	t, _ := v.(T)
	return t, err
}

// get is src's reading for s, pinned: the cached one while fresh, else
// one read now (shared with the snapshots that ask meanwhile).
func get[T any](ctx context.Context, s *Snapshot, src *Source[T]) (T, error) {
	return pinned(s, src, func() (T, error) {
		v, _, err := getFresh(ctx, s, src)
		return v, err
	})
}

// getFresh is src's reading from the Host's cache, unpinned, and whether
// this call ran the read (Netdevs refreshes a cached reading's live
// attributes, and pins the result itself).
func getFresh[T any](ctx context.Context, s *Snapshot, src *Source[T]) (T, bool, error) {
	c, err := cacheOf(s.h, src)
	if err != nil {
		var zero T
		return zero, false, err
	}
	if src.freshness == SlowFollowingDevices {
		s.checkDevices()
	}
	return c.fetch(ctx, s.h.now(), s.h.slowT, func(ctx context.Context) (T, error) {
		return src.read(ctx, s)
	})
}

// published is src's latest result for s, pinned: the first call takes
// it (or runs s's on-demand round), and later calls return the same
// result however many rounds the source's loop publishes meanwhile.
func published[T any](ctx context.Context, s *Snapshot, src *Background[T]) T {
	v, _ := pinned(s, src, func() (T, error) { return latest(ctx, s, src), nil })
	return v
}

// Ages reports how old each slow source's cached value is (absent: never
// read) and how long ago each background source published its latest
// result (absent: none yet, or the source is off), for
// rdma_snapshot_age_seconds.
func (h *Host) Ages() map[string]time.Duration {
	now := h.now()
	out := make(map[string]time.Duration, len(h.caches))
	for src, c := range h.caches {
		if at := c.readAt(); !at.IsZero() {
			out[src.Name()] = now.Sub(at)
		}
	}
	return out
}
