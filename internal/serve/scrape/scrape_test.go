// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

func TestScrapeTimeout(t *testing.T) {
	for _, tc := range []struct {
		header string
		def    time.Duration
		want   time.Duration
	}{
		{"", 10 * time.Second, 10 * time.Second},
		{"5", 10 * time.Second, 4500 * time.Millisecond},
		{"30", 10 * time.Second, 10 * time.Second},
		{"0.2", 10 * time.Second, 100 * time.Millisecond},
		{"bogus", 10 * time.Second, 10 * time.Second},
		{"-3", 10 * time.Second, 10 * time.Second},
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if tc.header != "" {
			r.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", tc.header)
		}
		if got := scrapeTimeout(r, tc.def); got != tc.want {
			t.Errorf("header %q: %v, want %v", tc.header, got, tc.want)
		}
	}
}

var testDesc = expo.NewDesc("rdma_test_value", "A test gauge.", "device")

// staticCollection is a collection of one sample, in a list with spare
// capacity as the aggregator's may have.
func staticCollection() [][]prometheus.Metric {
	out := make([][]prometheus.Metric, 1, 4)
	out[0] = []prometheus.Metric{expo.Gauge(testDesc, 1, "mlx5_0")}
	return out
}

func get(h http.Handler, accept, encoding string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	if encoding != "" {
		r.Header.Set("Accept-Encoding", encoding)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A scrape past --web.max-requests gets 503 while the others run, and is
// served once one has ended. The first scrape is held inside its
// collection by a channel, not by time.
func TestMaxRequests(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	h := New(Options{
		Collect: func(context.Context) [][]prometheus.Metric {
			if held.CompareAndSwap(false, true) {
				close(entered)
				<-release
			}
			return staticCollection()
		},
		Timeout:     time.Minute,
		MaxRequests: 1,
	})
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- get(h, "", "") }()
	<-entered
	if w := get(h, "", ""); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "--web.max-requests") {
		t.Errorf("second scrape beside the first: HTTP %d %q, want 503 naming --web.max-requests", w.Code, w.Body.String())
	}
	close(release)
	if w := <-first; w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `rdma_test_value{device="mlx5_0"} 1`) {
		t.Errorf("first scrape: HTTP %d %q", w.Code, w.Body.String())
	}
	if w := get(h, "", ""); w.Code != http.StatusOK {
		t.Errorf("after the first ended: HTTP %d", w.Code)
	}
}

// The collection is shared with concurrent scrapes: a scrape groups the
// parts beside it and never writes into its spare capacity.
func TestSharedCollectionUnchanged(t *testing.T) {
	shared := staticCollection()
	h := New(Options{
		Collect: func(context.Context) [][]prometheus.Metric { return shared },
		Parts:   []prometheus.Collector{BuildInfo("rdma_doctor")},
		Timeout: time.Minute,
	})
	for _, accept := range []string{"text/plain", protobufAccept, protoTextAccept} {
		if w := get(h, accept, ""); w.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d", accept, w.Code)
		}
	}
	if spare := shared[:cap(shared)]; len(shared) != 1 || spare[1] != nil || spare[2] != nil || spare[3] != nil {
		t.Errorf("a scrape wrote into the shared collection: %v", spare)
	}
}

// The exporter's own series are served with ExporterMetrics and only
// then; what the answer left out or cut is served always.
func TestExporterMetrics(t *testing.T) {
	for _, own := range []bool{false, true} {
		h := New(Options{
			Collect:         func(context.Context) [][]prometheus.Metric { return staticCollection() },
			Timeout:         time.Minute,
			ExporterMetrics: own,
		})
		body := get(h, "text/plain", "").Body.String()
		for _, family := range []string{"go_goroutines", "process_start_time_seconds", "promhttp_metric_handler_requests_total"} {
			if got := strings.Contains(body, "\n"+family+"{") || strings.Contains(body, "\n"+family+" "); got != own {
				t.Errorf("ExporterMetrics %v: %s served %v", own, family, got)
			}
		}
		for _, family := range []string{"rdma_exposition_rejected_samples_total{", "rdma_label_values_limited_total{", "rdma_test_value{"} {
			if !strings.Contains(body, family) {
				t.Errorf("ExporterMetrics %v: no %s", own, family)
			}
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"deflate, gzip;q=1.0, *;q=0.5", true},
		{" GZIP ", true},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
		{"gzip;q=0.001", true},
		{"identity", false},
		{"x-gzip", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Accept-Encoding", tc.header)
		if got := acceptsGzip(r); got != tc.want {
			t.Errorf("Accept-Encoding %q: %v, want %v", tc.header, got, tc.want)
		}
	}
}

// The text format and the delimited protobuf are written by expo, the
// protobuf debugging formats and the dots escaping by client_golang.
func TestFastFormat(t *testing.T) {
	for _, tc := range []struct {
		accept string
		fast   bool
	}{
		{"", true},
		{"text/plain;version=0.0.4", true},
		{protobufAccept, true},
		{protobufAccept + ";escaping=underscores", true},
		{protobufAccept + ";escaping=dots", false},
		{protoTextAccept, false},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=compact-text", false},
	} {
		h := http.Header{}
		if tc.accept != "" {
			h.Set("Accept", tc.accept)
		}
		format := expfmt.NegotiateAccept(h, expfmt.DefaultAcceptedFormats()...)
		if got := fastFormat(format); got != tc.fast {
			t.Errorf("Accept %q (%s): fast %v, want %v", tc.accept, format, got, tc.fast)
		}
	}
}
