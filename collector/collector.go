// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package collector turns host snapshots into Prometheus metrics. The
// collectors are listed in one table (Table) with their --collector.NAME
// flags (AddFlags); the Aggregator takes one host.Snapshot per collection,
// runs the enabled collectors on it concurrently under a deadline and
// reports each one's success, duration and error count, so one failing
// collector never breaks the scrape and no source is read twice.
package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// Collector produces metrics for one concern from a host snapshot.
type Collector interface {
	// Update adds its metrics to out. It returns every error met
	// (errors.Join); metrics it could read are still added.
	Update(ctx context.Context, snap *host.Snapshot, out *sink) error
}

// sink is where a collector puts the metrics of one collection: a slice
// the Aggregator takes whole. A channel
// cost two operations a metric and a goroutine to drain it (4% of a
// dgx-h100 scrape). Each collection gives each collector its own sink, so
// one that misses the deadline writes only to a sink nobody reads.
//
// The metrics go into chunks that are never copied: one slice grown by
// append copied a dgx-h100 collection's thousand metrics about ten times
// over. Group takes the chunks as they are.
type sink struct {
	parts [][]prometheus.Metric // full chunks, and kept slices added whole
	ms    []prometheus.Metric   // the chunk being filled
	size  int                   // the last chunk's capacity
}

// Chunks start small, since most collectors make a few metrics, and
// double up to maxChunk (8 KiB of interfaces).
const (
	minChunk = 16
	maxChunk = 512
)

func (s *sink) add(m prometheus.Metric) {
	if len(s.ms) == cap(s.ms) {
		if len(s.ms) > 0 {
			s.parts = append(s.parts, s.ms)
		}
		s.size = min(max(2*s.size, minChunk), maxChunk)
		s.ms = make([]prometheus.Metric, 0, s.size)
	}
	s.ms = append(s.ms, m)
}

// addAll adds ms whole, as a part of its own that is never appended to:
// a slice kept across collections (rendered) is shared, not copied.
func (s *sink) addAll(ms []prometheus.Metric) {
	if len(ms) == 0 {
		return
	}
	if len(s.ms) > 0 {
		s.parts = append(s.parts, s.ms)
	}
	s.parts = append(s.parts, slices.Clip(ms))
	s.ms = s.ms[len(s.ms):] // the chunk's room left goes on after ms
}

// chunks is the sink's metrics, in the order added.
func (s *sink) chunks() [][]prometheus.Metric {
	if len(s.ms) == 0 {
		return s.parts
	}
	return append(s.parts, s.ms)
}

// all is the sink's metrics in one slice, in the order added.
func (s *sink) all() []prometheus.Metric {
	cs := s.chunks()
	if len(cs) == 1 {
		return cs[0]
	}
	return slices.Concat(cs...)
}

func (s *sink) gauge(d *expo.Desc, v float64, labels ...string) {
	s.add(expo.Gauge(d, v, labels...))
}

func (s *sink) counter(d *expo.Desc, v float64, labels ...string) {
	s.add(expo.Counter(d, v, labels...))
}

// Env is what a collector is built with: the host it reads, what the
// operator expects, and a logger already labelled with the collector's
// name.
type Env struct {
	Host   *host.Host
	Config *config.Config
	Logger *slog.Logger
	// Workers, when set, reports the server's background workers
	// (worker.Group.Reports): their ages and health are every scrape's.
	Workers func() []worker.Report
}

// Aggregator runs the enabled collectors.
type Aggregator struct {
	host    *host.Host
	workers func() []worker.Report
	// now is the clock of the workers' ages (time.Now; tests set it).
	now        func() time.Time
	names      []string
	collectors map[string]Collector
	logger     *slog.Logger
	timeout    time.Duration
	errLog     *onceLogger

	// flightMu guards flight, the collection in progress (nil when none).
	flightMu sync.Mutex
	flight   *flight
}

