// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package httpself exports the exporter's own promhttp_* series: the
// names, help and types of client_golang's promhttp.InstrumentMetricHandler
// (scrapes in flight, scrapes served by status code), counted here and
// written as expo samples. InstrumentMetricHandler keeps them in a
// registry, and gathering that registry cost every scrape two channels of
// a thousand entries, a goroutine and the text encoding of client_golang
// (a twentieth of a one-device scrape's CPU, perf).
package httpself

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/expo"
)

// Stats counts the scrapes of one handler. Safe for concurrent use.
type Stats struct {
	inFlightDesc, totalDesc *expo.Desc
	inFlight                atomic.Int64

	mu sync.Mutex
	// total is the scrapes served by status code, the codes in
	// increasing order; 200, 500 and 503 are there from the start, as
	// promhttp has them.
	codes []int
	total []uint64
}

// New returns Stats with nothing counted.
func New() *Stats {
	return &Stats{
		inFlightDesc: expo.NewDesc("promhttp_metric_handler_requests_in_flight", "Current number of scrapes being served."),
		totalDesc:    expo.NewDesc("promhttp_metric_handler_requests_total", "Total number of scrapes by HTTP status code.", "code"),
		codes:        []int{200, 500, 503},
		total:        make([]uint64, 3),
	}
}

// Instrument counts h's requests: in flight while h serves one, and by
// the status code h answered once it is done (200 when h set none, as
// net/http sends).
func (s *Stats) Instrument(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			s.inFlight.Add(-1)
			s.count(sw.code)
		}()
		h.ServeHTTP(sw, r)
	})
}

func (s *Stats) count(code int) {
	if code == 0 {
		code = http.StatusOK
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearch(s.codes, code)
	if !found {
		s.codes = slices.Insert(s.codes, i, code)
		s.total = slices.Insert(s.total, i, 0)
	}
	s.total[i]++
}

// Describe implements prometheus.Collector.
func (s *Stats) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.inFlightDesc.Prometheus()
	ch <- s.totalDesc.Prometheus()
}

// Collect implements prometheus.Collector.
func (s *Stats) Collect(ch chan<- prometheus.Metric) {
	for _, m := range s.AppendMetrics(nil) {
		ch <- m
	}
}

// AppendMetrics appends what Collect sends to out.
func (s *Stats) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	out = append(out, expo.Gauge(s.inFlightDesc, float64(s.inFlight.Load())))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, code := range s.codes {
		out = append(out, expo.Counter(s.totalDesc, float64(s.total[i]), strconv.Itoa(code)))
	}
	return out
}

// statusWriter remembers the status code of the answer.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	// A 1xx is informational: the answer's code comes after it.
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
