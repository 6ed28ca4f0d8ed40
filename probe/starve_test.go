// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

// levels lists the level of the records whose message contains substr.
func levels(h *testenv.Records, substr string) []string {
	var out []string
	for _, r := range h.Matching(substr) {
		out = append(out, r.Level.String())
	}
	return out
}

// TestSchedulerSaysWhenScrapesStarveProbes: while scrapes keep beginning
// within the guard's quiet time, the due probe waits; past its patience
// that is one warning, however long it lasts, and once the scrapes pause
// the probe runs and that is said too.
func TestSchedulerSaysWhenScrapesStarveProbes(t *testing.T) {
	cfg := &config.Probe{Loopback: []config.ProbeLoopback{{Device: "mlx5_0", Tests: []string{"ib_send_lat"}}}}
	targets, _ := Targets(cfg)
	store := NewStore()
	logs := &testenv.Records{}
	guard := &ScrapeGuard{Quiet: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Scheduler{
		Prober: newProber(t, perftesttest.Install(t, replay()), cfg),
		Store:  store,
		Pairs:  Rotation(targets),
		Guard:  guard,
		Logger: slog.New(logs),
		sleep:  func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}
	// Scrapes far more often than the guard allows, until the warning.
	guard.Mark()
	stopScrapes := make(chan struct{})
	scrapesDone := make(chan struct{})
	go func() {
		defer close(scrapesDone)
		for {
			select {
			case <-stopScrapes:
				return
			case <-time.After(5 * time.Millisecond):
				guard.Mark()
			}
		}
	}()
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	waitLog(t, logs, "probe postponed")
	close(stopScrapes)
	<-scrapesDone
	waitLog(t, logs, "probe runs after being postponed")
	for deadline := time.Now().Add(30 * time.Second); len(store.Latest()) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if got := levels(logs, "probe postponed"); len(got) != 1 || got[0] != "WARN" {
		t.Errorf("starvation logged as %v, want one WARN", got)
	}
	if got := levels(logs, "probe runs after being postponed"); len(got) != 1 || got[0] != "INFO" {
		t.Errorf("the end of the starvation logged as %v, want one INFO", got)
	}
	if es := store.Latest(); len(es) != 1 || !es[0].Last.Success {
		t.Errorf("no probe recorded after the scrapes paused: %+v", es)
	}
}

// waitLog waits for a record whose message contains substr (generous
// failure guard, not a timing assertion).
func waitLog(t *testing.T, logs *testenv.Records, substr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if len(levels(logs, substr)) > 0 {
			return
		}
	}
	t.Fatalf("no log line %q", substr)
}
