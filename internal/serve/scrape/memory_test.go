// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/collector"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

const protobufAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"

// fixtureOptions are a handler's options for a fixture host: its default
// collectors and build info, no limits, no exporter's own series.
func fixtureOptions(t testing.TB, name string) Options {
	t.Helper()
	p, err := hostfs.Paths{Rootfs: filepath.Join("..", "..", "..", "fixtures", "hosts", name)}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	agg, err := collector.New(collector.Env{Host: rdmahost.New(rdmahost.Options{Paths: p}), Config: &config.Config{}, Logger: logger},
		collector.DefaultFlags(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Collect: agg.Metrics, Parts: []prometheus.Collector{BuildInfo("rdma_doctor")}, Logger: logger, Timeout: 10 * time.Second}
}

func fixtureHandler(t testing.TB, name string) *handler {
	t.Helper()
	m, _ := newHandler(fixtureOptions(t, name))
	return m
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func scrapeOnce(t testing.TB, h http.Handler, accept string) int {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", accept)
	w := &discardResponse{h: http.Header{}}
	h.ServeHTTP(w, req)
	return w.n
}

type discardResponse struct {
	h    http.Header
	code int
	n    int
}

func (d *discardResponse) Header() http.Header  { return d.h }
func (d *discardResponse) WriteHeader(code int) { d.code = code }
func (d *discardResponse) Write(p []byte) (int, error) {
	d.n += len(p)
	return len(p), nil
}

// scrapeSamples is how many samples a scrape of m writes: the shared
// collection's and the parts'.
func scrapeSamples(m *handler) int {
	n := 0
	for _, ms := range m.collect(context.Background()) {
		n += len(ms)
	}
	return n
}

// allocsOf returns the bytes allocated while n scrapes in format accept
// run at once.
func allocsOf(t *testing.T, m *handler, accept string, n int) uint64 {
	t.Helper()
	runtime.GC()
	before := heapAllocs()
	var wg sync.WaitGroup
	sizes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); sizes[i] = scrapeOnce(t, m, accept) }()
	}
	wg.Wait()
	allocs := heapAllocs() - before
	for i, size := range sizes {
		if size < 10000 {
			t.Fatalf("%s: scrape %d wrote %d bytes", accept, i, size)
		}
	}
	return allocs
}

// Twenty concurrent protobuf scrapes cost the memory of twenty text ones
// (they cost 25 times as much through client_golang's registry: 17.3 MB
// against 0.68 MB on dgx-h100), and each scrape stays within the cost the
// memory budget reserves for it (scrapeCost), in every format. Measured
// as bytes allocated (runtime/metrics), which the collection shared by
// the scrapes (made before, by the warm-up) does not count in.
func TestScrapeMemory(t *testing.T) {
	m := fixtureHandler(t, "dgx-h100")
	n := scrapeSamples(m)
	if n < 1000 {
		t.Fatalf("dgx-h100: %d samples", n)
	}
	// Warm-up: the collection that the scrapes below share.
	for _, accept := range []string{"text/plain", protobufAccept, protoTextAccept} {
		scrapeOnce(t, m, accept)
	}
	const scrapes = 20
	text := allocsOf(t, m, "text/plain;version=0.0.4", scrapes)
	proto := allocsOf(t, m, protobufAccept, scrapes)
	slow := allocsOf(t, m, protoTextAccept, scrapes)
	t.Logf("%d samples; %d concurrent scrapes allocate: text %d, protobuf %d, protobuf text (client_golang) %d bytes", n, scrapes, text, proto, slow)
	if proto > 2*text {
		t.Errorf("%d protobuf scrapes allocate %d bytes, more than twice %d text ones (%d)", scrapes, proto, scrapes, text)
	}
	fast := scrapes * uint64(scrapeCost(counts{samples: n}, kindFast, false))
	if text > fast || proto > fast {
		t.Errorf("%d scrapes allocate %d (text), %d (protobuf) bytes, more than the %d the budget reserves", scrapes, text, proto, fast)
	}
	// The debugging formats allocate per series what they drop at once
	// (TestScrapeMemoryFabric measures what they hold); through
	// client_golang's registry they allocated 2.9 MB a scrape.
	if limit := scrapes * uint64(scrapeCost(counts{samples: n}, kindRegistry, false)); slow > limit {
		t.Errorf("%d scrapes in protobuf text allocate %d bytes, more than the %d client_golang's registry did", scrapes, slow, limit)
	}
}

// With the exporter's own series as the server has them (process_* from
// procself, go_* and promhttp_* through client_golang's registry on every
// scrape), a scrape still stays within what the budget reserves for it,
// ownSeriesCost included.
func TestScrapeMemoryOwnSeries(t *testing.T) {
	o := fixtureOptions(t, "dgx-h100")
	o.ExporterMetrics = true
	m, h := newHandler(o)
	if m.ownCost != ownSeriesCost {
		t.Fatalf("own series cost %d, want %d", m.ownCost, ownSeriesCost)
	}
	for _, accept := range []string{"text/plain", protobufAccept} {
		scrapeOnce(t, h, accept)
	}
	n := scrapeSamples(m)
	const scrapes = 20
	budget := scrapes * uint64(m.ownCost+scrapeCost(counts{samples: n}, kindFast, false))
	for _, accept := range []string{"text/plain;version=0.0.4", protobufAccept} {
		if got := allocsOf(t, m, accept, scrapes); got > budget {
			t.Errorf("%s: %d scrapes with the own series allocate %d bytes, more than the %d the budget reserves", accept, scrapes, got, budget)
		} else {
			t.Logf("%s: %d scrapes with the own series allocate %d bytes (budget %d)", accept, scrapes, got, budget)
		}
	}
}

const protoTextAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"

// The memory budget refuses a scrape that does not fit beside those that
// hold memory (503), and serves one alone however large.
func TestScrapeMemoryBudget(t *testing.T) {
	o := fixtureOptions(t, "dgx-h100")
	o.MaxMemory = 1
	m, _ := newHandler(o)
	req := func(accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		m.ServeHTTP(w, r)
		return w
	}
	for _, accept := range []string{"text/plain", protobufAccept, protoTextAccept} {
		if w := req(accept); w.Code != http.StatusOK {
			t.Errorf("%s alone, over the budget: HTTP %d, want 200", accept, w.Code)
		}
	}
	// Another scrape holds memory: nothing more fits.
	if !m.memory.take(1) {
		t.Fatal("an empty budget refused")
	}
	for _, accept := range []string{"text/plain", protobufAccept, protoTextAccept} {
		if w := req(accept); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "--web.max-requests-memory") {
			t.Errorf("%s beside another: HTTP %d %q, want 503", accept, w.Code, w.Body.String())
		}
	}
	m.memory.give(1)
	if m.memory.used != 0 {
		t.Errorf("budget used %d after every scrape ended", m.memory.used)
	}
	if w := req(protobufAccept); w.Code != http.StatusOK {
		t.Errorf("after release: HTTP %d", w.Code)
	}
}

// What the label policy limited is exported, one counter per reason,
// zero included, on every handler.
func TestLabelLimitsExported(t *testing.T) {
	m := fixtureHandler(t, "dgx-h100")
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := httptest.NewRecorder()
	m.ServeHTTP(w, r)
	for _, reason := range []string{"cut", "refused", "over_cap"} {
		if !strings.Contains(w.Body.String(), `rdma_label_values_limited_total{reason="`+reason+`"} `) {
			t.Errorf("no rdma_label_values_limited_total{reason=%q}", reason)
		}
	}
}
