// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
)

// blocking is a collector whose Update counts its calls and blocks until
// release is closed, so a test controls when a collection ends; a is an
// Aggregator running only it.
func blocking(calls *atomic.Int32, entered chan<- struct{}, release <-chan struct{}) *Aggregator {
	c := fakeCollector{func(ctx context.Context, out *sink) error {
		n := calls.Add(1)
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		out.add(prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, float64(n)))
		return nil
	}}
	return newAggregator(host.New(host.Options{}), slog.New(slog.DiscardHandler), time.Minute,
		map[string]Collector{"fake_block": c})
}

// waitWaiters polls (no timed assertion) until n scrapes share the flight.
func waitWaiters(t *testing.T, a *Aggregator, n int) {
	t.Helper()
	for a.waiters() != n {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestCollectSharesOneCollection: two gathers that overlap cause one
// Update, and both answer with its metrics.
func TestCollectSharesOneCollection(t *testing.T) {
	var calls atomic.Int32
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	a := blocking(&calls, entered, release)

	const scrapes = 5
	results := make([]float64, scrapes)
	var wg sync.WaitGroup
	gather := func(i int) {
		defer wg.Done()
		reg := prometheus.NewRegistry()
		reg.MustRegister(a.Bind(context.Background()))
		mfs, err := reg.Gather()
		if err != nil {
			t.Error(err)
			return
		}
		for _, mf := range mfs {
			if mf.GetName() == "rdma_fake" {
				results[i] = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
	}
	wg.Add(1)
	go gather(0)
	<-entered // the first collection is running
	for i := 1; i < scrapes; i++ {
		wg.Add(1)
		go gather(i)
	}
	waitWaiters(t, a, scrapes-1)
	close(release)
	wg.Wait()

	if got := calls.Load(); got != 1 {
		t.Fatalf("Update ran %d times for %d overlapping scrapes, want 1", got, scrapes)
	}
	for i, v := range results {
		if v != 1 {
			t.Errorf("scrape %d: rdma_fake = %v, want 1 (the shared collection's value)", i, v)
		}
	}

	// A scrape after the shared one ends starts a fresh collection.
	wg.Add(1)
	go gather(0)
	<-entered
	wg.Wait()
	if got := calls.Load(); got != 2 {
		t.Fatalf("a later scrape reused a finished collection: Update ran %d times, want 2", got)
	}
	if results[0] != 2 {
		t.Errorf("later scrape: rdma_fake = %v, want 2", results[0])
	}
}

// TestCollectWaiterDeadline: a scrape whose own deadline ends while it waits
// for the shared collection answers at once with every collector failed,
// and the first scrape still gets the full result.
func TestCollectWaiterDeadline(t *testing.T) {
	var calls atomic.Int32
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	a := blocking(&calls, entered, release)

	// The first scrape's client hangs up: the shared collection goes on.
	leaderCtx, hangUp := context.WithCancel(context.Background())
	leader := make(chan string)
	go func() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(a.Bind(leaderCtx))
		n, err := testutil.GatherAndCount(reg, "rdma_fake", "rdma_scrape_collector_success")
		if err != nil {
			leader <- err.Error()
			return
		}
		if n != 2 {
			leader <- "leader did not get rdma_fake and the success series"
			return
		}
		leader <- ""
	}()
	<-entered
	hangUp()

	ctx, cancel := context.WithCancel(context.Background())
	waiter := make(chan error)
	var out string
	go func() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(a.Bind(ctx))
		mfs, err := reg.Gather()
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "rdma_scrape_collector_success" {
					out += mf.GetName() + "=" + ftoa(m.GetGauge().GetValue())
				}
				if mf.GetName() == "rdma_fake" {
					out += " rdma_fake present"
				}
			}
		}
		waiter <- err
	}()
	waitWaiters(t, a, 1)
	cancel() // the waiter's deadline
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
	if out != "rdma_scrape_collector_success=0" {
		t.Errorf("waiter past its deadline answered %q, want only rdma_scrape_collector_success=0", out)
	}
	close(release)
	if msg := <-leader; msg != "" {
		t.Error(msg)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("Update ran %d times, want 1", got)
	}
}

func ftoa(f float64) string {
	if f == 0 {
		return "0"
	}
	return "1"
}
