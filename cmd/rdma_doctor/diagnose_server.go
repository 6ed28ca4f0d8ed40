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
	// sminfo runs in the background on its own interval; a sample only
	// reads its latest results. The first round gets a moment to finish so
	// the first report has them (no umad: instant; a healthy SM: fast).
	runner := newSMRunner(s.App, keep, s.App.Logger.With("component", "diagnose"))
	first := make(chan struct{})
	go func() {
		runner.RunOnce(ctx)
		close(first)
		runner.Run(ctx)
	}()
	select {
	case <-first:
	case <-time.After(smFirstRoundWait):
	case <-ctx.Done():
	}
	smStatus := func(context.Context) *sm.Status {
		st := runner.Status()
		return &st
	}
	sampler := &diagnose.Sampler{
		Reader:   &diagnose.Reader{Host: s.App.Host, Keep: keep, SM: smStatus},
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
