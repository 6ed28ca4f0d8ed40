// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
)

// Background is one background host source: a tool run on an interval
// of its own (sminfo, iblinkinfo, the fabric counter sweep), too slow for
// a scrape to wait for. Its loop, a worker Host.Workers hands to the
// server's group (internal/host/worker), publishes each result; a snapshot
// reads the latest one and never waits for a run. Each
// is declared once, as a package variable in the file of its topic, and
// listed in sources beside the slow ones; its Snapshot accessor is one
// line through latest. Ages reports the time since its latest result was
// published.
type Background[T any] struct {
	// name is the source label of rdma_snapshot_age_seconds.
	name string
	// open makes the source's runner for h, or returns nil where h's
	// options leave the source off (its collector disabled). Its runs
	// log to and are reaped by env, and call published with each result
	// once latest returns it.
	open func(h *Host, env runEnv, published func()) *task[T]
	// onDemand: a snapshot that finds no loop running runs one round
	// itself when the latest result is older than the snapshot, so each
	// snapshot of a command without a loop (the CLI's diagnose) has a
	// result of its own. Without it such a snapshot reads nothing.
	onDemand bool
	// failing, when set, tells from the latest result that the source's
	// latest round failed (its worker's health).
	failing func(T) bool
}

// task is an opened background source.
type task[T any] struct {
	// run runs rounds on the source's interval until ctx ends.
	run func(ctx context.Context)
	// round runs one round now and returns when it is published (or
	// cut short by ctx).
	round func(ctx context.Context)
	// latest is the latest result; it never waits for a round.
	latest func() T
	// ready, when set, is closed once latest has a result another source
	// can use (the sweep waits for the first fabric).
	ready <-chan struct{}
}

// runEnv is how a background source's runs log and are reaped.
type runEnv struct {
	logger *slog.Logger
	reaper *subprocess.Reaper
}

// quiet is the runEnv of rounds no loop runs (on demand, Round): as the
// CLI ran them, unlogged and unreaped.
var quiet = runEnv{logger: slog.New(slog.DiscardHandler)}

// Name is the source's rdma_snapshot_age_seconds label.
func (src *Background[T]) Name() string { return src.name }

// Freshness is Published: its own loop publishes it.
func (src *Background[T]) Freshness() Freshness { return Published }

func (src *Background[T]) newCache() cache { return &feed[T]{src: src, first: make(chan struct{})} }

func (src *Background[T]) load(ctx context.Context, s *Snapshot) error {
	latest(ctx, s, src)
	return nil
}

// worker is src's loop for h, its feed, as a worker; nil where the
// options leave src off or it was already handed out. From here on a
// snapshot reads what the loop publishes and runs no round of its own.
func (src *Background[T]) worker(h *Host, env runEnv) worker.Worker {
	f := feedOf(h, src)
	if f.opened(h, env) == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.looping {
		return nil
	}
	f.looping = true
	return f
}

func (src *Background[T]) runRound(ctx context.Context, h *Host) {
	if t := feedOf(h, src).opened(h, quiet); t != nil {
		t.round(ctx)
	}
}

// background is a Background of any type, as Workers and Round find it
// in the table.
type background interface {
	source
	worker(h *Host, env runEnv) worker.Worker
	runRound(ctx context.Context, h *Host)
}

// feed is a Host's state of one background source: its task, once
// opened, and when it last published. Handed out by Workers, it is the
// source's worker: it runs the task's loop.
type feed[T any] struct {
	src      *Background[T]
	openOnce sync.Once

	mu sync.Mutex
	// task is the opened source; nil while off or not opened yet.
	task *task[T]
	// at is when the latest result was published; zero before one.
	at time.Time
	// looping: handed out as a worker; snapshots run no round of their
	// own from then on.
	looping bool
	// first is closed by the first publish.
	first     chan struct{}
	firstOnce sync.Once

	// roundMu runs on-demand rounds one at a time.
	roundMu sync.Mutex
}

func feedOf[T any](h *Host, src *Background[T]) *feed[T] {
	return h.caches[src].(*feed[T])
}