// flight is one collection that concurrent scrapes share: they wait for it
// and reuse its metrics instead of each reading the whole host tree again.
type flight struct {
	done    chan struct{} // closed when metrics is complete
	metrics [][]prometheus.Metric
	waiters int // scrapes sharing it besides the one that started it (tests)
}

// New builds every collector that flags enable, in Table order. only, if
// non-empty, restricts the set (tests and benchmarks).
func New(env Env, flags *Flags, timeout time.Duration, only ...string) (*Aggregator, error) {
	want := map[string]bool{}
	for _, n := range only {
		if _, ok := lookup(n); !ok {
			return nil, fmt.Errorf("unknown collector %q", n)
		}
		want[n] = true
	}
	built := map[string]Collector{}
	for _, s := range Table {
		if len(only) > 0 && !want[s.Name] || len(only) == 0 && !flags.Enabled(s.Name) {
			continue
		}
		cenv := env
		cenv.Logger = env.Logger.With("collector", s.Name)
		c, err := s.New(cenv, flags)
		if err != nil {
			return nil, fmt.Errorf("collector %s: %w", s.Name, err)
		}
		built[s.Name] = c
	}
	a := newAggregator(env.Host, env.Logger, timeout, built)
	a.workers = env.Workers
	return a, nil
}

// newAggregator runs collectors by name on snapshots of h.
func newAggregator(h *host.Host, logger *slog.Logger, timeout time.Duration, collectors map[string]Collector) *Aggregator {
	a := &Aggregator{host: h, now: time.Now, collectors: collectors, logger: logger, timeout: timeout, errLog: newOnceLogger(logger, 1024)}
	for name := range collectors {
		a.names = append(a.names, name)
	}
	sort.Strings(a.names)
	return a
}

// Names lists the enabled collectors.
func (a *Aggregator) Names() []string { return a.names }

var (
	successDesc      = expo.NewDesc("rdma_scrape_collector_success", "Whether a collector succeeded (1) or met errors or its deadline (0).", "collector")
	durationDesc     = expo.NewDesc("rdma_scrape_collector_duration_seconds", "Duration of a collector's scrape in seconds.", "collector")
	errorsDesc       = expo.NewDesc("rdma_scrape_collector_errors", "Read and parse errors a collector met in this scrape; their series are left out.", "collector")
	refusedAttrsDesc = expo.NewDesc("rdma_scrape_collector_refused_attributes",
		"Attributes the driver refused on an earlier read (EINVAL, EACCES, EOPNOTSUPP) and that are not asked again.", "collector")
	stuckDesc      = expo.NewDesc("rdma_host_reads_stuck", "Host files whose read has not returned for "+hostfs.DefaultStuckAfter.String()+" or more (a wedged driver or firmware).")
	keptDesc       = expo.NewDesc("rdma_host_kept_descriptors", "Host files kept open and re-read in place (a bounded number; the rest are opened on each read).")
	refusedDesc    = expo.NewDesc("rdma_host_reads_refused_total", "Reads skipped because an earlier read of the same file is stuck; their series are left out.")
	suppressedDesc = expo.NewDesc("rdma_scrape_error_logs_suppressed_total",
		"Collector errors logged at debug level only, because the same message was logged at warning level before.")
	liveDesc    = expo.NewDesc("rdma_host_live_kernel", "1 when the tree read is the running kernel's and the live-kernel sources are asked; reason says why (--host.live).", "reason")
	ageDesc     = expo.NewDesc("rdma_snapshot_age_seconds", "Age of the state a scrape served, by slow source or background worker, in seconds.", "source")
	healthyDesc = expo.NewDesc("rdma_background_worker_healthy", "1 while a background worker runs and its latest round succeeded; reason says why not.", "worker", "reason")
)

// Bind returns a prometheus.Collector that scrapes under ctx, whose deadline
// (if any) bounds every collector.
func (a *Aggregator) Bind(ctx context.Context) prometheus.Collector { return bound{a, ctx} }

type bound struct {
	a   *Aggregator
	ctx context.Context
}

