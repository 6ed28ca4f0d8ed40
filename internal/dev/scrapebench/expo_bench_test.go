// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrapebench

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/rdma-doctor/rdma_doctor/collector"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// BenchmarkWriteText is the text path of a scrape without the host reads:
// one collection of the default collectors, grouped into families and
// written as the text exposition (uncompressed) again and again.
func BenchmarkWriteText(b *testing.B) {
	benchmarkWrite(b, func(w io.Writer, metrics [][]prometheus.Metric) error {
		fams, _ := expo.Group(metrics...)
		return expo.WriteText(w, fams, nil)
	})
}

// BenchmarkWriteProto is the same for the delimited protobuf, streamed
// from the samples as /metrics writes it.
func BenchmarkWriteProto(b *testing.B) {
	benchmarkWrite(b, func(w io.Writer, metrics [][]prometheus.Metric) error {
		fams, _ := expo.Group(metrics...)
		return expo.WriteProto(w, fams, nil)
	})
}

// BenchmarkRegistryProto is the delimited protobuf through client_golang's
// registry and encoder, as /metrics wrote it before WriteProto (and still
// writes the protobuf debugging formats): the memory a protobuf scrape
// cost.
func BenchmarkRegistryProto(b *testing.B) {
	benchmarkWrite(b, func(w io.Writer, metrics [][]prometheus.Metric) error {
		var all metricList
		for _, ms := range metrics {
			all = append(all, ms...)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(all)
		mfs, err := reg.Gather()
		if err != nil {
			return err
		}
		enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeProtoDelim))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				return err
			}
		}
		return nil
	})
}

type metricList []prometheus.Metric

func (l metricList) Describe(chan<- *prometheus.Desc) {}
func (l metricList) Collect(ch chan<- prometheus.Metric) {
	for _, m := range l {
		ch <- m
	}
}

