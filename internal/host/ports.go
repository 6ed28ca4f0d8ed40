// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/internal/read/portwatch"
)

// portWatch is the port state sampler a server runs (nil in the CLI,
// which samples once and has no history to tell).
type portWatch struct {
	w atomic.Pointer[portwatch.Watcher]
	// first is closed by the sampler's first round (AwaitWatchers); set
	// with w, before the server's workers start.
	first chan struct{}
}

// PortWorker is the port state sampler (internal/read/portwatch) as a worker,
// keeping the down-up cycles of window; a server runs one.
// Snapshot.PortHistory reads it, running a round first. Rounds also run at
// each link notification of the running kernel when the tree read is its
// own (Options.Kernel is set; the subscription ends with ctx), and each
// interval when it is not 0. The error says the link notifications could
// not be subscribed to; the worker runs without them.
func (h *Host) PortWorker(ctx context.Context, interval, window time.Duration) (worker.Worker, error) {
	var events <-chan struct{}
	var err error
	if h.opts.Kernel != nil {
		events, err = portwatch.LinkEvents(ctx)
	}
	w := portwatch.New(portwatch.Options{
		Sys: h.fs.Sys, Keep: h.opts.Devices.Keep, Interval: interval, Events: events, Window: window, Now: h.now,
	})
	h.ports.w.Store(w)
	h.ports.first = make(chan struct{})
	return &watchWorker{name: "portwatch", first: h.ports.first, run: w.Run}, err
}

// watchWorker is the worker of a watcher that a scrape reads in place
// (the port sampler, the kernel log reader): it has no published value to
// age, and is healthy once its first round is done unless failing says
// otherwise.
type watchWorker struct {
	name  string
	first chan struct{}
	run   func(ctx context.Context, first chan<- struct{})
	// failing, when set, reports that the watcher cannot read what it
	// watches (the kernel log absent or refused).
	failing func() bool
}

func (w *watchWorker) Name() string            { return w.name }
func (w *watchWorker) Run(ctx context.Context) { w.run(ctx, w.first) }

func (w *watchWorker) Status() worker.Status {
	select {
	case <-w.first:
	default:
		return worker.Status{Problem: worker.FirstRoundPending}
	}
	if w.failing != nil && w.failing() {
		return worker.Status{Problem: worker.Failing}
	}
	return worker.Status{}
}

// AwaitWatchers waits for the first round of the port sampler and the
// kernel log reader (those the server runs) for up to firstRoundWait in
// all, so the first scrape has the ports and the ring buffer's history,
// and no longer: a wedged sysfs read must not keep the server from
// listening.
func (h *Host) AwaitWatchers() {
	t := time.NewTimer(firstRoundWait)
	defer t.Stop()
	for _, first := range []chan struct{}{h.ports.first, h.kernelLog.first} {
		if first == nil {
			continue
		}
		select {
		case <-first:
		case <-t.C:
			return
		}
	}
}

// firstRoundWait bounds how long a background reader's start waits for
// its first round (AwaitWatchers, and the kernel log reader's first
// device index): the server listens within it whatever the host does.
const firstRoundWait = time.Second

// readPortHistory is what the port sampler saw of every port, a round run
// now included, and false when none runs (the CLI): flaps need a history
// a single read cannot give.
func (s *Snapshot) readPortHistory() ([]portwatch.History, bool) {
	w := s.h.ports.w.Load()
	if w == nil {
		return nil, false
	}
	w.Refresh()
	return w.Ports(), true
}

// PortWatcher is the running port sampler, nil when none runs.
func (h *Host) PortWatcher() *portwatch.Watcher { return h.ports.w.Load() }
