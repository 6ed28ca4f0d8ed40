// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/rdma-doctor/rdma_doctor/bench/probe"
	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/expo"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/names"
	"github.com/rdma-doctor/rdma_doctor/internal/procself"
	"github.com/rdma-doctor/rdma_doctor/internal/subprocess"
)

// Server is the HTTP side while it is built: the pages (Mux and their
// landing page Links) and the collectors of the server's parts (build
// info, diagnose, probe, the exporter's own go_*, process_* and
// promhttp_* series), which every scrape collects beside the host's.
type Server struct {
	App   *App
	Mux   *http.ServeMux
	Links []web.LandingLinks
	Parts []prometheus.Collector
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
		s, err := newServer(ctx, a, *metricsPath, *maxRequests, int64(*maxMemory), *scrapeTO, *noExporterMx)
		if err != nil {
			errorf(os.Stderr, "%v", err)
			return 1
		}
		a.Logger.Info("starting "+name, "version", version.Info(), "build_context", version.BuildContext())
		if err := s.listenAndServe(ctx, webFlags, *metricsPath, *scrapeTO); err != nil {
			a.Logger.Error("cannot serve HTTP", "err", err)
			return 1
		}
		return 0
	}
}

// pages are the server's paths besides the metrics path and the landing page (which "/" as the metrics path replaces).
var pages = []string{"/diagnose", "/probe"}

// checkServeFlags refuses flag values that would make a broken server:
// a metrics path that is empty, relative or another page's (a panic in
// the mux before), and a scrape timeout that fails every collector.
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

