// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command rdma_doctor is a Prometheus exporter and diagnostics tool for
// InfiniBand and RoCE hosts.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
)

const name = "rdma_doctor"

func main() {
	app := kingpin.CommandLine
	app.Name = name
	app.Help = "Prometheus exporter and doctor for InfiniBand and RoCE hosts.\n\n" +
		"Serves metrics read from /sys/class/infiniband on --web.listen-address (default :9873)."
	app.Version(version.Print(name))
	app.UsageWriter(os.Stdout)
	app.HelpFlag.Short('h')

	var (
		paths        hostfs.Paths
		configFile   = app.Flag("config.file", "YAML file with expectations (link rates) and thresholds. Optional: every default works without it.").String()
		webFlags     = kingpinflag.AddFlags(app, ":9873")
		metricsPath  = app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
		maxRequests  = app.Flag("web.max-requests", "Maximum number of parallel scrapes; further ones get 503. 0 means no limit.").Default("40").Int()
		scrapeTO     = app.Flag("scrape.timeout", "Deadline for one scrape; a collector that misses it reports rdma_scrape_collector_success 0. A shorter Prometheus scrape timeout (X-Prometheus-Scrape-Timeout-Seconds) takes precedence.").Default("10s").Duration()
		noExporterMx = app.Flag("web.disable-exporter-metrics", "Exclude go_*, process_* and promhttp_* metrics about the exporter itself.").Bool()
	)
	app.Flag("path.rootfs", "Root of the host file system: sys, proc, etc are read below it.").Default("/").StringVar(&paths.Rootfs)
	app.Flag("path.sysfs", "sysfs mount point (default: <path.rootfs>/sys).").StringVar(&paths.Sysfs)
	app.Flag("path.procfs", "procfs mount point (default: <path.rootfs>/proc).").StringVar(&paths.Procfs)

	promslogConfig := &promslog.Config{}
	promslogflag.AddFlags(app, promslogConfig)

	serve := app.Command("serve", "Serve /metrics over HTTP (the default command).").Default()

	cmd := kingpin.MustParse(app.Parse(os.Args[1:]))
	logger := promslog.New(promslogConfig)

	resolved, err := paths.Resolve()
	if err != nil {
		app.Fatalf("%v", err)
	}
	cfg, err := config.Load(*configFile)
	if err != nil {
		app.Fatalf("%v", err)
	}

	switch cmd {
	case serve.FullCommand():
		env := collector.Env{Host: resolved.Open(), Config: cfg, Logger: logger}
		agg, err := collector.New(env, *scrapeTO)
		if err != nil {
			app.Fatalf("%v", err)
		}
		srv := server{
			agg:         agg,
			logger:      logger,
			exporterReg: exporterRegistry(*noExporterMx),
			timeout:     *scrapeTO,
		}
		if *maxRequests > 0 {
			srv.inFlight = make(chan struct{}, *maxRequests)
		}
		logger.Info("starting "+name, "version", version.Info(), "build_context", version.BuildContext())
		logger.Info("reading host", "rootfs", resolved.Rootfs, "sysfs", resolved.Sysfs, "procfs", resolved.Procfs,
			"collectors", agg.Names())
		if err := srv.listenAndServe(webFlags, *metricsPath); err != nil {
			logger.Error("cannot serve HTTP", "err", err)
			os.Exit(1)
		}
	}
}

func exporterRegistry(disableExporterMetrics bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector(name))
	if !disableExporterMetrics {
		reg.MustRegister(
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	return reg
}

type server struct {
	agg         *collector.Aggregator
	logger      *slog.Logger
	exporterReg *prometheus.Registry
	timeout     time.Duration
	inFlight    chan struct{}
}

func (s server) listenAndServe(flags *web.FlagConfig, metricsPath string) error {
	mux := http.NewServeMux()
	mux.Handle(metricsPath, promhttp.InstrumentMetricHandler(s.exporterReg, http.HandlerFunc(s.metrics)))
	if metricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        name,
			Description: "Prometheus exporter and doctor for InfiniBand and RoCE hosts",
			Version:     version.Info(),
			Links: []web.LandingLinks{
				{Address: metricsPath, Text: "Metrics", Description: "Port counters, link rate and width, firmware, hw_counters"},
			},
		})
		if err != nil {
			return err
		}
		mux.Handle("/", landing)
	}
	httpServer := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	return web.ListenAndServe(httpServer, flags, s.logger)
}

// metrics serves one scrape. Each scrape gets its own registry so the
// collectors run under this request's deadline.
func (s server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.inFlight != nil {
		select {
		case s.inFlight <- struct{}{}:
			defer func() { <-s.inFlight }()
		default:
			http.Error(w, fmt.Sprintf("too many parallel scrapes (limit %d, --web.max-requests)", cap(s.inFlight)), http.StatusServiceUnavailable)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout(r, s.timeout))
	defer cancel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.agg.Bind(ctx))
	promhttp.HandlerFor(prometheus.Gatherers{s.exporterReg, reg}, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	}).ServeHTTP(w, r)
}

// scrapeTimeout leaves Prometheus half a second to receive the answer
// before its own scrape timeout fires.
func scrapeTimeout(r *http.Request, def time.Duration) time.Duration {
	h := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds")
	if h == "" {
		return def
	}
	secs, err := strconv.ParseFloat(h, 64)
	if err != nil || secs <= 0 {
		return def
	}
	d := time.Duration(secs*float64(time.Second)) - 500*time.Millisecond
	if d < 100*time.Millisecond {
		d = 100 * time.Millisecond
	}
	if def > 0 && d > def {
		return def
	}
	return d
}
