// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/portwatch"
)

// portWatch is the port state sampler a server runs (nil in the CLI,
// which samples once and has no history to tell).
type portWatch struct {
	w atomic.Pointer[portwatch.Watcher]
}

// WatchPorts watches every port's state until ctx ends (internal/portwatch),
// keeping the down-up cycles of window; a server starts it once.
// Snapshot.PortHistory reads it, running a round first. Rounds also run at
// each link notification of the running kernel when the tree read is its
// own (Options.Kernel is set), and each interval when it is not 0. It
// waits up to firstRoundWait for the first round, so the first scrape has
// the ports, and no longer: a wedged sysfs read must not keep the server
// from starting. The error says the link notifications could not be
// subscribed to; the watcher runs without them.
func (h *Host) WatchPorts(ctx context.Context, interval, window time.Duration) (*portwatch.Watcher, error) {
	var events <-chan struct{}
	var err error
	if h.opts.Kernel != nil {
		events, err = portwatch.LinkEvents(ctx)
	}
	w := portwatch.New(portwatch.Options{
		Sys: h.fs.Sys, Keep: h.opts.Devices.Keep, Interval: interval, Events: events, Window: window, Now: h.now,
	})
	h.ports.w.Store(w)
	first := make(chan struct{})
	go w.Run(ctx, first)
	select {
	case <-first:
	case <-time.After(firstRoundWait):
	}
	return w, err
}

// firstRoundWait bounds how long a background reader's start waits for
// its first round (WatchPorts, WatchKernelLog and its first device
// index): the server listens within it whatever the host does.
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