// newServer builds the whole server, in this order: the collectors, the
// host's background sources (sminfo, the fabric scan and sweep: Host.Start),
// the port state sampler and the kernel log reader, the probe results
// store, the diagnose sampler (fed by the same host snapshots, sminfo's
// results included), the probe scheduler and responder, and /metrics. The
// work that runs in the background lasts as long as ctx.
func newServer(ctx context.Context, a *App, metricsPath string, maxRequests int, maxMemory int64, scrapeTO time.Duration, noExporterMetrics bool) (*Server, error) {
	agg, err := collector.New(collector.Env{Host: a.Host, Config: a.Config, Logger: a.Logger}, a.Collectors, scrapeTO)
	if err != nil {
		return nil, err
	}
	a.Host.Start(ctx, a.Logger, a.Reaper)
	if a.Collectors.Enabled("portwatch") {
		iv := a.Collectors.PortWatchInterval
		if iv != 0 && iv < 100*time.Millisecond {
			return nil, fmt.Errorf("--collector.portwatch.interval=%v: want 0 (rounds on scrapes and link events only) or 100ms or more, such as 1s", iv)
		}
		if _, err := a.Host.WatchPorts(ctx, iv, time.Duration(a.Config.Diagnose.Thresholds.Links.Effective().FlapWindow)); err != nil {
			a.Logger.Warn("port sampler: no link notifications; flaps between scrapes are seen on ports with a link_downed counter only",
				"collector", "portwatch", "err", err, "hint", "set --collector.portwatch.interval=1s to sample every second")
		}
	}
	if a.Collectors.Enabled("kmsg") {
		iv := a.Collectors.KmsgInterval
		if iv < 10*time.Millisecond || iv > time.Minute {
			return nil, fmt.Errorf("--collector.kmsg.interval=%v: want 10ms to 1m, such as 250ms", iv)
		}
		if _, err := a.Host.WatchKernelLog(ctx, a.Logger.With("collector", "kmsg"), iv); err != nil {
			return nil, err
		}
	}
	s := &Server{
		App: a,
		Mux: http.NewServeMux(),
		Links: []web.LandingLinks{
			{Address: metricsPath, Text: "Metrics", Description: "Port counters, link rate and width, firmware, hw_counters"},
		},
		Parts: []prometheus.Collector{buildInfo(), labelLimits{}, expoRejections{}},
	}
	store := probe.NewStore()
	if err := addDiagnose(ctx, s, store); err != nil {
		return nil, err
	}
	if err := addProbe(ctx, s, store); err != nil {
		return nil, err
	}
	m := &metricsHandler{agg: agg, logger: a.Logger, timeout: scrapeTO}
	if maxRequests > 0 {
		m.inFlight = make(chan struct{}, maxRequests)
	}
	if maxMemory > 0 {
		m.memory = &memoryBudget{limit: maxMemory}
	}
	// The exporter's own series: go_* and promhttp_* are client_golang's
	// own (its Go collector, promhttp's instrumentation, gathered through
	// a registry in writeFast); process_* comes from internal/procself,
	// whose package comment says why.
	var h http.Handler = m
	if !noExporterMetrics {
		s.Parts = append(s.Parts, procself.New(), collectors.NewGoCollector())
		h = promhttp.InstrumentMetricHandler(partsRegisterer{&s.Parts}, m)
		m.ownCost = ownSeriesCost
	}
	m.parts = s.Parts
	s.Mux.Handle(metricsPath, h)
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

// buildInfo is the <name>_build_info series of client_golang's version
// collector (collectors/version), as an expo sample: the text path writes
// it without a registry.
func buildInfo() metricList {
	d := expo.NewDesc(name+"_build_info",
		"A metric with a constant '1' value labeled by version, revision, branch, goversion from which "+name+" was built, and the goos and goarch for the build.",
		"version", "revision", "branch", "goversion", "goos", "goarch", "tags")
	return metricList{expo.Gauge(d, 1, version.Version, version.GetRevision(), version.Branch, version.GoVersion, version.GoOS, version.GoArch, version.GetTags())}
}

var labelLimitedDesc = expo.NewDesc("rdma_label_values_limited_total",
	"rdma_doctor: host text values the label policy (internal/names) limited, each time one was read, by reason: cut (free text such as node_desc longer than 128 bytes or not UTF-8, served shortened), refused (a driver-chosen name such as a counter file that is not a name of at most 64 bytes: its series is absent), over_cap (a device's or port's names in one family past 512, such as counter files: their series are absent).",
	"reason")

var expositionRejectedDesc = expo.NewDesc("rdma_exposition_rejected_samples_total",
	"rdma_doctor: samples left out of /metrics because client_golang's registry would refuse them (a collector bug, logged once), each time a scrape met one, by reason: label_count (more or fewer label values than label names), invalid_utf8 (a label value), type_clash (a sample of another type, or another help or label names, than its family's first), duplicate (the label values of an earlier sample of the family, which is kept). The registry would fail the whole scrape.",
	"reason")

// expoRejections exports what the exposition left out (expo.Rejected).
type expoRejections struct{}

// AppendMetrics appends one counter per reason, zero included.
func (expoRejections) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	for _, r := range expo.Rejects() {
		out = append(out, expo.Counter(expositionRejectedDesc, float64(expo.Rejected(r)), r.String()))
	}
	return out
}

func (expoRejections) Describe(ch chan<- *prometheus.Desc) { ch <- expositionRejectedDesc.Prometheus() }

func (e expoRejections) Collect(ch chan<- prometheus.Metric) {
	for _, m := range e.AppendMetrics(nil) {
		ch <- m
	}
}

// labelLimits exports what the label policy limited (names.Limited).
type labelLimits struct{}

// AppendMetrics appends one counter per reason, zero included.
func (labelLimits) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	for _, r := range names.Reasons() {
		out = append(out, expo.Counter(labelLimitedDesc, float64(names.Limited(r)), r.String()))
	}
	return out
}

func (labelLimits) Describe(ch chan<- *prometheus.Desc) { ch <- labelLimitedDesc.Prometheus() }

