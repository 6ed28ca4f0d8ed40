// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import "time"

// workerIdle is how long a worker goroutine waits for the next function
// before it exits: longer than any scrape interval, so the workers of one
// scrape serve the next.
const workerIdle = 5 * time.Minute

// idle hands a function to a worker waiting for one.
var idle = make(chan func())

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
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		f = nil // what f holds is not kept while the worker waits
		t.Reset(workerIdle)
		select {
		case f = <-idle:
		case <-t.C:
			return
		}
	}
}