func (b bound) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*expo.Desc{successDesc, durationDesc, errorsDesc, refusedAttrsDesc, ageDesc, healthyDesc, liveDesc, stuckDesc, keptDesc, refusedDesc, suppressedDesc} {
		ch <- d.Prometheus()
	}
}

func (b bound) Collect(ch chan<- prometheus.Metric) { b.a.Collect(b.ctx, ch) }

// Collect sends the metrics of one collection to ch. Scrapes that arrive
// while a collection runs share it (singleflight): a burst of 32 parallel
// scrapes reads the host once, not 32 times. The collection runs under the
// first scrape's deadline, detached from its cancellation, so a client that
// hangs up does not fail the collection for the others. A scrape whose own
// deadline ends before the shared collection does reports every collector
// failed rather than waiting past its deadline. Constant metrics are
// immutable, so sharing them between responses is safe.
func (a *Aggregator) Collect(ctx context.Context, ch chan<- prometheus.Metric) {
	for _, ms := range a.Metrics(ctx) {
		// A registry takes samples: a collector's rendered Block (the
		// fabric's) is made into its samples again.
		for _, m := range expo.Expand(ms) {
			ch <- m
		}
	}
}

// Metrics returns the metrics of one collection, shared as Collect
// shares it, in parts (one per collector: they are not copied into one
// slice); the caller must not change them. The metrics handler's text
// path writes them directly (internal/serve/expo).
func (a *Aggregator) Metrics(ctx context.Context) [][]prometheus.Metric {
	a.flightMu.Lock()
	f := a.flight
	if f != nil {
		f.waiters++
		a.flightMu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return a.missed(ctx)
		}
	} else {
		f = &flight{done: make(chan struct{})}
		a.flight = f
		a.flightMu.Unlock()
		shared, cancel := detach(ctx)
		f.metrics = a.collectOnce(shared)
		cancel()
		a.flightMu.Lock()
		a.flight = nil
		a.flightMu.Unlock()
		close(f.done)
	}
	return f.metrics
}

// waiters reports how many scrapes share the collection in progress.
func (a *Aggregator) waiters() int {
	a.flightMu.Lock()
	defer a.flightMu.Unlock()
	if a.flight == nil {
		return 0
	}
	return a.flight.waiters
}

// detach keeps ctx's deadline and values but not its cancellation.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	d := context.WithoutCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(d, deadline)
	}
	return d, func() {}
}

// missed reports every collector failed for a scrape that gave up waiting
// for the shared collection.
func (a *Aggregator) missed(ctx context.Context) [][]prometheus.Metric {
	var out []prometheus.Metric
	for _, name := range a.names {
		a.errLog.log(name, fmt.Errorf("collector %s: scrape deadline passed while waiting for the shared collection: %w", name, ctx.Err()))
		out = append(out, expo.Gauge(successDesc, 0, name), expo.Gauge(errorsDesc, 1, name))
	}
	return [][]prometheus.Metric{out}
}

// collectOnce runs one collection and returns its metrics: every
// collector concurrently, one goroutine each, each one's metrics in its
// own sink, then the aggregator's own. A collector that misses the
// deadline is reported as failed and its late metrics are dropped (its
// goroutine finishes into a sink nobody reads), so a hung sysfs read
// cannot hold the scrape.
func (a *Aggregator) collectOnce(ctx context.Context) [][]prometheus.Metric {
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	// The host is read under a deadline a tenth earlier than the
	// collectors': a source cut short by a wedged read returns what it
	// has, and the collector still sends it in time, so one stuck file
	// costs its own series, not every device's.
	readCtx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		readCtx, cancel = context.WithDeadline(ctx, dl.Add(-time.Until(dl)/10))
		defer cancel()
	}
	snap := a.host.Snapshot()
	begin := time.Now()
	type result struct {
		i        int
		out      *sink
		err      error
		duration time.Duration
	}
	// Buffered for every collector: one that finishes after the deadline
	// sends without a receiver and exits.
	done := make(chan result, len(a.names))
	for i, name := range a.names {
		c := a.collectors[name]
		out := &sink{}
		hostfs.Go(func() {
			start := time.Now()
			err := update(c, readCtx, snap, out)
			done <- result{i, out, err, time.Since(start)}
		})
	}
	results := make([]*result, len(a.names))
