// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrapebench

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/expo"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
)

// BenchmarkWriteText is the text path of a scrape without the host reads:
// one collection of the default collectors, grouped into families and
// written as the text exposition (uncompressed) again and again.
func BenchmarkWriteText(b *testing.B) {
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
				fams, _ := expo.Group(metrics...)
				if err := expo.WriteText(&w, fams, nil); err != nil {
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
