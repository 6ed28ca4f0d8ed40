// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/rdma-doctor/rdma_doctor/bench/probe"
	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/sm"
)

// smFirstRoundWait bounds how long start-up waits for the first sminfo
// round before the first diagnosis.
const smFirstRoundWait = 3 * time.Second

// addDiagnose adds /diagnose, its landing page link, the background
// sampler that feeds it, and rdma_diagnose_status. The page and the metric
// serve the sampler's latest report: a request never reads the host and
// nothing here ever changes it. The sampler reads through the collectors'
// host, so the slow host state and a class a scrape has just read are
// shared, and through their sminfo runner, so sminfo never runs twice.
func addDiagnose(ctx context.Context, s *Server, agg *collector.Aggregator, probes probe.Reader) error {
	cfg := &s.App.Config.Diagnose
	eval, err := diagnose.NewEvaluator(s.App.Config, nil)
	if err != nil {
		return err
	}
	interval, window := cfg.SampleInterval(), cfg.HistoryWindow()
	timeout := interval
	if timeout > sampleTimeout {
		timeout = sampleTimeout
	}
	sampler := &diagnose.Sampler{
		Reader: &diagnose.Reader{Host: s.App.Host, ReuseClass: interval / 2, Probe: probe.Diagnose(probes),
			ExpectedDevices: cfg.ExpectedDevices},
		Eval:     eval,
		History:  diagnose.HistoryFor(window, interval),
		Interval: interval,
		Timeout:  timeout,
		Logger:   s.App.Logger.With("component", "diagnose"),
	}
	// The first sample runs in the background, like every later one: the
	// server listens at once even when a host read hangs, and /diagnose
	// says a first sample is under way until it is done.
	go func() {
		sampler.Reader.SM = smStatusFor(ctx, agg)
		sampler.Reader.Fabric = fabricStatusFor(agg)
		r := sampler.Sample(ctx)
		sampler.Logger.Info("first diagnosis ready", "status", r.Status, "fail", r.Summary.Fail, "warn", r.Summary.Warn)
		sampler.Run(ctx)
	}()

	s.Parts = append(s.Parts, collector.NewDiagnoseStatus(sampler.Latest))
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
func smStatusFor(ctx context.Context, agg *collector.Aggregator) func(context.Context) *sm.Status {
	c, enabled := agg.Lookup("sm")
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

// fabricStatusFor returns the fabric collector's counter sweep state for
// the fabric.* checks, so they judge the collector's sweeps and never send
// MADs of their own; nil (the checks skip) with the fabric collector or
// its counters off.
func fabricStatusFor(agg *collector.Aggregator) func() *fabric.SweepStatus {
	c, enabled := agg.Lookup("fabric")
	if !enabled {
		return nil
	}
	r, ok := c.(interface{ Sweeper() *fabric.Sweeper })
	if !ok || r.Sweeper() == nil {
		return nil
	}
	sweeper := r.Sweeper()
	return func() *fabric.SweepStatus {
		st := sweeper.Status()
		return &st
	}
}
