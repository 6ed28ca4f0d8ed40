// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import "context"

// Starter is a collector with background work (a subprocess run on its own
// interval, whose latest result a scrape only reads). The server starts it
// once with its own context; a collector that is never started reports
// that it has no result yet.
type Starter interface {
	Start(ctx context.Context)
}

// Start starts the background work of every enabled collector that has
// some. It returns at once; the work stops when ctx ends.
func (a *Aggregator) Start(ctx context.Context) {
	for _, name := range a.names {
		if s, ok := a.collectors[name].(Starter); ok {
			s.Start(ctx)
		}
	}
}

// Lookup returns an enabled collector by name, so other parts of the
// server (diagnose) can read a collector's latest background result
// instead of running the same subprocess again.
func (a *Aggregator) Lookup(name string) (Collector, bool) {
	c, ok := a.collectors[name]
	return c, ok
}
