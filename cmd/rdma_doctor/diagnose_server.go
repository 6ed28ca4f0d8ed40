// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks"
	"github.com/rdma-doctor/rdma_doctor/diagnose/report"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/probe"
)

// smFirstRoundWait bounds how long start-up waits for the first sminfo
// round before the first diagnosis.
const smFirstRoundWait = 3 * time.Second

// newDiagnoseSampler builds the diagnose sampler over the collectors'
// host, before the host starts: it follows the fabric sweeps from the
// first one (Sampler.FollowSweeps), so every sweep the sweeper publishes
// enters the diagnosis window, not only those a sample catches.
func newDiagnoseSampler(a *App, probes probe.Reader) (*diagnose.Sampler, error) {
	cfg := &a.Config.Diagnose
	eval, err := diagnose.NewEvaluator(a.Config, nil, checks.All())
	if err != nil {
		return nil, err
	}
	if err := eval.TopologyErr(); err != nil {
		// The one log line; /diagnose's fabric.topology says the same.
		a.Logger.Error("fabric.topology is unknown until the expected topology file is fixed and the server restarted", "err", err)
	}
	interval, window := cfg.SampleInterval(), cfg.HistoryWindow()
	timeout := interval
	if timeout > sampleTimeout {
		timeout = sampleTimeout
	}
	sampler := &diagnose.Sampler{
		Reader: &diagnose.Reader{Host: a.Host, ReuseClass: interval / 2, Probe: probe.Diagnose(probes),
			ExpectedDevices: cfg.ExpectedDevices},
		Eval:     eval,
		History:  diagnose.HistoryFor(window, interval),
		Interval: interval,
		Timeout:  timeout,
		Logger:   a.Logger.With("component", "diagnose"),
	}
	sampler.FollowSweeps()
	return sampler, nil
}

// addDiagnose adds /diagnose, its landing page link and
// rdma_diagnose_status, and returns the background sampler that feeds
// them as a worker. The page and the metric serve the sampler's latest
// report: a request never reads the host and nothing here ever changes
// it. The sampler reads through the collectors' host, so the slow host
// state, a class a scrape has just read and the background sources'
// results (sminfo, the fabric sweep) are shared: sminfo never runs twice.
func addDiagnose(s *Server, sampler *diagnose.Sampler) worker.Worker {
	s.Parts = append(s.Parts, collector.NewDiagnoseStatus(sampler.Latest))
	s.Mux.Handle("/diagnose", report.NewHandler(sampler.Latest))
	s.Links = append(s.Links, web.LandingLinks{Address: "/diagnose", Text: "Diagnose",
		Description: "The troubleshooting checklist: findings with remedies (text; ?format=json, html, nhc)"})
	s.App.Logger.Info("diagnose sampler started", "interval", sampler.Interval, "window", s.App.Config.Diagnose.HistoryWindow(),
		"history_samples", sampler.History.Cap(), "checks", len(sampler.Eval.Checks()))
	return diagnoseWorker{sampler: sampler, host: s.App.Host}
}

// diagnoseWorker is the diagnose sampler as a worker.
type diagnoseWorker struct {
	sampler *diagnose.Sampler
	host    *host.Host
}

func (w diagnoseWorker) Name() string { return "diagnose" }

// Run takes the first sample in the background, like every later one:
// the server listens at once even when a host read hangs, and /diagnose
// says a first sample is under way until it is done.
func (w diagnoseWorker) Run(ctx context.Context) {
	// The first sminfo round gets a moment, so the first report has its
	// results (no umad: instant; a healthy SM: fast).
	w.host.AwaitSMInfo(ctx, smFirstRoundWait)
	if ctx.Err() != nil {
		return
	}
	r := w.sampler.Sample(ctx)
	w.sampler.Logger.Info("first diagnosis ready", "status", r.Status, "fail", r.Summary.Fail, "warn", r.Summary.Warn)
	w.sampler.Run(ctx)
}

// Status is the latest report's time; failing once it is older than the
// sampler's watchdog allows (a sample that does not end).
func (w diagnoseWorker) Status() worker.Status {
	r := w.sampler.Latest()
	switch {
	case r == nil:
		return worker.Status{Problem: worker.FirstRoundPending}
	case time.Since(r.Time) > w.sampler.StaleAfter():
		return worker.Status{Latest: r.Time, Problem: worker.Failing}
	}
	return worker.Status{Latest: r.Time}
}
