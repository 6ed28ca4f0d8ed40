// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/bench/perftest"
	"github.com/rdma-doctor/rdma_doctor/bench/perftest/perftesttest"
	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
)

// BenchmarkScrapeDuringProbe measures a full scrape of the dgx-h100 fixture
// host (the infiniband collector plus the probe collector, gathered as
// /metrics gathers them) while no probe runs ("idle") and while the
// scheduler's prober runs loopback probes back to back ("probing"). The
// probes use the fake perftest with both sides alive for 200 ms each run, so
// a run is nearly always in flight: child processes, their pipes, the
// runner's goroutines, results recorded into the store.
//
// The two numbers should be the same within noise: a scrape reads the
// store under a read lock and never waits for a probe. Real perftest also
// busy-polls a core on each side; on a host with spare cores that does not
// touch the exporter, and the scrape guard keeps probe start-up away from
// scrapes.
func BenchmarkScrapeDuringProbe(b *testing.B) {
	root, err := filepath.Abs(filepath.Join("..", "..", "fixtures", "hosts", "dgx-h100"))
	if err != nil {
		b.Fatal(err)
	}
	paths, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	agg, err := collector.New(collector.Env{Host: paths.Open(), Config: &config.Config{}, Logger: discard}, 10*time.Second, "infiniband")
	if err != nil {
		b.Fatal(err)
	}
	sample := perftesttest.Behaviour{StdoutFile: latSample, Protocol: true, DelayMS: 200}
	script := map[string]perftesttest.Sides{"ib_send_lat": {Server: sample, Client: sample}}
	fake := perftesttest.Install(b, script)
	cfg := &config.Probe{Loopback: []config.ProbeLoopback{{Device: "mlx5_0", Tests: []string{"ib_send_lat"}}}}
	targets, err := Targets(cfg)
	if err != nil {
		b.Fatal(err)
	}
	store := NewStore()
	prober := &Prober{
		Runner: &perftest.Runner{Dir: string(fake), Proc: hostfs.Dir("/proc"), Locks: &perftest.DeviceLocks{}},
		Sys:    paths.Open().Sys, Config: cfg, Logger: discard,
	}
	// A filled store: what the probe collector exports in production.
	store.Record(prober.Run(context.Background(), &targets[0], perftest.SendLat))

	scrape := func(b *testing.B) {
		exporter := prometheus.NewRegistry()
		exporter.MustRegister(&Collector{Store: store, Guard: &ScrapeGuard{Quiet: time.Second}})
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			reg := prometheus.NewRegistry()
			reg.MustRegister(agg.Bind(context.Background()))
			mfs, err := prometheus.Gatherers{exporter, reg}.Gather()
			if err != nil || len(mfs) < 10 {
				b.Fatalf("%d families, %v", len(mfs), err)
			}
		}
	}
	b.Run("idle", scrape)
	b.Run("probing", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		runs := 0
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r := prober.Run(ctx, &targets[0], perftest.SendLat)
				if ctx.Err() == nil {
					store.Record(r)
					runs++
				}
			}
		}()
		// Let the first run get its processes up.
		time.Sleep(100 * time.Millisecond)
		runtime.Gosched()
		scrape(b)
		b.StopTimer()
		cancel()
		wg.Wait()
		b.ReportMetric(float64(runs), "probes")
	})
}