func (l labelLimits) Collect(ch chan<- prometheus.Metric) {
	for _, m := range l.AppendMetrics(nil) {
		ch <- m
	}
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
	if scrapeTO > 0 {
		httpServer.WriteTimeout = scrapeTO + 30*time.Second
	}
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

// metricsHandler serves one scrape, its collection under this request's
// deadline: in the text format and protobuf straight from the samples
// (serveFast), in another format through a registry of its own. Scrapes
// are bounded in number (inFlight) and in the memory they hold while
// they answer (memory).
type metricsHandler struct {
	agg      *collector.Aggregator
	logger   *slog.Logger
	parts    []prometheus.Collector
	timeout  time.Duration
	inFlight chan struct{}
	memory   *memoryBudget // nil: no limit
	// ownCost is what the parts cost a scrape beyond their samples
	// (ownSeriesCost with the exporter's own series, else 0).
	ownCost int64
}

func (m *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m.inFlight != nil {
		select {
		case m.inFlight <- struct{}{}:
			defer func() { <-m.inFlight }()
		default:
			http.Error(w, fmt.Sprintf("too many parallel scrapes (limit %d, --web.max-requests)", cap(m.inFlight)), http.StatusServiceUnavailable)
			return
		}
	}
	if r.Method == http.MethodHead {
		w = headOnly{w}
	}
	ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout(r, m.timeout))
	defer cancel()
	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
	if fastFormat(format) {
		m.serveFast(ctx, w, r, format)
		return
	}
	// The protobuf debugging formats (text and compact), or names escaped
	// with dots: client_golang's path, which takes the same metrics.
	metrics, n, release, ok := m.collectWithin(ctx, w, r, slowSampleCost)
	if !ok {
		return
	}
	defer release()
	all := make(metricList, 0, n)
	for _, ms := range metrics {
		all = append(all, ms...)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(all)
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	}).ServeHTTP(w, r)
}

// collect returns the metrics of the (shared) collection and of the
// server's parts, in groups. The collection's metrics are shared with
// concurrent scrapes: the parts' are grouped beside them, never appended
// to them (Clip: the append copies the shared list of slices).
func (m *metricsHandler) collect(ctx context.Context) [][]prometheus.Metric {
	metrics := slices.Clip(m.agg.Metrics(ctx))
	for _, c := range m.parts {
		metrics = append(metrics, collect(c))
	}
	return metrics
}

// What a scrape allocates to answer, beyond the collection that
// concurrent scrapes share (TestScrapeMemory, dgx-h100's 1,038 samples):
// 34 kB in the text format and 29 kB in protobuf (grouping and sorting
// take a few pointers a sample, the write buffer is pooled); through
// client_golang's registry 870 kB in protobuf and 2.9 MB in its text
// debugging format (a dto.Metric, its label pairs and a const metric per
// sample, then the formatting): about 2,800 bytes a sample. A gzip
// writer, for a scrape that asks for gzip and finds none free, is about
// 830 kB; a write buffer 64 kB. The exporter's own go_* and promhttp_*
// series, gathered through client_golang's registry on every scrape, add
// about 67 kB in text and 90 kB in protobuf (dgx-h100, with and without
// them, same test).
const (
	fastSampleCost = 24
	slowSampleCost = 3200
	gzipCost       = 850 << 10
	bufferCost     = 64 << 10
	ownSeriesCost  = 96 << 10
)

// scrapeCost estimates the memory a scrape of n samples holds while it
// answers.
func scrapeCost(n, perSample int, gzip bool) int64 {
	c := int64(bufferCost) + int64(n)*int64(perSample)
	if gzip {
		c += gzipCost
	}
	return c
}

// memoryBudget bounds the memory that concurrent scrapes hold while they
// answer (--web.max-requests-memory): --web.max-requests bounds their
// number, but one scrape's memory grows with the samples (a fabric of
// 200 thousand links) and with the format.
type memoryBudget struct {
	mu          sync.Mutex
	used, limit int64
}

// take reserves cost and reports whether it fit. A scrape alone always
// fits, however large: a host whose one scrape exceeds the budget is
// still scraped, one scrape at a time.
func (b *memoryBudget) take(cost int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+cost > b.limit {
		return false
	}
	b.used += cost
	return true
}

func (b *memoryBudget) give(cost int64) {
	b.mu.Lock()
	b.used -= cost
	b.mu.Unlock()
}

