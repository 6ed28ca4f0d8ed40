// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package goself

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// BenchmarkAppend is the go_* series as the text path takes them (the
// expo samples), beside client_golang's Go collector gathered as its
// registry did before.
func BenchmarkAppend(b *testing.B) {
	c := New()
	buf := make([]prometheus.Metric, 0, 64)
	for b.Loop() {
		buf = c.AppendMetrics(buf[:0])
	}
}

func BenchmarkClientGolang(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
