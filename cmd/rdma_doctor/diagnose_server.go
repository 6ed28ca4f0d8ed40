// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/tuning"
)

// smFirstRoundWait bounds how long start-up waits for the first sminfo
// round before the first diagnosis.
const smFirstRoundWait = 3 * time.Second

// diagnoseServerHook adds /diagnose, its landing page link, the background
// sampler that feeds it, and rdma_diagnose_status. The page and the metric
// serve the sampler's latest report: a request never reads the host and
// nothing here ever changes it.
func diagnoseServerHook(ctx context.Context, s *Server) error {
	cfg := &s.App.Config.Diagnose
	eval, err := diagnose.NewEvaluator(s.App.Config, nil)
	if err != nil {
		return err
	}
	keep, err := deviceKeep(s.App)
	if err != nil {
		return err
	}
	interval, window := cfg.SampleInterval(), cfg.HistoryWindow()
	timeout := interval
	if timeout > sampleTimeout {
		timeout = sampleTimeout
	}
	smStatus := smStatusFor(ctx, s)
	sampler := &diagnose.Sampler{
		Reader: &diagnose.Reader{Host: s.App.Host, Keep: keep, SM: smStatus, Probe: probeResults(),
			Tuning:          tuning.Options{MemlockProcesses: s.App.Config.Tuning.MemlockProcesses},
			OpenSMConfig:    flagValue(s.App, "collector.sm.opensm-config"),
			ExpectedDevices: s.App.Config.Diagnose.ExpectedDevices},
		Eval:     eval,
		History:  diagnose.HistoryFor(window, interval),
		Interval: interval,
		Timeout:  timeout,
		Logger:   s.App.Logger.With("component", "diagnose"),
	}
	// The first evaluation happens before the server listens, so /diagnose
	// and the metric are never empty.
	sampler.Sample(ctx)
	go sampler.Run(ctx)

	if err := s.Registry.Register(diagnose.NewStatusCollector(sampler.Latest)); err != nil {
		return fmt.Errorf("diagnose: %w", err)
	}
	s.Mux.Handle("/diagnose", diagnose.NewHandler(sampler.Latest))
	s.Links = append(s.Links, web.LandingLinks{Address: "/diagnose", Text: "Diagnose",
		Description: "The troubleshooting checklist: findings with remedies (text; ?format=json, html, nhc)"})
	s.App.Logger.Info("diagnose sampler started", "interval", interval, "window", window,
		"history_samples", sampler.History.Cap(), "checks", len(eval.Checks()))
	return nil
}

// smStatusFor returns the sminfo results diagnose reads: the sm
// collector's background runner (the collectors' hook started it before
// this one), so sminfo never runs twice. With the sm collector disabled
// nothing runs and sm.master skips. The first round gets a moment so the
// first report has its results (no umad: instant; a healthy SM: fast).
func smStatusFor(ctx context.Context, s *Server) func(context.Context) *sm.Status {
	c, enabled := s.Agg.Lookup("sm")
	if !enabled {
		return nil
	}
	r, ok := c.(interface{ Runner() *sm.Runner })
	if !ok || r.Runner() == nil {
		return nil
	}
	runner := r.Runner()
	for deadline := time.Now().Add(smFirstRoundWait); runner.Status().Rounds == 0 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
	}
	return func(context.Context) *sm.Status {
		st := runner.Status()
		return &st
	}
}
