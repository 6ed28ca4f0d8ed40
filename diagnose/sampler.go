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

// FollowSweeps makes every fabric counter sweep the host publishes enter
// the history as it is published (Host.OnFabricSweep, History.AddSweep).
// A sample reads only the latest sweep, so sweeps that come faster than
// the samples (the first sweep before the first sample, a 30 s sweep
// under a 1 m sample) would otherwise never be judged, nor the rises
// between them. Call it before the host starts, so no sweep is missed.
func (s *Sampler) FollowSweeps() {
	s.Reader.Host.OnFabricSweep(s.History.AddSweep)
}

// Latest returns the newest report, nil before the first sample.
func (s *Sampler) Latest() *Report { return s.latest.Load() }

// Run samples every Interval until ctx ends. A watchdog logs once when
// the latest report is older than StaleAfter (a sample that does not
// end), and once when reports are fresh again; Run returns once it has
// ended too.
func (s *Sampler) Run(ctx context.Context) {
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watch(ctx)
	}()
	defer func() { <-watched }()
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

// StaleAfter is how old the latest report may get before the watchdog
// warns: three intervals and the sample timeout.
func (s *Sampler) StaleAfter() time.Duration {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = s.Interval
	}
	return 3*s.Interval + timeout
}

// watch checks the latest report's age every interval.
func (s *Sampler) watch(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	stale := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r := s.Latest()
			if r == nil || s.Logger == nil {
				continue
			}
			age := now.Sub(r.Time)
			switch {
			case !stale && age > s.StaleAfter():
				stale = true
				s.Logger.Warn("diagnose report is stale: a sample has not finished", "age", age.Truncate(time.Second),
					"hint", "a host read may be stuck (rdma_host_reads_stuck); /diagnose serves the last report until a sample finishes")
			case stale && age <= s.StaleAfter():
				stale = false
				s.Logger.Info("diagnose reports are fresh again", "age", age.Truncate(time.Second))
			}
		}
	}
}
