// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/scrape"
	"github.com/rdma-doctor/rdma_doctor/probe"
)

// Server is the HTTP side while it is built: the pages (Mux and their
// landing page Links) and the collectors of the server's parts (build
// info, diagnose, probe), which every scrape collects beside the host's
// (internal/serve/scrape adds the exporter's own series).
type Server struct {
	App   *App
	Mux   *http.ServeMux
	Links []web.LandingLinks
	Parts []prometheus.Collector
	// Workers is every background worker of the server, which the
	// server starts once built and joins before it exits.
	Workers *worker.Group
}

func setupServe(cmd *kingpin.CmdClause) func(context.Context, *App) int {
	var (
		webFlags     = kingpinflag.AddFlags(cmd, ":9873")
		metricsPath  = cmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
		maxRequests  = cmd.Flag("web.max-requests", "Maximum number of parallel scrapes; further ones get 503. 0 means no limit.").Default("40").Int()
		maxMemory    = cmd.Flag("web.max-requests-memory", "Maximum memory that parallel scrapes hold while they answer (estimated from their samples, format and compression); a scrape that would exceed it gets 503, but one scrape alone is always served. 0 means no limit.").Default("256MiB").Bytes()
		scrapeTO     = cmd.Flag("scrape.timeout", "Deadline for one scrape; a collector that misses it reports rdma_scrape_collector_success 0. A shorter Prometheus scrape timeout (X-Prometheus-Scrape-Timeout-Seconds) takes precedence.").Default("10s").Duration()
		noExporterMx = cmd.Flag("web.disable-exporter-metrics", "Exclude go_*, process_* and promhttp_* metrics about the exporter itself.").Bool()
	)
	return func(ctx context.Context, a *App) int {
		if err := checkServeFlags(*metricsPath, *scrapeTO, *maxRequests); err != nil {
			errorf(os.Stderr, "%v", err)
			return 1
		}
		if *maxMemory < 0 {
			errorf(os.Stderr, "--web.max-requests-memory=%v: want 0 (no limit) or more, such as 256MiB", *maxMemory)
			return 1
		}
		if err := checkListenAddresses(webFlags); err != nil {
			errorf(os.Stderr, "%v", err)
			return 1
		}
		reaper, err := subprocess.NewReaper()
		if err != nil {
			a.Logger.Warn("what sminfo, iblinkinfo or perftest leave outside their process group will outlive them", "err", err)
			reaper = nil
		}
		a.Reaper = reaper
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, err := newServer(ctx, a, *metricsPath, scrape.Options{
			Timeout:         *scrapeTO,
			WriteTimeout:    writeTimeout(*scrapeTO),
			MaxRequests:     *maxRequests,
			MaxMemory:       int64(*maxMemory),
			ExporterMetrics: !*noExporterMx,
		})
		if err != nil {
			errorf(os.Stderr, "%v", err)
			return 1
		}
		// On every way out the background work ends first: a sweep cut
		// short removes its private cache directory.
		s.Workers.Start(ctx)
		defer func() {
			cancel()
			s.Workers.Wait(backgroundStop) // it warns when one is left running
		}()
		a.Host.AwaitWatchers()
		a.Logger.Info("starting "+name, "version", version.Info(), "build_context", version.BuildContext())
		if err := s.listenAndServe(ctx, webFlags, *metricsPath, *scrapeTO); err != nil {
			a.Logger.Error("cannot serve HTTP", "err", err)
			return 1
		}
		return 0
	}
}

// backgroundStop bounds how long an exiting server waits for its
// background workers: their tool runs are killed when the context ends,
// so they return at once unless something is badly wrong.
const backgroundStop = 10 * time.Second

// pages are the server's paths besides the metrics path and the landing page (which "/" as the metrics path replaces).
var pages = []string{"/diagnose", "/probe"}

// checkServeFlags refuses flag values that would make a broken server:
// a metrics path that is empty, relative or another page's (a panic in
// the mux before), and a scrape timeout that fails every collector.
// writeTimeout is the server's WriteTimeout: a full scrape
// (--scrape.timeout) plus time to send its answer; 0 (none) without a
// scrape timeout. The scrape handler's transfer-rate deadlines stay
// within it.
func writeTimeout(scrapeTO time.Duration) time.Duration {
	if scrapeTO <= 0 {
		return 0
	}
	return scrapeTO + 30*time.Second
}

func checkServeFlags(metricsPath string, scrapeTO time.Duration, maxRequests int) error {
	switch {
	case !strings.HasPrefix(metricsPath, "/"):
		return fmt.Errorf("--web.telemetry-path=%q: want an absolute path such as /metrics", metricsPath)
	case slices.Contains(pages, metricsPath):
		return fmt.Errorf("--web.telemetry-path=%q: that path is another page's (%s)", metricsPath, strings.Join(pages, ", "))
	case scrapeTO <= 0:
		return fmt.Errorf("--scrape.timeout=%v: want a positive duration such as 10s", scrapeTO)
	case maxRequests < 0:
		return fmt.Errorf("--web.max-requests=%d: want 0 (no limit) or more", maxRequests)
	}
	return nil
}

// checkListenAddresses refuses a --web.listen-address that cannot be
// listened on before anything starts, rather than after the collectors,
// the sampler and four lines of log. A port already taken still shows
// only when listening.
func checkListenAddresses(f *web.FlagConfig) error {
	if f.WebSystemdSocket != nil && *f.WebSystemdSocket {
		return nil // systemd hands over the listeners
	}
	for _, addr := range *f.WebListenAddresses {
		if _, port, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("--web.listen-address=%q: want [HOST]:PORT such as :9873 (%v)", addr, err)
		} else if _, err := net.LookupPort("tcp", port); err != nil {
			return fmt.Errorf("--web.listen-address=%q: %q is not a port", addr, port)
		}
	}
	return nil
}

