// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sweepBounded is sweepWith on s, failing the test when the sweep has not
// returned in 60 s: the bound of a wait for a sweep that must not block at
// all (a FIFO opened for reading blocks for ever), not a timed assertion.
func sweepBounded(t *testing.T, s *Sweeper) *Sweep {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { s.SweepOnce(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the sweep is wedged: no return in 60 s")
	}
	return s.Status().Last
}

// discoverer is an ibnetdiscover that does action with the cache path it
// is handed (--cache) instead of writing a cache there.
func discoverer(t *testing.T, action string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ibnetdiscover")
	body := "#!/bin/sh\nprev=; for a; do [ \"$prev\" = --cache ] && " + action + " \"$a\"; prev=$a; done\n"
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func iqeRuns(t *testing.T, dir string) int {
	n := 0
	for _, r := range runs(t, dir) {
		if strings.HasPrefix(r, "ibqueryerrors ") {
			n++
		}
	}
	return n
}

// TestSweepRefusesPlantedDiscoveredCache: a FIFO where ibnetdiscover
// writes its cache would wedge a plain open for ever (it blocks for a
// writer, past every timeout), and a symlink there would be followed.
// Both are refused at once: every port unknown, start_failed counted.
func TestSweepRefusesPlantedDiscoveredCache(t *testing.T) {
	for _, c := range []struct{ name, action string }{
		{"FIFO", "mkfifo"},
		{"symlink", "ln -s " + iqeFixture("ibsim16.cache")},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := fakeTools(t, "", "")
			cfg.IBNetDiscover = discoverer(t, c.action)
			topo := ibsimTopology(t)
			cfg.Topology = func() *Fabric { return topo }
			sw := sweepBounded(t, NewSweeper(cfg))
			if sw == nil {
				t.Fatal("no sweep published")
			}
			if sw.OK() || sw.Unknown != 48 || sw.Failures[ReasonStart] != 1 {
				t.Errorf("unknown %d failures %v, want 48 ports unknown and one start_failed", sw.Unknown, sw.Failures)
			}
		})
	}
}

// TestSweepRefusesPlantedInputs: a FIFO or a symlink planted at
// fabric.cache or thresholds after a good sweep is refused before any
// tool runs (handed to ibqueryerrors, it would block each run until its
// timeout); the sweep after that discovers and writes them afresh and
// reads every port.
func TestSweepRefusesPlantedInputs(t *testing.T) {
	for _, name := range []string{"fabric.cache", "thresholds"} {
		for _, kind := range []string{"FIFO", "symlink"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				cfg, dir := fakeTools(t, "", "")
				cfg.Timeout = 5 * time.Second
				topo := ibsimTopology(t)
				cfg.Topology = func() *Fabric { return topo }
				s := NewSweeper(cfg)
				if sw := sweepBounded(t, s); !sw.OK() {
					t.Fatalf("first sweep not OK: %v", sw.Failures)
				}
				p := filepath.Join(cfg.Dir, name)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				var err error
				if kind == "FIFO" {
					err = syscall.Mkfifo(p, 0o600)
				} else {
					err = os.Symlink(iqeFixture("ibsim16.cache"), p)
				}
				if err != nil {
					t.Fatal(err)
				}
				before := iqeRuns(t, dir)
				sw := sweepBounded(t, s)
				if sw.OK() || sw.Unknown != 48 || sw.Failures[ReasonStart] != 1 || len(sw.Failures) != 1 {
					t.Errorf("planted %s: unknown %d failures %v, want 48 unknown and one start_failed", kind, sw.Unknown, sw.Failures)
				}
				if n := iqeRuns(t, dir) - before; n != 0 {
					t.Errorf("ibqueryerrors ran %d times over a planted %s", n, kind)
				}
				if sw := sweepBounded(t, s); !sw.OK() {
					t.Errorf("the sweep after: unknown %d failures %v, want every port read", sw.Unknown, sw.Failures)
				}
				if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s not written afresh: %v %v", name, fi, err)
				}
			})
		}
	}
}

// TestOpenRegular: only a regular file of this user opens; a FIFO with
// no writer is refused at once instead of blocking.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	reg, fifo, link := filepath.Join(dir, "reg"), filepath.Join(dir, "fifo"), filepath.Join(dir, "link")
	if err := os.WriteFile(reg, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	f, err := openRegular(reg)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, p := range []string{fifo, link, dir, "/dev/null"} {
		if f, err := openRegular(p); err == nil {
			f.Close()
			t.Errorf("%s opened", p)
		} else if !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "not followed") {
			t.Errorf("%s: %v, want a refusal", p, err)
		}
		if checkRegular(p) == nil {
			t.Errorf("%s passes checkRegular", p)
		}
	}
	if err := checkRegular(reg); err != nil {
		t.Error(err)
	}
}

