// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs/hostfstest"
)

// The pci and irq collectors share one read of the devices' PCI functions
// per collection: each attribute is read once per scrape, not twice, and
// both collectors still export their series.
func TestPCIReadOncePerCollection(t *testing.T) {
	env := hostEnv(t, fixtureHosts+"numa-remote")
	sys := &hostfstest.Faulty{Base: env.Host.Sys}
	env.Host.Sys = sys
	a := &Aggregator{names: []string{"pci", "irq"},
		collectors: map[string]Collector{"pci": NewPCICollector(env, DeviceFilter{}), "irq": NewIRQCollector(env, DeviceFilter{}, false)},
		logger:     slog.New(slog.DiscardHandler), errLog: newOnceLogger(slog.New(slog.DiscardHandler), 10)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Bind(context.Background()))
	for scrape := 1; scrape <= 2; scrape++ {
		for name, want := range map[string]int{"rdma_device_numa_node": 2, "rdma_device_irqs": 2} {
			if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
				t.Fatalf("scrape %d: %d %s series, %v; want %d", scrape, n, name, err, want)
			}
		}
	}
	// Two GatherAndCount calls per scrape above: four collections.
	if n := sys.Reads("class/infiniband/mlx5_0/device/numa_node"); n != 4 {
		t.Errorf("numa_node read %d times in 4 collections of both collectors, want 4", n)
	}
}