wait:
	for range a.names {
		select {
		case r := <-done:
			results[r.i] = &r
		case <-ctx.Done():
			break wait
		}
	}
	ages := a.host.Ages()
	var workers []worker.Report
	if a.workers != nil {
		workers = a.workers()
	}
	// A background worker's age is its own latest value's: it replaces
	// the host's entry of the same source, so each source has one series.
	now := a.now()
	for _, w := range workers {
		if !w.Latest.IsZero() {
			ages[w.Name] = now.Sub(w.Latest)
		}
	}
	// The collectors' status series go into a part of their own, after
	// every collector's chunks.
	own := make([]prometheus.Metric, 0, 4*len(a.names)+len(ages)+len(workers)+5)
	parts := make([][]prometheus.Metric, 0, 2*len(a.names)+1)
	for i, name := range a.names {
		r := results[i]
		if r == nil {
			// The collector's goroutine still owns its sink: the late
			// metrics are dropped.
			err := fmt.Errorf("collector %s did not finish before the scrape deadline: %w", name, ctx.Err())
			own = a.status(own, name, err, time.Since(begin))
			continue
		}
		parts = append(parts, r.out.chunks()...)
		own = a.status(own, name, r.err, r.duration)
	}
	for source, age := range ages {
		own = append(own, expo.Gauge(ageDesc, age.Seconds(), source))
	}
	for _, w := range workers {
		own = append(own, expo.Gauge(healthyDesc, b2f(w.Problem == ""), w.Name, w.Problem))
	}
	live := a.host.Live()
	st := a.host.FS().ReadStats()
	own = append(own,
		expo.Gauge(liveDesc, b2f(live.On), live.Reason),
		expo.Gauge(stuckDesc, float64(st.Stuck)),
		expo.Gauge(keptDesc, float64(hostfs.KeptFiles())),
		expo.Counter(refusedDesc, float64(st.Refused)),
		expo.Counter(suppressedDesc, float64(a.errLog.suppressed.Load())))
	return append(parts, own)
}

// status appends a collector's success, duration and error count.
func (a *Aggregator) status(out []prometheus.Metric, name string, err error, duration time.Duration) []prometheus.Metric {
	// A refusal remembered from an earlier read (hostfs.ErrRefused) is no
	// new failure: counted apart, it keeps a restricted function or an
	// unimplemented counter from failing the collector on every scrape.
	// The scrape that met it first counted and logged it as an error.
	var errs []error
	refused := 0
	for _, e := range flatten(err) {
		if errors.Is(e, hostfs.ErrRefused) {
			refused++
			continue
		}
		errs = append(errs, e)
	}
	success := 1.0
	if len(errs) > 0 {
		success = 0
		for _, e := range errs {
			a.errLog.log(name, e)
		}
	}
	return append(out,
		expo.Gauge(successDesc, success, name),
		expo.Gauge(durationDesc, duration.Seconds(), name),
		expo.Gauge(errorsDesc, float64(len(errs)), name),
		expo.Gauge(refusedAttrsDesc, float64(refused), name))
}

// flatten unpacks errors.Join trees into their leaves.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// desc is the one metric descriptor helper; name is the full metric name,
// so every name is greppable in the source.
func desc(name, help string, labels ...string) *expo.Desc {
	return expo.NewDesc(name, help, labels...)
}

// update runs one collector's Update; a panic (a collector's bug) is its
// error, and its metrics are dropped: the other collectors' scrape goes
// on and the server lives, as a diagnose check's panic is a skip.
func update(c Collector, ctx context.Context, snap *host.Snapshot, out *sink) (err error) {
	defer func() {
		if r := recover(); r != nil {
			*out = sink{}
			err = fmt.Errorf("collector panicked (a bug; please report it): %v", r)
		}
	}()
	return c.Update(ctx, snap, out)
}