// TestSweepStopsAtFirstTimeout: a hung errors run ends the sweep; the
// data run is not started to time out after it, which would keep the
// last sweep published for two timeouts.
func TestSweepStopsAtFirstTimeout(t *testing.T) {
	cfg, dir := fakeTools(t, "exec sleep 1000", "")
	cfg.Timeout = 300 * time.Millisecond
	sw := sweepWith(t, cfg)
	if n := iqeRuns(t, dir); n != 1 || sw.Queries != 1 {
		t.Errorf("%d ibqueryerrors runs (Queries %d) after the first timed out, want 1", n, sw.Queries)
	}
	if sw.Failures[ReasonTimeout] != 1 || len(sw.Failures) != 1 || sw.Unknown != 48 {
		t.Errorf("failures %v unknown %d, want one timeout and every port unknown", sw.Failures, sw.Unknown)
	}
}

// TestSweepOneDeadline: each run gets what is left of the sweep's
// deadline, never an unbounded 0.
func TestSweepOneDeadline(t *testing.T) {
	s := NewSweeper(SweeperConfig{Loop: Loop{Timeout: time.Hour}})
	if got := s.timeout(); got != time.Hour {
		t.Errorf("no sweep running: %v, want the Timeout", got)
	}
	s.deadline = time.Now().Add(10 * time.Minute)
	if got := s.timeout(); got <= 0 || got > 10*time.Minute {
		t.Errorf("10 min left: %v", got)
	}
	s.deadline = time.Now().Add(-time.Second)
	if got := s.timeout(); got != time.Millisecond {
		t.Errorf("deadline passed: %v, want 1ms (0 would be unbounded)", got)
	}
}

// TestSweepOverrun: a tick that finds the sweep still running makes the
// published sweep's ports unknown (the last sweep must not keep success 1
// while a hung one runs); the age of the running sweep is in the status;
// once it ends, its own result replaces the stand-in.
func TestSweepOverrun(t *testing.T) {
	hold := filepath.Join(t.TempDir(), "hold")
	cfg, _ := fakeTools(t, `while [ -e `+hold+` ]; do sleep 0.05; done; cat `+iqeFixture("ibsim16-errors.stdout")+`; exit 1`, "")
	topo := ibsimTopology(t)
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Topology, cfg.Now, cfg.Interval = func() *Fabric { return topo }, clock.Now, time.Minute
	s := NewSweeper(cfg)
	first := sweepBounded(t, s)
	if !first.OK() || !s.Status().Running.IsZero() {
		t.Fatalf("first sweep OK %v, running %v", first.OK(), s.Status().Running)
	}
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	began := clock.Add(time.Minute)
	s.tick(ctx) // starts the sweep that hangs
	clock.Add(time.Minute)
	s.tick(ctx) // finds it running
	st := s.Status()
	sw := st.Last
	if st.Skipped != 1 || !st.Running.Equal(began) || sw == first || !sw.Overrun || sw.OK() || sw.Unknown != len(first.Ports) {
		t.Fatalf("overrun: skipped %d running %v, last: overrun %v OK %v unknown %d of %d", st.Skipped, st.Running, sw.Overrun, sw.OK(), sw.Unknown, len(first.Ports))
	}
	if p := mustFind(t, sw, leaf1, 1); !p.Unknown || p.Reason != ReasonTimeout || p.Values[SymbolErrors].Present {
		t.Errorf("leaf1/1 of the overrun: %+v", p)
	}
	if !st.LastSuccess.Equal(first.Start) || st.Sweeps != 1 {
		t.Errorf("last success %v sweeps %d: the stand-in is no sweep", st.LastSuccess, st.Sweeps)
	}
	clock.Add(time.Minute)
	s.tick(ctx)
	if st := s.Status(); st.Last != sw || st.Skipped != 2 {
		t.Errorf("a second skip made another stand-in (%v) or was not counted (%d)", st.Last != sw, st.Skipped)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	st = s.Status()
	if !st.Running.IsZero() || st.Last.Overrun || !st.Last.OK() || st.Sweeps != 2 {
		t.Errorf("after the sweep ended: running %v overrun %v OK %v sweeps %d", st.Running, st.Last.Overrun, st.Last.OK(), st.Sweeps)
	}
}

// fakeClock is a Now the test moves (the sweep's goroutine reads it).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d and returns the new time.
func (c *fakeClock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}
