// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrapebench

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/expo"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
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
