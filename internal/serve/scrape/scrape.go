// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package scrape answers /metrics: one collection under the request's
// deadline (--scrape.timeout, or Prometheus's shorter one), bounded in
// parallel scrapes and in the memory they hold while they answer, written
// in the text format or the delimited protobuf straight from the samples
// (internal/serve/expo, gzip through a small writer pool) and in the protobuf
// debugging formats through a client_golang registry. Beside the
// collectors' metrics it serves the server's parts (build info, the
// diagnosis, the probe results), the exporter's own series (go_*,
// process_*, promhttp_*, unless they are off), and what the answer left
// out or cut (rdma_exposition_rejected_samples_total,
// rdma_label_values_limited_total).
package scrape

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/procself"
)

// Options are what a /metrics handler is built from, once, in main. A
// zero limit is no limit.
type Options struct {
	// Collect returns one scrape's metrics of the collectors, collected
	// under ctx (whose deadline is the scrape's), in parts:
	// collector.Aggregator.Metrics. The parts may be shared with
	// concurrent scrapes and are never changed. Required.
	Collect func(ctx context.Context) [][]prometheus.Metric
	// Parts are collected beside the collectors on every scrape: build
	// info (BuildInfo), rdma_diagnose_status, the probe results.
	Parts []prometheus.Collector
	// Logger logs what a scrape fails to write or gather, and each kind
	// of sample expo leaves out (once). Nil: nothing is logged.
	Logger *slog.Logger
	// Timeout is one scrape's deadline (--scrape.timeout); a shorter
	// X-Prometheus-Scrape-Timeout-Seconds takes precedence.
	Timeout time.Duration
	// MaxRequests bounds the parallel scrapes (--web.max-requests);
	// further ones get 503.
	MaxRequests int
	// MaxMemory bounds the memory parallel scrapes hold while they answer
	// (--web.max-requests-memory), in bytes; a scrape that would exceed
	// it gets 503, but one scrape alone is always served.
	MaxMemory int64
	// WriteTimeout is the server's (http.Server.WriteTimeout, 0: none):
	// the write deadlines of the minimum transfer rate never pass it.
	WriteTimeout time.Duration
	// ExporterMetrics adds the exporter's own go_*, process_* and
	// promhttp_* series (off with --web.disable-exporter-metrics).
	ExporterMetrics bool
}

// New returns the /metrics handler.
func New(o Options) http.Handler {
	_, h := newHandler(o)
	return h
}

// newHandler returns the handler and what serves it: the handler itself,
// or with the exporter's own series promhttp's instrumentation around it.
func newHandler(o Options) (*handler, http.Handler) {
	m := &handler{collectHost: o.Collect, logger: o.Logger, timeout: o.Timeout, debug: make(chan struct{}, debugScrapes), debugWait: make(chan struct{}, debugWaiting), minRate: minTransferRate, writeTimeout: o.WriteTimeout}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxRequests > 0 {
		m.inFlight = make(chan struct{}, o.MaxRequests)
	}
	if o.MaxMemory > 0 {
		m.memory = &memoryBudget{limit: o.MaxMemory}
	}
	// A copy: the parts grow here and with promhttp's counters below.
	m.parts = append(slices.Clip(o.Parts), labelLimits{}, expoRejections{})
	if !o.ExporterMetrics {
		return m, m
	}
	// The exporter's own series: go_* and promhttp_* are client_golang's
	// own (its Go collector, promhttp's instrumentation), registered once
	// in a registry of their own that each scrape gathers (own): a
	// registry made per scrape would collect them twice, each through a
	// goroutine and a channel. process_* comes from internal/serve/procself,
	// whose package comment says why.
	m.parts = append(m.parts, procself.New())
	m.own = prometheus.NewRegistry()
	m.own.MustRegister(collectors.NewGoCollector())
	m.ownCost = ownSeriesCost
	return m, promhttp.InstrumentMetricHandler(m.own, m)
}

// handler serves one scrape, its collection under this request's
// deadline: in the text format and protobuf straight from the samples
// (serveFast), in another format through a registry of its own. Scrapes
// are bounded in number (inFlight) and in the memory they hold while
// they answer (memory).
type handler struct {
	collectHost func(context.Context) [][]prometheus.Metric
	logger      *slog.Logger
	parts       []prometheus.Collector
	timeout     time.Duration
	inFlight    chan struct{}
	// debug bounds the scrapes in a protobuf debugging format (or with
	// names escaped with dots) apart from Prometheus' formats
	// (debugScrapes).
	debug, debugWait chan struct{}
	memory           *memoryBudget // nil: no limit
	// minRate is the least a client must read (bytes a second, over
	// rateWindow) before it is dropped (minTransferRate; 0: never).
	minRate      int64
	writeTimeout time.Duration
	// ownCost is what the parts cost a scrape beyond their samples
	// (ownSeriesCost with the exporter's own series, else 0).
	ownCost int64
	// own gathers client_golang's own series (go_*, promhttp_*) each
	// scrape; nil without the exporter's own series.
	own *prometheus.Registry
}

