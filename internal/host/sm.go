// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
)

// SMOptions are the sminfo runs (--collector.sm.*). Options.SM nil never
// runs sminfo (--no-collector.sm).
type SMOptions struct {
	// SminfoPath is the sminfo executable ("sminfo": looked up in $PATH).
	SminfoPath string
	// Interval is the time between rounds, Timeout one run's bound (0:
	// sm.RunnerConfig's defaults).
	Interval, Timeout time.Duration
}

// smInfoSource is sminfo run through every ACTIVE InfiniBand port with a
// umad device: in the background every Interval where a loop runs (the
// server), else one round per snapshot (the CLI's diagnose, so that two
// samples --interval apart show a stalled SM).
var smInfoSource = register(&Background[*sm.Status]{name: "sminfo", onDemand: true,
	open: func(h *Host, env runEnv, published func()) *task[*sm.Status] {
		o := h.opts.SM
		if o == nil {
			return nil
		}
		r := sm.NewRunner(sm.RunnerConfig{
			Path: o.SminfoPath, Interval: o.Interval, Timeout: o.Timeout, Logger: env.logger, Reaper: env.reaper, Done: published,
			// The ports' state comes from a class a scrape read within
			// the interval when there is one: no class read of its own
			// per round.
			Targets: func(ctx context.Context) ([]sm.Target, error) {
				return sm.TargetsOn(ctx, h.fs, h.SnapshotReusing(o.Interval).Class)
			},
		})
		return &task[*sm.Status]{run: r.Run, round: r.RunOnce, latest: func() *sm.Status {
			st := r.Status()
			return &st
		}}
	}})

// SMStatus is the latest sminfo round (background): nil where sminfo is
// not run (--no-collector.sm); Rounds 0 before the first round ends.
// Without a loop (Start) it runs one round for this snapshot.
func (s *Snapshot) SMStatus(ctx context.Context) *sm.Status {
	return published(ctx, s, smInfoSource)
}

// NeedSM judges an SMStatus reading, nil where sminfo is not run.
var NeedSM = &Need[*sm.Status]{name: "sm", why: func(st *sm.Status, _ error) string {
	switch {
	case st == nil:
		return "sminfo is not run: the sm collector is disabled (--no-collector.sm) or absent"
	case st.TargetsErr != nil:
		return "sminfo cannot run: " + st.TargetsErr.Error()
	case st.Rounds == 0:
		return "sminfo has not completed a run yet"
	}
	return ""
}}

// AwaitSMInfo waits until the sminfo loop has published its first round,
// ctx ends or max passes, so a first report can judge the SM (no umad:
// at once; a healthy SM: fast). It returns at once where no loop runs.
func (h *Host) AwaitSMInfo(ctx context.Context, max time.Duration) {
	awaitFirst(ctx, h, smInfoSource, max)
}