// opened is f's task, opened now with env if it was not yet; nil: the
// source is off.
func (f *feed[T]) opened(h *Host, env runEnv) *task[T] {
	f.openOnce.Do(func() {
		t := f.src.open(h, runEnv{logger: env.logger.With("source", f.src.name), reaper: env.reaper}, func() { f.publish(h.now()) })
		f.mu.Lock()
		f.task = t
		f.mu.Unlock()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.task
}

func (f *feed[T]) Name() string { return f.src.name }

// Run runs rounds on the source's interval until ctx ends; it returns
// once the running round has, and has cleaned up after itself (the sweep
// removes its private cache directory).
func (f *feed[T]) Run(ctx context.Context) {
	f.mu.Lock()
	t := f.task
	f.mu.Unlock()
	t.run(ctx)
}

func (f *feed[T]) Status() worker.Status {
	f.mu.Lock()
	at, t := f.at, f.task
	f.mu.Unlock()
	switch {
	case at.IsZero():
		return worker.Status{Problem: worker.FirstRoundPending}
	case f.src.failing != nil && f.src.failing(t.latest()):
		return worker.Status{Latest: at, Problem: worker.Failing}
	}
	return worker.Status{Latest: at}
}

func (f *feed[T]) publish(at time.Time) {
	f.mu.Lock()
	f.at = at
	f.mu.Unlock()
	f.firstOnce.Do(func() { close(f.first) })
}

func (f *feed[T]) readAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at
}

// invalidate does nothing: only the source's loop makes a new result.
func (f *feed[T]) invalidate() {}

// latest is src's latest result for s: nil (T's zero) where the source is
// off, or where no loop runs and src has no on-demand round.
func latest[T any](ctx context.Context, s *Snapshot, src *Background[T]) T {
	var none T
	f := feedOf(s.h, src)
	f.mu.Lock()
	looping, t := f.looping, f.task
	f.mu.Unlock()
	switch {
	case looping:
	case src.onDemand:
		if t = f.opened(s.h, quiet); t == nil {
			return none
		}
		f.roundMu.Lock()
		if at := f.readAt(); at.IsZero() || at.Before(s.Time) {
			t.round(ctx)
		}
		f.roundMu.Unlock()
	case t == nil:
		// Neither a loop nor Round has opened it.
		return none
	}
	return t.latest()
}

// Workers is the loop of every background source the options turn on
// (sminfo, the fabric scan, sweep and route read), in the table's order,
// as workers for the server's group, which runs and joins them; their
// runs log to logger and are reaped by reaper (nil: none). Call it once,
// before the first snapshot: a source a snapshot has already run on
// demand keeps that round's quiet logger. From the call on, a snapshot
// reads what the loops publish (none before their first round) and runs
// no round of its own; a second call lists none.
func (h *Host) Workers(logger *slog.Logger, reaper *subprocess.Reaper) []worker.Worker {
	env := runEnv{logger: logger, reaper: reaper}
	if env.logger == nil {
		env.logger = quiet.logger
	}
	var out []worker.Worker
	for _, src := range sources {
		if b, ok := src.(background); ok {
			if w := b.worker(h, env); w != nil {
				out = append(out, w)
			}
		}
	}
	return out
}

// Round runs one round of every background source the options turn on,
// now and in the table's order (a fabric scan before the sweep that reads
// it), and returns when each is published: for tests and tools that
// drive the sources without a loop. A source it opens (no Workers before)
// runs unlogged and unreaped, as an on-demand round does.
func (h *Host) Round(ctx context.Context) {
	for _, src := range sources {
		if b, ok := src.(background); ok {
			b.runRound(ctx, h)
		}
	}
}

// awaitFirst waits until src has published once, ctx ends or max passes;
// at once where no loop runs src.
func awaitFirst[T any](ctx context.Context, h *Host, src *Background[T], max time.Duration) {
	f := feedOf(h, src)
	f.mu.Lock()
	looping := f.looping
	f.mu.Unlock()
	if !looping {
		return
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-f.first:
	case <-ctx.Done():
	case <-t.C:
	}
}

// hooks are the functions a background source calls with each result
// before it is published (Host.OnFabricSweep).
type hooks[T any] struct {
	mu  sync.Mutex
	fns []func(T)
}

func (k *hooks[T]) add(fn func(T)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fns = append(k.fns, fn)
}

func (k *hooks[T]) call(v T) {
	k.mu.Lock()
	fns := k.fns
	k.mu.Unlock()
	for _, fn := range fns {
		fn(v)
	}
}
