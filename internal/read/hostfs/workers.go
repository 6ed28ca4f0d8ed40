// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"sync/atomic"
	"time"
)

// workerIdle is how long a worker goroutine waits for the next function
// before it exits: longer than any scrape interval, so the workers of one
// scrape serve the next.
const workerIdle = 5 * time.Minute

// MaxIdleWorkers bounds the workers that wait: enough for a scrape's
// collectors and devices, so that one scrape's workers serve the next,
// and no more, so that a burst of parallel scrapes does not keep its
// goroutines' grown stacks for workerIdle.
const MaxIdleWorkers = 64

// idle hands a function to a worker waiting for one; waiting counts the
// workers waiting on it.
var (
	idle    = make(chan func())
	waiting atomic.Int32
)

// Go runs f on a goroutine of its own, as a go statement does, but on a
// worker that has run such a function before when one is waiting. A scrape
// reads the host on one goroutine per collector and one per device, so that
// a wedged read costs its own series and not the scrape; a new goroutine
// starts with a small stack and grows it again on every scrape. A worker
// wedged in a read is not waiting, so the next Go starts another: nothing
// waits for it.
func Go(f func()) {
	select {
	case idle <- f:
	default:
		go work(f)
	}
}

func work(f func()) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		f()
		f = nil // what f holds is not kept while the worker waits
		if waiting.Add(1) > MaxIdleWorkers {
			waiting.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(workerIdle)
		} else {
			t.Reset(workerIdle)
		}
		select {
		case f = <-idle:
			waiting.Add(-1)
		case <-t.C:
			waiting.Add(-1)
			return
		}
	}
}
