// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

// BenchmarkScrapeDuringProbe measures full scrapes of the dgx-h100 fixture
// host (the infiniband collector plus the probe collector, gathered as
// /metrics gathers them) in alternating blocks: while no probe runs
// ("idle-ns/scrape", the median) and while the scheduler's prober runs a
// loopback probe ("probing-ns/scrape"). The probes use the fake perftest
// with both sides alive for a second, and the "probing" scrapes start once
// both processes are up: two child processes, their pipes and the runner's
// goroutines are there during every one of them. One op is one pair of
// blocks.
//
// The two numbers should be the same within noise: a scrape reads the
// store under a read lock and never waits for a probe. Real perftest also
// busy-polls a core on each side; on a host with spare cores that does not
// touch the exporter, and the scrape guard keeps probe start-up away from
// scrapes.
func BenchmarkScrapeDuringProbe(b *testing.B) {
	root := fixtureCopy(b, "dgx-h100")
	h, err := host.AtRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	agg, err := collector.New(collector.Env{Host: h, Config: &config.Config{}, Logger: discard}, collector.DefaultFlags(), 10*time.Second, "infiniband")
	if err != nil {
		b.Fatal(err)
	}
	sample := perftesttest.Behaviour{StdoutFile: latSample, Protocol: true, DelayMS: 1000}
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
		Sys:    h.FS().Sys, Config: cfg, Logger: discard,
	}
	// A filled store: what the probe collector exports in production.
	store.Record(prober.Run(context.Background(), &targets[0], perftest.SendLat))

	exporter := prometheus.NewRegistry()
	exporter.MustRegister(&Collector{Store: store, Guard: &ScrapeGuard{Quiet: time.Second}})
	scrape := func() time.Duration {
		start := time.Now()
		reg := prometheus.NewRegistry()
		reg.MustRegister(agg.Bind(context.Background()))
		mfs, err := prometheus.Gatherers{exporter, reg}.Gather()
		if err != nil || len(mfs) < 10 {
			b.Fatalf("%d families, %v", len(mfs), err)
		}
		return time.Since(start)
	}

	// The prober runs while probing is set; idle is signalled when it is
	// between runs with probing unset.
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		probing bool
		running bool
		stop    bool
		runs    int
	)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			mu.Lock()
			for !probing && !stop {
				cond.Wait()
			}
			if stop {
				mu.Unlock()
				return
			}
			running = true
			cond.Broadcast()
			mu.Unlock()
			store.Record(prober.Run(context.Background(), &targets[0], perftest.SendLat))
			mu.Lock()
			running = false
			runs++
			cond.Broadcast()
			mu.Unlock()
		}
	}()
	set := func(on bool) {
		mu.Lock()
		probing = on
		cond.Broadcast()
		for running != on {
			cond.Wait()
		}
		// The store-filling run and each completed run made two calls;
		// this one makes two more.
		want := 2*runs + 4
		mu.Unlock()
		if on {
			// Wait for the run's steady state: both processes up and
			// connected. Their start-up (fork, exec, the runtime of the
			// fake) competes for CPU like any process would; the scrape
			// guard keeps probe starts away from scrapes.
			for len(fake.Calls(b)) < want {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Blocks of scrapes alternate between idle and probing, so the
	// machine's load drifts into both alike.
	const block = 4
	var idle, busy []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	on := false
	for b.Loop() {
		set(on)
		for range block {
			d := scrape()
			if on {
				busy = append(busy, d)
			} else {
				idle = append(idle, d)
			}
		}
		set(false)
		on = !on
	}
	b.StopTimer()
	mu.Lock()
	stop = true
	cond.Broadcast()
	mu.Unlock()
	wg.Wait()
	mi, mb := median(idle), median(busy)
	b.ReportMetric(float64(mi.Nanoseconds()), "idle-ns/scrape")
	b.ReportMetric(float64(mb.Nanoseconds()), "probing-ns/scrape")
	if mi > 0 {
		b.ReportMetric(float64(mb)/float64(mi), "probing/idle")
	}
	b.ReportMetric(float64(runs), "probes")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// fixtureCopy copies a fixture host into a temporary directory (cp -a keeps
// its relative symlinks), so the benchmark does not read a tree that
// fixtures/make-hosts.sh may be rebuilding.
func fixtureCopy(b *testing.B, host string) string {
	b.Helper()
	src, err := filepath.Abs(filepath.Join("..", "fixtures", "hosts", host))
	if err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(b.TempDir(), host)
	var out []byte
	for range 60 {
		if out, err = exec.Command("cp", "-a", src, dst).CombinedOutput(); err == nil {
			return dst
		}
		_ = os.RemoveAll(dst)
		time.Sleep(time.Second)
	}
	b.Fatalf("cp -a %s: %v\n%s", src, err, out)
	return ""
}
