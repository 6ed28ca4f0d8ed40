// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
)

// ScrapeGuard keeps probes from starting right after a scrape began. The
// metrics collector marks every scrape; the scheduler waits until none has
// begun for Quiet before it starts a probe. A probe that is already
// running is never interrupted: scrapes only read the store.
type ScrapeGuard struct {
	Quiet time.Duration
	mu    sync.Mutex
	last  time.Time
	now   func() time.Time
}

// Mark records that a scrape began now.
func (g *ScrapeGuard) Mark() {
	g.mu.Lock()
	g.last = g.clock()
	g.mu.Unlock()
}

func (g *ScrapeGuard) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

// Wait returns once no scrape has begun for Quiet, or when ctx ends.
func (g *ScrapeGuard) Wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		left := g.Quiet - g.clock().Sub(g.last)
		never := g.last.IsZero()
		g.mu.Unlock()
		if left <= 0 || never {
			return ctx.Err()
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Scheduler runs the rotation: one probe at a time, Interval ± Jitter
// apart, each recorded in Store.
type Scheduler struct {
	Prober   *Prober
	Store    *Store
	Pairs    []Pair
	Interval time.Duration
	Jitter   float64
	Guard    *ScrapeGuard
	Logger   *slog.Logger
	// Rand draws the jitter; nil uses math/rand/v2's global source.
	Rand *rand.Rand
	// sleep is the wait between probes (tests shorten it).
	sleep func(ctx context.Context, d time.Duration) error
}

// next is the wait before the next probe: Interval scaled by a uniform
// factor in [1-Jitter, 1+Jitter].
func (s *Scheduler) next() time.Duration {
	f := 1.0
	if s.Jitter > 0 {
		r := rand.Float64()
		if s.Rand != nil {
			r = s.Rand.Float64()
		}
		f = 1 - s.Jitter + 2*s.Jitter*r
	}
	return time.Duration(float64(s.Interval) * f)
}

// waitGuard waits until no scrape has begun for the guard's Quiet. When
// scrapes come so often that a probe is held back past its patience (one
// Interval, and at least two guard periods), that is said once, as a
// warning, and again when the probe finally runs: otherwise scrapes more
// frequent than probe.scrape_guard starve every probe without a word.
func (s *Scheduler) waitGuard(ctx context.Context, logger *slog.Logger, pair Pair) error {
	if s.Guard == nil {
		return ctx.Err()
	}
	patience := max(s.Interval, 2*s.Guard.Quiet)
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, patience)
	err := s.Guard.Wait(wctx)
	cancel()
	if err == nil || ctx.Err() != nil {
		return ctx.Err()
	}
	logger.Warn("probe postponed: a scrape began less than probe.scrape_guard ago all the time; scrapes more frequent than the guard starve the probes",
		"waited", patience, "scrape_guard", s.Guard.Quiet, "peer", pair.Target.Name, "test", pair.Test)
	if err := s.Guard.Wait(ctx); err != nil {
		return err
	}
	logger.Info("probe runs after being postponed by scrapes", "waited", time.Since(began).Round(time.Millisecond),
		"peer", pair.Target.Name, "test", pair.Test)
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run probes until ctx ends. The first probe waits a random part of one
// jittered interval, so hosts restarted together do not probe in step.
func (s *Scheduler) Run(ctx context.Context) {
	if len(s.Pairs) == 0 {
		return
	}
	sleep := s.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	logger := s.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	first := time.Duration(float64(s.next()) * s.Jitter)
	if err := sleep(ctx, first); err != nil {
		return
	}
	for i := 0; ; i = (i + 1) % len(s.Pairs) {
		pair := s.Pairs[i]
		if err := s.waitGuard(ctx, logger, pair); err != nil {
			return
		}
		res := s.Prober.Run(ctx, pair.Target, pair.Test)
		if ctx.Err() != nil {
			// Shutting down: a run cut short says nothing about the
			// link.
			return
		}
		s.Store.Record(res)
		logger.Debug("probe recorded", "peer", res.Peer, "test", res.Test, "success", res.Success, "duration", res.Duration)
		if err := sleep(ctx, s.next()); err != nil {
			return
		}
	}
}

// Name is the scheduler's worker name (internal/host/worker).
func (s *Scheduler) Name() string { return "probe_scheduler" }

// Status is when the latest recorded probe ended: first_round_pending
// before one. A failed probe is the link's news, not the scheduler's: it
// stays healthy.
func (s *Scheduler) Status() worker.Status {
	var latest time.Time
	for _, e := range s.Store.Latest() {
		if e.Last != nil && e.Last.End().After(latest) {
			latest = e.Last.End()
		}
	}
	if latest.IsZero() {
		return worker.Status{Problem: worker.FirstRoundPending}
	}
	return worker.Status{Latest: latest}
}
