// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStuckAfter is how long a read may stay in flight before further
// reads of the same path are refused. A sysfs attribute answers in
// microseconds and /proc/interrupts on a large host in milliseconds; a
// read still running after seconds is stuck in a driver or firmware.
const DefaultStuckAfter = 2 * time.Second

// ErrStuck is the error (errors.Is) of a read refused because an earlier
// read of the same path has been in flight for too long. It is returned at
// once, without touching the file: a read that never returns holds one
// thread, and retrying it on every scrape would hold one more each time.
// The path is read again once the stuck read returns.
var ErrStuck = errors.New("read stuck")

// StuckError is a read refused with ErrStuck.
type StuckError struct {
	Op   string
	Path string
	// Since is when the read in flight started; For is how long it had
	// been in flight when this read was refused.
	Since time.Time
	For   time.Duration
}

// Error names the start of the stuck read rather than its age, so the
// message stays the same while the same read is stuck and a logger that
// logs each distinct message once logs it once.
func (e *StuckError) Error() string {
	return e.Op + " " + e.Path + ": " + ErrStuck.Error() + ": a read started at " +
		e.Since.UTC().Format("2006-01-02T15:04:05.000Z") + " has not returned; not retried until it does"
}

// Unwrap makes errors.Is(err, ErrStuck) true.
func (e *StuckError) Unwrap() error { return ErrStuck }

// ReadStats counts an FS's reads refused because stuck and its reads in
// flight now.
type ReadStats struct {
	// Refused is the number of reads refused with ErrStuck since the FS
	// was made (a counter).
	Refused uint64
	// Stuck is the number of paths whose read has been in flight for at
	// least the FS's stuck-after duration now (a gauge).
	Stuck int
	// InFlight is the number of reads in flight now, stuck or not.
	InFlight int
}

// Guarded is an FS that refuses reads of paths whose earlier read is
// stuck. Dir's FS is one; a wrapper may pass it on.
type Guarded interface {
	ReadStats() ReadStats
	SetStuckAfter(d time.Duration)
}

// Stats returns f's read counts, and false when f is not Guarded (a test
// double).
func Stats(f FS) (ReadStats, bool) {
	g, ok := f.(Guarded)
	if !ok {
		return ReadStats{}, false
	}
	return g.ReadStats(), true
}

// SetStuckAfter sets how long a read of f may be in flight before reads of
// the same path are refused (DefaultStuckAfter unless set; 0 refuses a
// read of any path with a read in flight). It reports false when f is not
// Guarded.
func SetStuckAfter(f FS, d time.Duration) bool {
	g, ok := f.(Guarded)
	if ok {
		g.SetStuckAfter(d)
	}
	return ok
}

// ReadStats sums the read counts of the host's file systems that are
// Guarded (Paths.Open makes all three so): what a collector exports as
// the host's stuck reads.
func (h Host) ReadStats() ReadStats {
	var sum ReadStats
	for _, f := range []FS{h.Root, h.Sys, h.Proc} {
		if s, ok := Stats(f); ok {
			sum.Refused += s.Refused
			sum.Stuck += s.Stuck
			sum.InFlight += s.InFlight
		}
	}
	return sum
}

// ReadStats implements Guarded.
func (d *dirFS) ReadStats() ReadStats { return d.reads.stats(mono()) }

// SetStuckAfter implements Guarded.
func (d *dirFS) SetStuckAfter(after time.Duration) { d.reads.setStuckAfter(after) }

// registry is the set of paths with a read in flight, and the Attrs whose
// reads guard themselves. A read by path (ReadFile, ReadDir, ReadLink,
// ReadTail) costs a lock, a map insert and a delete; an Attr read, a
// scrape's hundreds of counters, costs two atomic adds on the Attr and no
// shared lock, since a lock and a map per read would be a visible share
// of a scrape (docs/measurements.md#hostfs), and the Attrs are looked at
// only when the stats are asked.
type registry struct {
	mu         sync.Mutex
	stuckAfter atomic.Int64 // a time.Duration
	paths      map[string]inflight
	refused    atomic.Uint64
	// attrs are the Attrs of this FS that are not closed: ReadStats
	// counts their reads in flight and stuck.
	attrs map[*Attr]struct{}
}

// epoch is the origin of the registry's clock. Times are kept as the
// monotonic time since it: time.Since reads one clock where time.Now reads
// two, and every read takes one.
var epoch = time.Now()

func mono() time.Duration { return time.Since(epoch) }

// inflight is the reads of one path in flight: how many, and when the
// oldest started (or, after the oldest returned, when it did: the others
// are then counted as stuck late rather than early).
type inflight struct {
	start time.Duration
	n     int
}

func newRegistry() *registry {
	r := &registry{paths: map[string]inflight{}, attrs: map[*Attr]struct{}{}}
	r.stuckAfter.Store(int64(DefaultStuckAfter))
	return r
}

// begin registers a read of p, or refuses it when a read of p has been in
// flight for stuckAfter or more. The start it returns goes to end.
func (r *registry) begin(op, p string) (time.Duration, error) {
	now := mono()
	r.mu.Lock()
	e, ok := r.paths[p]
	if ok && now-e.start >= r.after() {
		r.mu.Unlock()
		r.refused.Add(1)
		return 0, &StuckError{Op: op, Path: p, Since: epoch.Add(e.start), For: now - e.start}
	}
	if !ok {
		e.start = now
	}
	e.n++
	r.paths[p] = e
	r.mu.Unlock()
	return now, nil
}

// end unregisters a read of p that began at start.
func (r *registry) end(p string, start time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.paths[p]
	e.n--
	if e.n <= 0 {
		delete(r.paths, p)
		return
	}
	if e.start == start {
		// The oldest returned; when the others started is not kept.
		e.start = mono()
	}
	r.paths[p] = e
}

func (r *registry) after() time.Duration { return time.Duration(r.stuckAfter.Load()) }

// addAttr and removeAttr keep the set of open Attrs.
func (r *registry) addAttr(a *Attr) {
	r.mu.Lock()
	r.attrs[a] = struct{}{}
	r.mu.Unlock()
}

func (r *registry) removeAttr(a *Attr) {
	r.mu.Lock()
	delete(r.attrs, a)
	r.mu.Unlock()
}

func (r *registry) stats(now time.Duration) ReadStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	after := r.after()
	s := ReadStats{Refused: r.refused.Load()}
	for _, e := range r.paths {
		s.InFlight += e.n
		if now-e.start >= after {
			s.Stuck++
		}
	}
	for a := range r.attrs {
		n, start, busy := a.inFlight()
		s.InFlight += n
		if busy && now-start >= after {
			s.Stuck++
		}
	}
	return s
}

func (r *registry) setStuckAfter(d time.Duration) { r.stuckAfter.Store(int64(d)) }
