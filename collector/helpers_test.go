// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// hosted is a collector with the host its tests read.
type hosted struct {
	Collector
	h *host.Host
}

// on binds a collector to env's host for gatherOne.
func on(env Env, c Collector) Collector { return hosted{c, env.Host} }

func unwrap(c Collector) (Collector, *host.Host) {
	if h, ok := c.(hosted); ok {
		return h.Collector, h.h
	}
	return c, host.New(host.Options{})
}

// gatherOne runs one collector as /metrics does: in an Aggregator, on a
// snapshot per gather.
func gatherOne(t *testing.T, name string, c Collector) prometheus.Gatherer {
	t.Helper()
	inner, h := unwrap(c)
	a := newAggregator(h, slog.New(slog.DiscardHandler), 0, map[string]Collector{name: inner})
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Bind(context.Background()))
	return reg
}

// hostEnv is the Env of a fixture root; with changes the host options
// (a device filter) before the Host is made.
func hostEnv(t testing.TB, root string, with ...func(*host.Options)) Env {
	t.Helper()
	paths, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	o := host.Options{Paths: paths}
	for _, w := range with {
		w(&o)
	}
	return Env{Host: host.New(o), Config: &config.Config{}, Logger: slog.New(slog.DiscardHandler)}
}

// excluding is a host option: the device filter of an exclude regexp.
func excluding(t testing.TB, re string) func(*host.Options) {
	f, err := host.NewDeviceFilter("", re)
	if err != nil {
		t.Fatal(err)
	}
	return func(o *host.Options) { o.Devices = f }
}
