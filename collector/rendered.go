// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// rendered keeps the samples a collector made from one value of a slow
// host source (PCI, IRQ placement, tuning, GPUs: read again every
// diagnose interval, shared by every snapshot until then). Samples are
// immutable, so the next scrape that gets the same value appends them
// again instead of making them anew. A new value, or a read that did not
// complete (an error: a stale value served past a wedged read), renders
// afresh.
type rendered[K comparable] struct {
	mu  sync.Mutex
	key K
	ms  []prometheus.Metric
	err error
	set bool
}

// append appends the samples of key to out: the kept ones, or render's,
// kept when readErr is nil. It returns the error render returned.
func (r *rendered[K]) append(out *sink, key K, readErr error, render func(*sink) error) error {
	if readErr == nil {
		r.mu.Lock()
		if r.set && r.key == key {
			ms, err := r.ms, r.err
			r.mu.Unlock()
			out.addAll(ms)
			return err
		}
		r.mu.Unlock()
	}
	var s sink
	err := render(&s)
	if readErr == nil {
		r.mu.Lock()
		r.key, r.ms, r.err, r.set = key, s.all(), err, true
		r.mu.Unlock()
	}
	out.addAll(s.all())
	return err
}
