// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrapebench

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// BenchmarkGrowth is how a scrape and the raw floor grow with the number
// of devices (2 ports each, every port with the DGX fixture's full
// counter sets): 1, 4, 16 and 64 devices. docs/performance.md's growth
// table comes from it.
func BenchmarkGrowth(b *testing.B) {
	for _, devices := range []int{1, 4, 16, 64} {
		const ports = 2
		p, err := hostfs.Paths{Rootfs: generateHost(b, b.TempDir(), devices, ports)}.Resolve()
		if err != nil {
			b.Fatal(err)
		}
		h := host{name: fmt.Sprintf("%d-devices", devices), paths: p, devices: devices, ports: devices * ports}
		b.Run(fmt.Sprintf("devices=%d/scrape", devices), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(newAggregator(b, h).Bind(context.Background()))
			checkScrape(b, h, reg)
			measure(b, func() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("devices=%d/rawfloor", devices), func(b *testing.B) {
			benchRaw(b, h, osReadFile)
		})
	}
}
