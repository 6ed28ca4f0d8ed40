// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Sampler reads the host in the background, keeps the counter history and
// evaluates the checks after every sample. /diagnose and
// rdma_diagnose_status serve its latest report, so a request never reads
// the host and never waits for a check.
type Sampler struct {
	Reader   *Reader
	Eval     *Evaluator
	History  *History
	Interval time.Duration
	// Timeout bounds one sample; 0 is the interval.
	Timeout time.Duration
	Logger  *slog.Logger

	latest atomic.Pointer[Report]
}

// Sample reads the host once, records the counters and evaluates.
func (s *Sampler) Sample(ctx context.Context) *Report {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = s.Interval
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	snap := s.Reader.Read(ctx)
	s.History.Add(snap)
	r := s.Eval.Evaluate(snap, s.History)
	s.latest.Store(r)
	if s.Logger != nil {
		s.Logger.Debug("diagnose sample", "status", r.Status, "fail", r.Summary.Fail, "warn", r.Summary.Warn,
			"samples", r.Samples, "took", time.Since(snap.Time))
	}
	return r
}

// Latest returns the newest report, nil before the first sample.
func (s *Sampler) Latest() *Report { return s.latest.Load() }

// Run samples every Interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sample(ctx)
		}
	}
}
