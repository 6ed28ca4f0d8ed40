// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package sm

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
)

// RunnerConfig configures the background sminfo runner.
type RunnerConfig struct {
	// Path is the sminfo executable (default "sminfo", looked up in $PATH).
	Path string
	// Interval between runs (default 1m).
	Interval time.Duration
	// Timeout of one sminfo run (default 10s); sminfo retries MADs itself
	// and can take seconds when the SM does not answer.
	Timeout time.Duration
	// Targets lists the ports to query on each run.
	Targets func(ctx context.Context) ([]Target, error)
	Logger  *slog.Logger
	// Reaper, when set, starts sminfo and kills what it leaves behind.
	Reaper *subprocess.Reaper
	// Now is the clock (tests).
	Now func() time.Time
	// Done, when set, is called after each round that ran to its end
	// (not one cut short by its context), once Status returns it.
	Done func()
}

// PortStatus is the latest sminfo result for one local port.
type PortStatus struct {
	Target
	// OK is true when the latest run succeeded.
	OK bool
	// Err is the latest run's error, nil when OK. Its text has no secrets:
	// sminfo is never given an M_Key.
	Err error
	// Info is the latest successful answer; HaveInfo is false before one.
	Info     Info
	HaveInfo bool
	// Stalled is true when the latest answer came from the same SM as the
	// one before and its activity count had not risen: the SM answers MADs
	// but has stopped working (a hung sweep), or a sweep interval of 0.
	Stalled        bool
	LastRun        time.Time
	LastSuccess    time.Time
	Duration       time.Duration
	Runs, Failures uint64
}

// CannotRun reports that the latest run failed because sminfo cannot run on
// this host at all (NotInstalled, NoLocalAccess): a property of the host
// and its deployment, like a missing ib_umad, not an answer about the SM.
func (p *PortStatus) CannotRun() bool {
	return !p.OK && p.Err != nil && (NotInstalled(p.Err) || NoLocalAccess(p.Err))
}

// NotInstalled reports an sminfo that could not be started: not installed
// (Debian/RHEL package infiniband-diags) or a wrong path.
func NotInstalled(err error) bool {
	return errors.Is(err, subprocess.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
}

// NoLocalAccess reports an sminfo that could not open the local port
// ("Failed to open 'mlx5_0' port '1'", "can't open UMAD port"): no access
// to /dev/infiniband/umad* (not root, which the shipped unit is not), or
// ib_umad not bound to the port. sminfo never reached the fabric.
func NoLocalAccess(err error) bool {
	m := err.Error()
	return strings.Contains(m, "Failed to open") || strings.Contains(m, "can't open UMAD port")
}

// Status is a snapshot of every port's latest result.
type Status struct {
	// Ports are the ports queried, sorted; a port that stopped being a
	// target is dropped.
	Ports []PortStatus
	// TargetsErr is the error of the latest target discovery (ErrNoUmad
	// when ib_umad is not loaded).
	TargetsErr error
	// Rounds counts completed rounds (0 before the first).
	Rounds uint64
}

// Runner runs sminfo in the background. Scrapes and checks read Status,
// which never waits for a run.
type Runner struct {
	cfg RunnerConfig

	runMu sync.Mutex // one round at a time
	mu    sync.Mutex
	ports map[Target]*PortStatus
	terr  error
	round uint64
}

// NewRunner returns a runner; call Run to start it.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Path == "" {
		cfg.Path = "sminfo"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runner{cfg: cfg, ports: map[Target]*PortStatus{}}
}

// Run queries every target now and then every Interval until ctx ends.
func (r *Runner) Run(ctx context.Context) { subprocess.Every(ctx, r.cfg.Interval, r.RunOnce) }

// RunOnce runs one round synchronously: discovers the targets and runs
// sminfo on each, one after the other (they usually ask the same SM).
func (r *Runner) RunOnce(ctx context.Context) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	targets, terr := r.cfg.Targets(ctx)
	r.mu.Lock()
	prevErr := r.terr
	r.terr = terr
	keep := map[Target]bool{}
	for _, t := range targets {
		keep[t] = true
	}
	for t := range r.ports {
		if !keep[t] {
			delete(r.ports, t)
		}
	}
	r.mu.Unlock()
	if terr != nil && (prevErr == nil || prevErr.Error() != terr.Error()) {
		level := slog.LevelWarn
		if errors.Is(terr, ErrNoUmad) || errors.Is(terr, ErrNoUmadDevice) {
			level = slog.LevelInfo // no MAD access is a host property, not a fault
		}
		r.cfg.Logger.Log(ctx, level, "sminfo: finding ports to query", "err", terr)
	}
	for _, t := range targets {
		if ctx.Err() != nil {
			return
		}
		r.query(ctx, t)
	}
	r.mu.Lock()
	r.round++
	r.mu.Unlock()
	if r.cfg.Done != nil && ctx.Err() == nil {
		r.cfg.Done()
	}
}

func (r *Runner) query(ctx context.Context, t Target) {
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path:      r.cfg.Path,
		Args:      []string{"-C", t.Device, "-P", strconv.Itoa(t.Port)},
		Timeout:   r.cfg.Timeout,
		MaxOutput: 64 << 10,
		Reaper:    r.cfg.Reaper,
	})
	var info Info
	if err == nil {
		info, err = ParseSMInfo(res.Stdout)
	}
	if ctx.Err() != nil {
		return // shutting down: not a result
	}
	now := r.cfg.Now()

	r.mu.Lock()
	ps := r.ports[t]
	if ps == nil {
		ps = &PortStatus{Target: t}
		r.ports[t] = ps
	}
	wasOK, hadRun, prevErr := ps.OK, ps.Runs > 0, ps.Err
	ps.Runs++
	ps.LastRun = now
	ps.Duration = res.Duration
	if err != nil {
		ps.OK, ps.Err = false, err
		ps.Failures++
	} else {
		ps.Stalled = ps.HaveInfo && ps.Info.GUID == info.GUID && info.ActivityCount <= ps.Info.ActivityCount
		ps.OK, ps.Err = true, nil
		ps.Info, ps.HaveInfo = info, true
		ps.LastSuccess = now
	}
	stalled := ps.Stalled && err == nil
	r.mu.Unlock()

	// One log line per change, not one per run.
	switch {
	case err != nil && (wasOK || !hadRun || prevErr == nil || prevErr.Error() != err.Error()):
		r.cfg.Logger.Warn("sminfo failed; rdma_sm_sminfo_success is 0 until it answers", "port", t.String(), "err", err)
	case err != nil:
		r.cfg.Logger.Debug("sminfo still failing", "port", t.String(), "err", err)
	case hadRun && !wasOK:
		r.cfg.Logger.Info("sminfo answers again", "port", t.String(), "sm_lid", info.LID, "sm_guid", info.GUID)
	case stalled:
		r.cfg.Logger.Debug("sm activity count did not rise", "port", t.String(), "sm_guid", info.GUID, "activity_count", info.ActivityCount)
	}
}

// Status returns a copy of the latest results.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{TargetsErr: r.terr, Rounds: r.round}
	for _, ps := range r.ports {
		s.Ports = append(s.Ports, *ps)
	}
	sortPorts(s.Ports)
	return s
}

func sortPorts(p []PortStatus) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && less(p[j].Target, p[j-1].Target); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

func less(a, b Target) bool {
	if a.Device != b.Device {
		return a.Device < b.Device
	}
	return a.Port < b.Port
}
