// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package worker is the one lifecycle of the server's background work:
// every loop (sminfo, the fabric scan, sweep and route read, the port
// sampler, the kernel log reader, the diagnose sampler, the probe
// scheduler and each responder listener) is a Worker, the server lists
// them in one place and runs them in one Group, which joins them all at
// shutdown and reports each one's age and health for the metrics.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// Worker is one background loop.
type Worker interface {
	// Name is its rdma_snapshot_age_seconds source and health label:
	// fixed, short, one per worker.
	Name() string
	// Run runs the loop until ctx ends and returns once its cleanup is
	// done (its programs reaped, its files removed).
	Run(ctx context.Context)
	// Status is its latest value's time and its health; it never waits
	// for a round.
	Status() Status
}

// Status is a worker's state as the metrics show it.
type Status struct {
	// Latest is when its latest value was published; zero: none yet, or
	// the worker publishes no value (a responder), and no age is shown.
	Latest time.Time
	// Problem is "" while healthy, else one of the reasons below.
	Problem string
}

// The reasons a worker is not healthy: a fixed set, so the health
// series' labels stay bounded.
const (
	// FirstRoundPending: its first value is not published yet.
	FirstRoundPending = "first_round_pending"
	// Failing: its latest round failed or its value is stale.
	Failing = "failing"
	// Stopped: its loop returned.
	Stopped = "stopped"
)

// New is a Worker made of functions, for a loop whose type has no methods
// of its own to spare (a responder's listener). status nil: never
// unhealthy, no age.
func New(name string, run func(ctx context.Context), status func() Status) Worker {
	return funcs{name, run, status}
}

type funcs struct {
	name   string
	run    func(ctx context.Context)
	status func() Status
}

func (f funcs) Name() string            { return f.name }
func (f funcs) Run(ctx context.Context) { f.run(ctx) }

func (f funcs) Status() Status {
	if f.status == nil {
		return Status{}
	}
	return f.status()
}

// Group runs the workers it is made with, each in its own goroutine, and
// joins them.
type Group struct {
	workers []Worker
	logger  *slog.Logger
	// stopped[i] is set once workers[i].Run returned.
	stopped []atomic.Bool
	g       errgroup.Group
	started atomic.Bool
	done    chan struct{}
}

// NewGroup is a group of workers, which must have distinct names (they
// label the series). logger (nil: none) gets one line per worker that
// stops and one when all have.
func NewGroup(logger *slog.Logger, workers ...Worker) (*Group, error) {
	seen := map[string]bool{}
	for _, w := range workers {
		if seen[w.Name()] {
			return nil, fmt.Errorf("background worker %q is registered twice", w.Name())
		}
		seen[w.Name()] = true
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Group{workers: workers, logger: logger, stopped: make([]atomic.Bool, len(workers)), done: make(chan struct{})}, nil
}

// Start runs every worker until ctx ends; it returns at once. A second
// Start does nothing.
func (g *Group) Start(ctx context.Context) {
	if g.started.Swap(true) {
		return
	}
	for i, w := range g.workers {
		g.g.Go(func() error {
			w.Run(ctx)
			g.stopped[i].Store(true)
			if ctx.Err() == nil {
				// A loop that ends on its own serves stale values from
				// now on: its health says so, and so does this line.
				g.logger.Warn("background worker stopped before shutdown", "worker", w.Name())
			} else {
				g.logger.Info("background worker stopped", "worker", w.Name())
			}
			return nil
		})
	}
	go func() {
		_ = g.g.Wait()
		close(g.done)
	}()
}

// Wait waits until every worker's Run has returned (their ctx ended) or
// max passes, and reports whether they all returned; when not, it warns
// with the names of those still running. Without Start, it returns true
// at once.
func (g *Group) Wait(max time.Duration) bool {
	if !g.started.Load() {
		return true
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-g.done:
		g.logger.Info("all background workers stopped", "workers", len(g.workers))
		return true
	case <-t.C:
		g.logger.Warn("background workers did not stop in time; exiting anyway", "waited", max, "running", g.Running())
		return false
	}
}

// Running names the workers whose Run has not returned: those a Wait
// that gave up left behind.
func (g *Group) Running() []string {
	var out []string
	for i, w := range g.workers {
		if !g.stopped[i].Load() {
			out = append(out, w.Name())
		}
	}
	return out
}

// Report is one worker's Status under its name.
type Report struct {
	Name string
	Status
}

// Reports is every worker's status, in registration order; a worker
// whose Run returned is Stopped whatever it says.
func (g *Group) Reports() []Report {
	if g == nil {
		return nil
	}
	out := make([]Report, len(g.workers))
	for i, w := range g.workers {
		out[i] = Report{Name: w.Name(), Status: w.Status()}
		if g.stopped[i].Load() {
			out[i].Problem = Stopped
		}
	}
	return out
}