func (m *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
	fast := fastFormat(format)
	if fast && m.inFlight != nil {
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
	if fast {
		m.serveFast(ctx, w, r, format)
		return
	}
	// The protobuf debugging formats (text and compact), or names escaped
	// with dots: a few at a time, the next ones waiting, apart from
	// Prometheus' formats, so that they never take the slots or the
	// memory its scrapes need (debugScrapes).
	select {
	case m.debugWait <- struct{}{}:
		defer func() { <-m.debugWait }()
	default:
		http.Error(w, fmt.Sprintf("too many parallel scrapes in a protobuf debugging format (%d, %d waiting)", debugScrapes, debugWaiting), http.StatusServiceUnavailable)
		return
	}
	select {
	case m.debug <- struct{}{}:
		defer func() { <-m.debug }()
	case <-ctx.Done():
		http.Error(w, "timed out waiting for another scrape in a protobuf debugging format", http.StatusServiceUnavailable)
		return
	}
	if debugFormat(format) {
		m.serveDebug(ctx, w, r, format)
		return
	}
	// Names escaped with dots: client_golang's path, which takes the same
	// metrics, a Block's made again (Expand), at about 3,200 bytes a
	// sample.
	metrics, c, release, ok := m.collectWithin(ctx, w, r, kindRegistry)
	if !ok {
		return
	}
	defer release()
	all := make(metricList, 0, c.samples+c.blockSamples)
	for _, ms := range metrics {
		all = append(all, expo.Expand(ms)...)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(all)
	var g prometheus.Gatherer = reg
	if m.own != nil {
		g = prometheus.Gatherers{reg, m.own}
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	}).ServeHTTP(w, r)
}

// collect returns the metrics of the (shared) collection and of the
// server's parts, in groups. The collection's metrics are shared with
// concurrent scrapes: the parts' are grouped beside them, never appended
// to them (Clip: the append copies the shared list of slices).
func (m *handler) collect(ctx context.Context) [][]prometheus.Metric {
	metrics := slices.Clip(m.collectHost(ctx))
	for _, c := range m.parts {
		metrics = append(metrics, collect(c))
	}
	return metrics
}

// headOnly answers a HEAD with the GET's status and headers: the body
// is dropped here, because writing it to the connection fails over HTTP/2
// (the request is over) and promhttp logs every failed metric family (110
// ERROR lines a HEAD).
type headOnly struct{ http.ResponseWriter }

func (h headOnly) Write(p []byte) (int, error) { return len(p), nil }

// Unwrap lets http.ResponseController reach the connection.
func (h headOnly) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// fastFormat reports whether a scrape in format is written straight from
// the samples (internal/serve/expo): the text format and the delimited
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

// debugFormat reports whether format is a protobuf debugging format
// (encoding=text, encoding=compact-text), which expo.WriteDebug writes.
func debugFormat(format expfmt.Format) bool {
	switch format.FormatType() {
	case expfmt.TypeProtoText, expfmt.TypeProtoCompact:
		return true
	}
	return false
}

// collectWithin collects one scrape's metrics and reserves what the
// scrape holds while it answers (scrapeCost, for its kind of format)
// against --web.max-requests-memory; false when the reservation was
// refused (the 503 is written). The caller releases what it reserved.
func (m *handler) collectWithin(ctx context.Context, w http.ResponseWriter, r *http.Request, kind formatKind) (metrics [][]prometheus.Metric, c counts, release func(), ok bool) {
	metrics = m.collect(ctx)
	c = countOf(metrics)
	release, ok = m.reserve(w, m.ownCost+scrapeCost(c, kind, acceptsGzip(r)))
	return metrics, c, release, ok
}

// serveFast writes the text format or the delimited protobuf as promhttp
// would, but the collectors' samples go straight to the response
// (internal/serve/expo): building client_golang's metric families cost most of
// a text scrape's time and twenty times its memory in protobuf. Most of
// the exporter's parts' metrics are expo samples too; a registry gathers
// only what is not (probe results, client_golang's go_* and promhttp_*).
func (m *handler) serveFast(ctx context.Context, w http.ResponseWriter, r *http.Request, format expfmt.Format) {
	m.serveStreamed(ctx, w, r, format, kindFast, func(out io.Writer, fams map[string]*expo.Family, gathered []*dto.MetricFamily) error {
		if format.FormatType() == expfmt.TypeProtoDelim {
			return expo.WriteProto(out, fams, gathered)
		}
		return expo.WriteText(out, fams, gathered)
	})
}

// serveDebug writes a protobuf debugging format streamed as the fast
// formats are (expo.WriteDebug): a series at a time, a Block's families
// included.
func (m *handler) serveDebug(ctx context.Context, w http.ResponseWriter, r *http.Request, format expfmt.Format) {
	m.serveStreamed(ctx, w, r, format, kindDebug, func(out io.Writer, fams map[string]*expo.Family, gathered []*dto.MetricFamily) error {
		return expo.WriteDebug(out, fams, gathered, format)
	})
}

// serveStreamed reserves the scrape's memory, sets the headers, and
// writes the scrape with write, gzipped when asked, through a writer that
// drops a client below the minimum transfer rate (slowWriter).
func (m *handler) serveStreamed(ctx context.Context, w http.ResponseWriter, r *http.Request, format expfmt.Format, kind formatKind,
	write func(io.Writer, map[string]*expo.Family, []*dto.MetricFamily) error) {
	start := time.Now()
	metrics, _, release, ok := m.collectWithin(ctx, w, r, kind)
	if !ok {
		return
	}
	defer release()
	w.Header().Set("Content-Type", string(format))
	var out io.Writer = m.rateLimited(w, start)
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		gz := getGzip()
		gz.Reset(out)
		defer func() {
			gz.Close()
			putGzip(gz)
		}()
		out = gz
	}
	if r.Method == http.MethodHead {
		return
	}
	if err := m.writeFast(out, metrics, write); err != nil {
		m.logger.Debug("writing /metrics", "err", err) // the client went away, or read too slowly
	}
}

