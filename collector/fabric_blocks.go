// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// FabricBlocks renders the per-link and per-port series of a scan and a
// sweep as Update adds them to a collection (two expo.Blocks), without a
// host loop: for tests and tools that measure what a fabric of a given
// size costs a scrape (internal/serve/scrape's TestScrapeMemoryFabric at
// 10,000 switch ports and more).
func FabricBlocks(f *fabric.Fabric, sw *fabric.Sweep, opts FabricOptions) []prometheus.Metric {
	c := NewFabricCollector(Env{Host: host.New(host.Options{})}, opts)
	return []prometheus.Metric{c.linkBlock(f), c.portMetricsBlock(f, sw)}
}