// reserve takes a scrape's memory from the budget, or answers 503.
func (m *metricsHandler) reserve(w http.ResponseWriter, cost int64) (release func(), ok bool) {
	if m.memory == nil {
		return func() {}, true
	}
	if !m.memory.take(cost) {
		http.Error(w, fmt.Sprintf("too much memory held by parallel scrapes (limit %d bytes, --web.max-requests-memory)", m.memory.limit), http.StatusServiceUnavailable)
		return nil, false
	}
	return func() { m.memory.give(cost) }, true
}

// headOnly answers a HEAD with the GET's status and headers: the body
// is dropped here, because writing it to the connection fails over HTTP/2
// (the request is over) and promhttp logs every failed metric family (110
// ERROR lines a HEAD).
type headOnly struct{ http.ResponseWriter }

func (h headOnly) Write(p []byte) (int, error) { return len(p), nil }

// fastFormat reports whether a scrape in format is written straight from
// the samples (internal/expo): the text format and the delimited
// protobuf that Prometheus asks for first, with any escaping of names
// but dots (which changes every name with an underscore; all of ours are
// valid names, which the other schemes leave as they are).
func fastFormat(format expfmt.Format) bool {
	switch format.FormatType() {
	case expfmt.TypeTextPlain, expfmt.TypeProtoDelim:
		return format.ToEscapingScheme() != model.DotsEscaping
	}
	return false
}

// collectWithin collects one scrape's metrics and reserves their memory
// (perSample bytes a sample in the format served) against
// --web.max-requests-memory; false when the reservation was refused (the
// 503 is written). The caller releases what it reserved.
func (m *metricsHandler) collectWithin(ctx context.Context, w http.ResponseWriter, r *http.Request, perSample int) (metrics [][]prometheus.Metric, n int, release func(), ok bool) {
	metrics = m.collect(ctx)
	for _, ms := range metrics {
		n += len(ms)
		for _, x := range ms {
			if b, ok := x.(*expo.Block); ok {
				n += b.Len() - 1
			}
		}
	}
	release, ok = m.reserve(w, m.ownCost+scrapeCost(n, perSample, acceptsGzip(r)))
	return metrics, n, release, ok
}

// serveFast writes the text format or the delimited protobuf as promhttp
// would, but the collectors' samples go straight to the response
// (internal/expo): building client_golang's metric families cost most of
// a text scrape's time and twenty times its memory in protobuf. Most of
// the exporter's parts' metrics are expo samples too; a registry gathers
// only what is not (probe results, client_golang's go_* and promhttp_*).
func (m *metricsHandler) serveFast(ctx context.Context, w http.ResponseWriter, r *http.Request, format expfmt.Format) {
	metrics, _, release, ok := m.collectWithin(ctx, w, r, fastSampleCost)
	if !ok {
		return
	}
	defer release()
	w.Header().Set("Content-Type", string(format))
	var out io.Writer = w
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		gz := getGzip()
		gz.Reset(w)
		defer func() {
			gz.Close()
			putGzip(gz)
		}()
		out = gz
	}
	if r.Method == http.MethodHead {
		return
	}
	if err := m.writeFast(out, metrics, format.FormatType() == expfmt.TypeProtoDelim); err != nil {
		m.logger.Debug("writing /metrics", "err", err) // the client went away
	}
}

