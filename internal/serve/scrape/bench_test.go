// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
)

// BenchmarkServeGzip is a served default dgx-h100 scrape short of the
// network: the handler as the server builds it, the exporter's own
// go_*, process_* and promhttp_* included, answering a gzip text scrape.
// Beside internal/dev/scrapebench's BenchmarkServeText it has what a scrape
// allocates besides the collection and the exposition (the registry's
// gathering of go_*), which the garbage collector's share follows. Run
// with -test.cpu 1, as the server runs; cpu-ns/op is getrusage's, every
// thread and the collector included.
func BenchmarkServeGzip(b *testing.B) {
	o := fixtureOptions(b, "dgx-h100")
	o.ExporterMetrics = true
	h := New(o)
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		w := &discardResponse{h: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != 0 && w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