func benchmarkWrite(b *testing.B, write func(io.Writer, [][]prometheus.Metric) error) {
	for _, h := range hosts(b) {
		b.Run(h.name, func(b *testing.B) {
			agg, err := collector.New(collector.Env{Host: rdmahost.New(rdmahost.Options{Paths: h.paths}), Config: &config.Config{}, Logger: discard()},
				collector.DefaultFlags(), 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			metrics := agg.Metrics(context.Background())
			n := 0
			for _, ms := range metrics {
				n += len(ms)
			}
			if n < h.ports*40 {
				b.Fatalf("only %d metrics", n)
			}
			var w countingWriter
			measure(b, func() {
				if err := write(&w, metrics); err != nil {
					b.Fatal(err)
				}
			})
			b.ReportMetric(float64(w)/float64(b.N), "bytes-out/op")
		})
	}
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)

// BenchmarkServeText is what a default scrape costs the process short of
// HTTP, as /metrics answers it (cmd/rdma_doctor serveFast): a fresh
// collection of the default collectors (the slow sources cached as a
// server keeps them), grouped and written as gzipped text. The caches
// internal/host's package doc lists are judged against its cpu-ns/op
// (docs/performance.md, "What each cache saves").
func BenchmarkServeText(b *testing.B) {
	for _, h := range hosts(b) {
		b.Run(h.name, func(b *testing.B) {
			agg, err := collector.New(collector.Env{Host: rdmahost.New(rdmahost.Options{Paths: h.paths}), Config: &config.Config{}, Logger: discard()},
				collector.DefaultFlags(), 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			gz := expo.NewGzipWriter()
			var w countingWriter
			scrape := func() {
				fams, other := expo.Group(agg.Metrics(ctx)...)
				if len(other) > 0 {
					b.Fatalf("%d samples need a registry", len(other))
				}
				gz.Reset(&w)
				if err := expo.WriteText(gz, fams, nil); err != nil {
					b.Fatal(err)
				}
				if err := gz.Close(); err != nil {
					b.Fatal(err)
				}
			}
			scrape()
			if w < countingWriter(h.ports*400) {
				b.Fatalf("a scrape wrote only %d gzipped bytes", w)
			}
			w = 0
			measure(b, scrape)
			b.ReportMetric(float64(w)/float64(b.N), "bytes-out/op")
		})
	}
}

// BenchmarkHostExposition decides how host metrics are served (issue 39,
// docs/architecture.md "Exposition"): the series of a default dgx-h100
// collection, less the exporter's own (go_*, process_*, the same either
// way), answered as a gzip text scrape two ways:
//
//   - expo: as /metrics answers now (internal/serve/expo: Group, WriteText,
//     GzipWriter). The samples are the collection's; making them is the
//     collectors' cost in both designs (expo.Samples: a chunk per 256).
//   - client_golang: as an exporter built on client_golang answers: a
//     collector that makes a const metric of each series at each scrape,
//     a prometheus.Registry and promhttp.HandlerFor, with its gzip
//     (compress/gzip at its default level).
//   - client_golang-same-gzip: the same registry's Gather and expfmt's
//     text, compressed by expo's GzipWriter (BestSpeed): the encoding
//     alone, apart from the compression level.
//
// Both must write the same text, checked once before timing.
func BenchmarkHostExposition(b *testing.B) {
	h := hosts(b)[0] // dgx-h100
	agg, err := collector.New(collector.Env{Host: rdmahost.New(rdmahost.Options{Paths: h.paths}), Config: &config.Config{}, Logger: discard()},
		collector.DefaultFlags(), 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	metrics := agg.Metrics(context.Background())
	var samples []*expo.Sample
	for _, ms := range metrics {
		for _, m := range ms {
			s, ok := m.(*expo.Sample)
			if !ok {
				b.Fatalf("a host metric that is not an expo sample: %T", m)
			}
			samples = append(samples, s)
		}
	}
	if len(samples) < h.ports*100 {
		b.Fatalf("only %d series", len(samples))
	}
	b.Logf("%d series", len(samples))

	gz := expo.NewGzipWriter()
	viaExpo := func(w io.Writer) {
		fams, _ := expo.Group(metrics...)
		gz.Reset(w)
		if err := expo.WriteText(gz, fams, nil); err != nil {
			b.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			b.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(constCollector(samples))
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.2,*/*;q=0.1")
	req.Header.Set("Accept-Encoding", "gzip")
	viaClientGolang := func(w io.Writer) {
		rw := &discardResponse{w: w, header: http.Header{}}
		handler.ServeHTTP(rw, req)
		if rw.status != 0 && rw.status != http.StatusOK {
			b.Fatalf("promhttp answered %d", rw.status)
		}
	}

	viaExpfmt := func(w io.Writer) {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		gz.Reset(w)
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(gz, mf); err != nil {
				b.Fatal(err)
			}
		}
		if err := gz.Close(); err != nil {
			b.Fatal(err)
		}
	}
	ways := []struct {
		name  string
		serve func(io.Writer)
	}{{"expo", viaExpo}, {"client_golang", viaClientGolang}, {"client_golang-same-gzip", viaExpfmt}}
	var want string
	for i, way := range ways {
		var buf bytes.Buffer
		way.serve(&buf)
		if text := gunzip(b, &buf); i == 0 {
			want = text
		} else if text != want {
			b.Fatalf("%s writes other text than expo: %d bytes, expo %d", way.name, len(text), len(want))
		}
	}
	for _, way := range ways {
		b.Run(way.name, func(b *testing.B) {
			var w countingWriter
			measure(b, func() { way.serve(&w) })
			b.ReportMetric(float64(w)/float64(b.N), "bytes-out/op")
		})
	}
}

// constCollector makes a const metric of each sample at each Collect, as
// a client_golang exporter's collector does from what it read.
type constCollector []*expo.Sample

func (constCollector) Describe(chan<- *prometheus.Desc) {}

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c {
		m, err := s.Const()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(s.Desc(), err)
			continue
		}
		ch <- m
	}
}

// discardResponse is an http.ResponseWriter that writes the body to w.
type discardResponse struct {
	w      io.Writer
	header http.Header
	status int
}

func (r *discardResponse) Header() http.Header         { return r.header }
func (r *discardResponse) Write(p []byte) (int, error) { return r.w.Write(p) }
func (r *discardResponse) WriteHeader(status int)      { r.status = status }

func gunzip(b *testing.B, r io.Reader) string {
	b.Helper()
	zr, err := gzip.NewReader(r)
	if err != nil {
		b.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	return string(text)
}
