// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// TestSamplerWatchdog: a report older than StaleAfter is logged once as
// stale, and once more when a fresh one arrives. It runs in a synctest
// bubble: the ticker follows the fake clock, and synctest.Wait returns once
// the watchdog has handled every tick due, so no sleep races its goroutine.
func TestSamplerWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testenv.Records{}
		s := &Sampler{Interval: time.Minute, Logger: slog.New(logs)}
		s.latest.Store(&Report{Time: time.Now().Add(-time.Hour)})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.watch(ctx)
		count := func(msg string) int { return len(logs.Matching(msg)) }

		time.Sleep(s.Interval)
		synctest.Wait()
		if n := count("diagnose report is stale"); n != 1 {
			t.Fatalf("%d stale lines after the first check of an hour-old report, want 1", n)
		}
		time.Sleep(5 * s.Interval) // five more checks: still one line
		synctest.Wait()
		if n := count("diagnose report is stale"); n != 1 {
			t.Errorf("%d stale lines after six checks, want 1", n)
		}
		if n := count("diagnose reports are fresh again"); n != 0 {
			t.Errorf("%d fresh lines while still stale, want 0", n)
		}
		s.latest.Store(&Report{Time: time.Now()})
		time.Sleep(s.Interval)
		synctest.Wait()
		if n := count("diagnose reports are fresh again"); n != 1 {
			t.Errorf("%d fresh lines after a fresh report, want 1", n)
		}
	})
}
