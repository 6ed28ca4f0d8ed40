// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package worker

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log sink the workers' goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGroupJoins: Wait returns once every worker's Run has returned after
// ctx ended, each stop logged by name and then the whole; a worker that
// ignores ctx is waited for up to the bound only, and Running names it;
// a worker whose Run returned is Stopped whatever its Status says.
func TestGroupJoins(t *testing.T) {
	var log syncBuffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	release := make(chan struct{})
	prompt := New("prompt", func(ctx context.Context) { <-ctx.Done() },
		func() Status { return Status{Latest: time.Unix(1, 0)} })
	stubborn := New("stubborn", func(context.Context) { <-release }, nil)
	g, err := NewGroup(logger, prompt, stubborn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewGroup(nil, prompt, prompt); err == nil {
		t.Error("a name registered twice was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.Start(ctx)
	g.Start(ctx) // no second run
	want := []Report{{Name: "prompt", Status: Status{Latest: time.Unix(1, 0)}}, {Name: "stubborn"}}
	if got := g.Reports(); !slices.Equal(got, want) {
		t.Errorf("reports while running: %+v, want %+v", got, want)
	}
	cancel()
	if g.Wait(10 * time.Millisecond) {
		t.Fatal("Wait returned true while a worker still runs")
	}
	if got := g.Running(); !slices.Equal(got, []string{"stubborn"}) && !slices.Equal(got, []string{"prompt", "stubborn"}) {
		t.Errorf("running %v, want the stubborn worker named", got)
	}
	if out := log.String(); strings.Contains(out, "all background workers stopped") ||
		!strings.Contains(out, `level=WARN msg="background workers did not stop in time; exiting anyway" waited=10ms running=`) {
		t.Errorf("after a Wait that gave up: want its warning and no all-stopped line:\n%s", out)
	}
	close(release)
	if !g.Wait(time.Minute) {
		t.Fatal("Wait gave up a minute after every worker was free to return")
	}
	if got := g.Running(); len(got) != 0 {
		t.Errorf("running %v after Wait", got)
	}
	for _, r := range g.Reports() {
		if r.Problem != Stopped {
			t.Errorf("%s: %q after its Run returned, want %q", r.Name, r.Problem, Stopped)
		}
	}
	out := log.String()
	for _, line := range []string{`msg="background worker stopped" worker=prompt`, `msg="background worker stopped" worker=stubborn`, `msg="all background workers stopped" workers=2`} {
		if !strings.Contains(out, line) {
			t.Errorf("log lacks %s:\n%s", line, out)
		}
	}
}

// A worker whose Run returns before ctx ends says so at warning level.
func TestGroupEarlyStop(t *testing.T) {
	var log syncBuffer
	g, err := NewGroup(slog.New(slog.NewTextHandler(&log, nil)), New("quitter", func(context.Context) {}, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Start(ctx)
	if !g.Wait(time.Minute) {
		t.Fatal("a worker that returned at once was not joined")
	}
	if out := log.String(); !strings.Contains(out, `level=WARN msg="background worker stopped before shutdown" worker=quitter`) {
		t.Errorf("no warning for a worker that stopped on its own:\n%s", out)
	}
	if r := g.Reports(); r[0].Problem != Stopped {
		t.Errorf("health %+v, want stopped", r[0])
	}
}

// Wait without Start has nothing to wait for.
func TestGroupWaitUnstarted(t *testing.T) {
	g, err := NewGroup(nil, New("idle", func(ctx context.Context) { <-ctx.Done() }, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Wait(time.Millisecond) {
		t.Error("Wait without Start reported workers left running")
	}
	if r := g.Reports(); r[0].Problem != "" {
		t.Errorf("a worker never started is %q", r[0].Problem)
	}
}