// writeFast writes a scrape's metrics as the text exposition or, with
// proto, the delimited protobuf one: the expo samples straight, the rest
// (probe results, go_* and promhttp_*) through a registry. TestExpositionMatchesClientGolang
// compares what it writes with client_golang's output for every fixture
// host.
func (m *metricsHandler) writeFast(out io.Writer, metrics [][]prometheus.Metric, proto bool) error {
	fams, other := expo.Group(metrics...)
	var gathered []*dto.MetricFamily
	if len(other) > 0 {
		reg := prometheus.NewRegistry()
		reg.MustRegister(metricList(other))
		var err error
		if gathered, err = reg.Gather(); err != nil {
			// As promhttp.ContinueOnError: log, serve what was gathered.
			m.logger.Error("gathering metrics", "err", err)
		}
	}
	write := expo.WriteText
	if proto {
		write = expo.WriteProto
	}
	err := write(out, fams, gathered)
	// A sample expo left out is a collector's bug that every scrape
	// meets again: counted in rdma_exposition_rejected_samples_total,
	// logged once per reason.
	for _, r := range expo.Unreported() {
		m.logger.Warn("exposition: a sample client_golang's registry would refuse is left out of /metrics",
			"reason", r.Reason.String(), "sample", r.Sample,
			"hint", "a collector bug; every such sample is counted in rdma_exposition_rejected_samples_total; logged once")
	}
	return err
}

// gzipWriters are reused: a gzip.Writer's compressor state is hundreds
// of kilobytes, and a new one per scrape was the scrape's largest
// allocation. A channel rather than a sync.Pool, which the garbage
// collector empties every other cycle (every few scrapes here): it keeps
// as many writers as scrapes usually run at once (one per Prometheus),
// and a burst beyond that makes its own. BestSpeed: compression was half
// of a scrape's CPU at the default level; level 1 costs about a third
// less for a 15% larger response (dgx-h100: 14.4 kB instead of 12.5 kB of
// 105 kB). klauspost/compress's gzip instead of compress/gzip (only its
// flate and gzip packages are linked, not its zstd): the same format and
// size at level 1 (14.7 kB of the 110 kB dgx-h100 scrape) in 106 µs
// instead of 253 µs (go test -bench on that body, this machine). expo's
// writer frames that compressor's deflate as gzip itself, so that it can
// splice in a Block's families compressed once (a fabric's).
var gzipWriters = make(chan *expo.GzipWriter, 2)

func getGzip() *expo.GzipWriter {
	select {
	case w := <-gzipWriters:
		return w
	default:
		return expo.NewGzipWriter()
	}
}

func putGzip(w *expo.GzipWriter) {
	select {
	case gzipWriters <- w:
	default:
	}
}

// acceptsGzip reports whether Accept-Encoding offers gzip (with a q other
// than 0).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// metricsAppender is a part that hands over its metrics as a slice.
type metricsAppender interface {
	AppendMetrics([]prometheus.Metric) []prometheus.Metric
}

// collect returns what a collector sends: without a goroutine and a
// channel where the collector appends.
func collect(c prometheus.Collector) []prometheus.Metric {
	if a, ok := c.(metricsAppender); ok {
		return a.AppendMetrics(nil)
	}
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var out []prometheus.Metric
	for m := range ch {
		out = append(out, m)
	}
	return out
}

// metricList is a collector of ready metrics: a part (build info), or
// those of a scrape that are not expo samples (probe results, go_*,
// promhttp_*), for the text path's registry.
type metricList []prometheus.Metric

// AppendMetrics appends the metrics to out.
func (l metricList) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	return append(out, l...)
}

func (l metricList) Describe(chan<- *prometheus.Desc) {}

func (l metricList) Collect(ch chan<- prometheus.Metric) {
	for _, m := range l {
		ch <- m
	}
}

// partsRegisterer is a prometheus.Registerer that adds what is
// registered to the server's parts, which every scrape collects: where
// promhttp.InstrumentMetricHandler registers its promhttp_* counters.
// No registry lives between scrapes (writeFast gathers one per scrape
// for what is not an expo sample), so there is nothing else to register
// with.
type partsRegisterer struct{ parts *[]prometheus.Collector }

func (r partsRegisterer) Register(c prometheus.Collector) error {
	*r.parts = append(*r.parts, c)
	return nil
}

func (r partsRegisterer) MustRegister(cs ...prometheus.Collector) {
	*r.parts = append(*r.parts, cs...)
}

// Unregister removes nothing: a part stays for the server's life (and
// some parts, such as a metricList, are not comparable to find).
func (partsRegisterer) Unregister(prometheus.Collector) bool { return false }

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
