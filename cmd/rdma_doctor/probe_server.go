// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/probe"
	"github.com/rdma-doctor/rdma_doctor/probe/control"
)

// addProbe exports the probe results store (rdma_probe_*), serves it as
// JSON on /probe, and, as configured, returns the scheduler and a
// responder worker per listener (listening already, so that a port taken
// fails the start), for the server's group to run.
func addProbe(s *Server, store *probe.Store) ([]worker.Worker, error) {
	cfg := &s.App.Config.Probe
	logger := s.App.Logger.With("component", "probe")
	guard := &probe.ScrapeGuard{Quiet: cfg.ScrapeGuardOrDefault()}
	s.Parts = append(s.Parts, &probe.Collector{Store: store, Guard: guard})
	s.Mux.Handle("/probe", probe.Handler{Store: store})
	s.Links = append(s.Links, web.LandingLinks{Address: "/probe", Text: "Probe", Description: "Latest verbs probe results (JSON)"})
	if !cfg.Enabled && !cfg.Responder.Enabled {
		return nil, nil
	}
	prober, err := newProber(s.App, "")
	if err != nil {
		return nil, err
	}
	var workers []worker.Worker
	if cfg.Responder.Enabled {
		if prober.Client == nil {
			return nil, fmt.Errorf("probe responder: probe.secret_file is required")
		}
		srv, err := control.NewServer(cfg, prober.Client.Secret, prober.Runner, logger.With("part", "responder"))
		if err != nil {
			return nil, err
		}
		for i, addr := range cfg.Responder.Listen {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, fmt.Errorf("probe responder: %w", err)
			}
			logger.Info("probe responder listening", "address", ln.Addr().String(), "tests", cfg.Responder.AllowedTests)
			// One worker per listener, named by its place in
			// probe.responder.listen (bounded by the config).
			name := "probe_responder"
			if i > 0 {
				name = fmt.Sprintf("probe_responder_%d", i+1)
			}
			workers = append(workers, worker.New(name, func(ctx context.Context) {
				if err := srv.Serve(ctx, ln); err != nil {
					logger.Error("probe responder stopped", "address", ln.Addr().String(), "err", err)
				}
			}, nil))
		}
	}
	if cfg.Enabled {
		targets, err := probe.Targets(cfg)
		if err != nil {
			return nil, err
		}
		pairs := probe.Rotation(targets)
		if len(pairs) == 0 {
			logger.Warn("probe.enabled is set but there are no probe.loopback or probe.peers targets")
			return workers, nil
		}
		sched := &probe.Scheduler{
			Prober:   prober,
			Store:    store,
			Pairs:    pairs,
			Interval: cfg.IntervalOrDefault(),
			Jitter:   cfg.JitterOrDefault(),
			Guard:    guard,
			Logger:   logger,
		}
		logger.Info("probe scheduler started", "targets", len(targets), "runs_per_rotation", len(pairs), "interval", sched.Interval)
		workers = append(workers, sched)
	}
	return workers, nil
}