// newServer builds the whole server and starts nothing: the background
// workers, in one list and one group (s.Workers), then the collectors,
// /diagnose, /probe and /metrics (metrics has the limits from the flags;
// the collection, the parts and the logger are filled in here). The
// caller starts s.Workers, whose work lasts as long as ctx, and joins
// them. The diagnose sampler follows every fabric sweep as it is
// published, so it is built before the host hands out its loops.
func newServer(ctx context.Context, a *App, metricsPath string, metrics scrape.Options) (*Server, error) {
	store := probe.NewStore()
	sampler, err := newDiagnoseSampler(a, store)
	if err != nil {
		return nil, err
	}
	s := &Server{
		App: a,
		Mux: http.NewServeMux(),
		Links: []web.LandingLinks{
			{Address: metricsPath, Text: "Metrics", Description: "Port counters, link rate and width, firmware, hw_counters"},
		},
		Parts: []prometheus.Collector{scrape.BuildInfo(name)},
	}
	// Before any snapshot: from here on a snapshot reads what the loops
	// publish and runs no sminfo round of its own.
	sources := a.Host.Workers(a.Logger, a.Reaper)
	watchers, err := hostWatchers(ctx, a)
	if err != nil {
		return nil, err
	}
	diagnosis := addDiagnose(s, sampler)
	probes, err := addProbe(s, store)
	if err != nil {
		return nil, err
	}
	// Every background worker of the server, in one list.
	workers := slices.Concat(
		sources,                    // sminfo, fabric_scan, fabric_sweep, fabric_routes: as the options turn them on
		watchers,                   // portwatch, kmsg
		[]worker.Worker{diagnosis}, // diagnose
		probes,                     // probe_responder (one per listener), probe_scheduler
	)
	if s.Workers, err = worker.NewGroup(a.Logger, workers...); err != nil {
		return nil, err
	}
	agg, err := collector.New(collector.Env{Host: a.Host, Config: a.Config, Logger: a.Logger, Workers: s.Workers.Reports},
		a.Collectors, metrics.Timeout)
	if err != nil {
		return nil, err
	}
	metrics.Collect, metrics.Parts, metrics.Logger = agg.Metrics, s.Parts, a.Logger
	s.Mux.Handle(metricsPath, scrape.New(metrics))
	live := a.Host.Live()
	a.Logger.Info("reading host", "rootfs", a.Paths.Rootfs, "sysfs", a.Paths.Sysfs, "procfs", a.Paths.Procfs,
		"collectors", agg.Names(), "live_kernel", live.On, "live_kernel_reason", live.Reason)
	// A pod that silently lost its live-kernel collectors is what this
	// warning explains: the tree is sysfs, but of another network
	// namespace, or the check itself failed.
	if !live.On && live.Reason != host.LiveReasonNotSysfs && live.Reason != host.LiveReasonOff {
		a.Logger.Warn("live-kernel sources off", "detail", live.Detail)
	}
	return s, nil
}

// hostWatchers are the port state sampler and the kernel log reader, as
// their collectors are enabled.
func hostWatchers(ctx context.Context, a *App) ([]worker.Worker, error) {
	var out []worker.Worker
	if a.Collectors.Enabled("portwatch") {
		iv := a.Collectors.Portwatch.Interval
		if iv != 0 && iv < 100*time.Millisecond {
			return nil, fmt.Errorf("--collector.portwatch.interval=%v: want 0 (rounds on scrapes and link events only) or 100ms or more, such as 1s", iv)
		}
		w, err := a.Host.PortWorker(ctx, iv, time.Duration(a.Config.Diagnose.Thresholds.Links.Effective().FlapWindow))
		if err != nil {
			a.Logger.Warn("port sampler: no link notifications; flaps between scrapes are seen on ports with a link_downed counter only",
				"collector", "portwatch", "err", err, "hint", "set --collector.portwatch.interval=1s to sample every second")
		}
		out = append(out, w)
	}
	if a.Collectors.Enabled("kmsg") {
		iv := a.Collectors.Kmsg.Interval
		if iv < 10*time.Millisecond || iv > time.Minute {
			return nil, fmt.Errorf("--collector.kmsg.interval=%v: want 10ms to 1m, such as 250ms", iv)
		}
		w, err := a.Host.KernelLogWorker(a.Logger.With("collector", "kmsg"), iv)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func (s *Server) listenAndServe(ctx context.Context, flags *web.FlagConfig, metricsPath string, scrapeTO time.Duration) error {
	if metricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        name,
			Description: "Prometheus exporter and doctor for InfiniBand and RoCE hosts",
			Version:     version.Info(),
			Links:       s.Links,
		})
		if err != nil {
			return err
		}
		s.Mux.Handle("/", landing)
	}
	// Limits so that a slow or hostile client cannot hold connections or
	// memory: no endpoint reads a request body, so the whole request must
	// arrive within ReadTimeout; WriteTimeout leaves a full scrape
	// (--scrape.timeout) plus time to send its answer.
	httpServer := &http.Server{
		Handler:           readOnly(s.Mux),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	httpServer.WriteTimeout = writeTimeout(scrapeTO)
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(httpServer, flags, s.App.Logger) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		s.App.Logger.Info("shutting down")
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return httpServer.Shutdown(shutdown)
	}
}

// readOnly answers 405 to every method but GET and HEAD: no page changes
// anything, and refusing the others keeps it that way for pages added
// later (and their request bodies unread).
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: every page of rdma_doctor is read-only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}