// writeFast writes a scrape's metrics as the text exposition or, with
// proto, the delimited protobuf one: the expo samples straight, the rest
// (probe results) through a registry made for the scrape, and go_* and
// promhttp_* through the exporter's own (m.own). TestExpositionMatchesClientGolang
// compares what it writes with client_golang's output for every fixture
// host.
func (m *handler) writeFast(out io.Writer, metrics [][]prometheus.Metric, write func(io.Writer, map[string]*expo.Family, []*dto.MetricFamily) error) error {
	fams, other := expo.Group(metrics...)
	var gathered []*dto.MetricFamily
	gather := func(g prometheus.Gatherer) {
		mfs, err := g.Gather()
		if err != nil {
			// As promhttp.ContinueOnError: log, serve what was gathered.
			m.logger.Error("gathering metrics", "err", err)
		}
		gathered = append(gathered, mfs...)
	}
	if len(other) > 0 {
		reg := prometheus.NewRegistry()
		reg.MustRegister(metricList(other))
		gather(reg)
	}
	if m.own != nil {
		gather(m.own)
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

// gzipWriters are reused: a gzip.Writer's compressor state is hundreds of
// kilobytes, a scrape's largest allocation if made anew. A channel rather
// than a sync.Pool, which the garbage collector empties every other cycle
// (every few scrapes here): it keeps as many writers as scrapes usually
// run at once (one per Prometheus), and a burst beyond that makes its
// own. BestSpeed: at the default level compression is half of a scrape's
// CPU, and level 1 costs about a third less for a slightly larger
// response. klauspost/compress's gzip instead of compress/gzip (only its
// flate and gzip packages are linked, not its zstd): the same format and
// size at level 1 in less than half the time
// (docs/measurements.md#scrape). expo's writer frames that compressor's
// deflate as gzip itself, so that it can splice in a Block's families
// compressed once (a fabric's).
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

// rateWriter writes an answer in chunks of rateChunk at most, each under
// a write deadline of its own (http.ResponseController), so that a client
// below the minimum transfer rate fails the write and the scrape ends,
// releasing what it holds. The deadlines never pass end, the answer's
// deadline as the server set it (its WriteTimeout).
type rateWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	window time.Duration
	end    time.Time // zero: none
}

// rateLimited returns w under the minimum transfer rate.
func (m *handler) rateLimited(w http.ResponseWriter, start time.Time) io.Writer {
	if m.minRate <= 0 {
		return w
	}
	rw := &rateWriter{w: w, rc: http.NewResponseController(w), window: time.Duration(rateChunk * int64(time.Second) / m.minRate)}
	if m.writeTimeout > 0 {
		rw.end = start.Add(m.writeTimeout)
	}
	return rw
}

func (rw *rateWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), rateChunk)]
		deadline := time.Now().Add(rw.window)
		if !rw.end.IsZero() && deadline.After(rw.end) {
			deadline = rw.end
		}
		// ErrNotSupported (a writer that is not a connection's, as in
		// tests): the server's write timeout alone bounds the answer.
		_ = rw.rc.SetWriteDeadline(deadline)
		n, err := rw.w.Write(chunk)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}
