// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"time"
)

// Source is one slow host source: state read at most every SlowRefresh
// and shared by every snapshot (and the diagnose sampler) through the
// Host's cache of it. Each is declared once, as a package variable in the
// file of its topic, and listed in sources; its Snapshot accessor is one
// line through get. Nothing else names it: New makes its cache, Ages
// reports its age, get and checkDevices apply its Freshness.
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
	// (Host.Start) publishes each result, and a snapshot reads the
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

// sources is every slow and background source: New makes a cache for
// each, Ages reports their ages, Start starts the background ones. A new
// source is its declaration, in its topic's file, and its line here.
var sources = []source{
	pciSource,       // devices.go
	placementSource, // devices.go
	netdevSource,    // netdevs.go
	tuningSource,    // system.go
	openSMSource,    // system.go
	topologySource,  // system.go
	hostnameSource,  // system.go
	gpuSource,       // gpu.go
	hwmonSource,     // hwmon.go
	devlinkSource,   // devlink.go
	jobsSource,      // jobs.go
	podsSource,      // pods.go

	smInfoSource,       // sm.go
	fabricScanSource,   // fabric.go: before the sweep, which reads it
	fabricSweepSource,  // fabric.go
	fabricRoutesSource, // fabric_routes.go
}

// newCaches is one empty cache per listed source.
func newCaches() map[source]cache {
	out := make(map[source]cache, len(sources))
	for _, src := range sources {
		out[src] = src.newCache()
	}
	return out
}

// cacheOf is the Host's cache of src. The map is made in New and never
// written after, so reading it needs no lock.
func cacheOf[T any](h *Host, src *Source[T]) *slow[T] {
	return h.caches[src].(*slow[T])
}

// get is src's reading for s: the cached one while fresh, else one read
// now (shared with the snapshots that ask meanwhile).
func get[T any](ctx context.Context, s *Snapshot, src *Source[T]) (T, error) {
	v, _, err := getFresh(ctx, s, src)
	return v, err
}

// getFresh is get, and whether this call ran the read.
func getFresh[T any](ctx context.Context, s *Snapshot, src *Source[T]) (T, bool, error) {
	if src.freshness == SlowFollowingDevices {
		s.checkDevices()
	}
	return cacheOf(s.h, src).fetch(ctx, s.h.now(), s.h.slowT, func(ctx context.Context) (T, error) {
		return src.read(ctx, s)
	})
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
