// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type fakeCollector struct {
	update func(ctx context.Context, out *sink) error
}

func (f fakeCollector) Update(ctx context.Context, _ *host.Snapshot, out *sink) error {
	return f.update(ctx, out)
}

var fakeDesc = prometheus.NewDesc("rdma_fake", "fake", nil, nil)

// fakes are test collectors: one that works, one with two read errors, one
// that ignores its deadline.
func fakes() map[string]Collector {
	return map[string]Collector{
		"fake_ok": fakeCollector{func(_ context.Context, out *sink) error {
			out.add(prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 7))
			return nil
		}},
		"fake_partial": fakeCollector{func(_ context.Context, out *sink) error {
			return errors.Join(errors.New("read a: EIO"), errors.New("read b: EINVAL"))
		}},
		"fake_hung": fakeCollector{func(ctx context.Context, out *sink) error {
			time.Sleep(2 * time.Second) // a read that ignores the deadline
			out.add(prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 99))
			return nil
		}},
	}
}

func TestAggregator(t *testing.T) {
	var logs bytes.Buffer
	a := newAggregator(host.New(host.Options{}), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		200*time.Millisecond, fakes())
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Bind(context.Background()))
	want := `
# HELP rdma_fake fake
# TYPE rdma_fake gauge
rdma_fake 7
# HELP rdma_scrape_collector_errors Read and parse errors a collector met in this scrape; their series are left out.
# TYPE rdma_scrape_collector_errors gauge
rdma_scrape_collector_errors{collector="fake_hung"} 1
rdma_scrape_collector_errors{collector="fake_ok"} 0
rdma_scrape_collector_errors{collector="fake_partial"} 2
# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="fake_hung"} 0
rdma_scrape_collector_success{collector="fake_ok"} 1
rdma_scrape_collector_success{collector="fake_partial"} 0
`
	// fake_hung would send rdma_fake 99 after 2 s; only rdma_fake 7 may be
	// seen, so the deadline dropped the late collector.
	for i := 0; i < 3; i++ {
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rdma_fake", "rdma_scrape_collector_errors", "rdma_scrape_collector_success"); err != nil {
			t.Fatal(err)
		}
	}
	// Each distinct error is logged once at warning level.
	for _, msg := range []string{"read a: EIO", "read b: EINVAL", "did not finish before the scrape deadline"} {
		if n := strings.Count(logs.String(), msg); n != 1 {
			t.Errorf("%q logged %d times at warn, want once:\n%s", msg, n, logs.String())
		}
	}
}

// TestRefusedAttributesAreNoErrors: a refusal remembered from an earlier
// read (a restricted function's EINVAL, hostfs.ErrRefused) leaves the
// collector's success at 1 and is counted apart; a new EINVAL is an error.
func TestRefusedAttributesAreNoErrors(t *testing.T) {
	refusal := &fs.PathError{Op: "read", Path: "/sys/class/infiniband/mlx5_0/fw_ver", Err: syscall.EINVAL}
	a := newAggregator(host.New(host.Options{}), slog.New(slog.DiscardHandler), time.Second, map[string]Collector{
		"remembered": fakeCollector{func(context.Context, *sink) error {
			return errors.Join(&hostfs.RefusedError{Err: refusal}, &hostfs.RefusedError{Err: refusal})
		}},
		"first": fakeCollector{func(context.Context, *sink) error { return refusal }},
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Bind(context.Background()))
	want := `
# HELP rdma_scrape_collector_refused_attributes Attributes the driver refused on an earlier read (EINVAL, EACCES, EOPNOTSUPP) and that are not asked again.
# TYPE rdma_scrape_collector_refused_attributes gauge
rdma_scrape_collector_refused_attributes{collector="first"} 0
rdma_scrape_collector_refused_attributes{collector="remembered"} 2
# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="first"} 0
rdma_scrape_collector_success{collector="remembered"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rdma_scrape_collector_refused_attributes", "rdma_scrape_collector_success"); err != nil {
		t.Error(err)
	}
}

func TestNewErrors(t *testing.T) {
	env := Env{Logger: slog.New(slog.DiscardHandler)}
	if _, err := New(env, DefaultFlags(), time.Second, "no_such"); err == nil {
		t.Error("unknown collector accepted")
	}
}

func TestDeviceFilter(t *testing.T) {
	for _, tc := range []struct {
		include, exclude string
		keep, drop       []string
	}{
		{"", "", []string{"mlx5_0", "anything"}, nil},
		{"mlx5_1", "", []string{"mlx5_1"}, []string{"mlx5_10", "mlx5_0"}},
		{"", "mlx5_bond_.*", []string{"mlx5_0"}, []string{"mlx5_bond_0"}},
		{"mlx5_[0-3]|ibp.*", "", []string{"mlx5_2", "ibp26s0"}, []string{"mlx5_4"}},
	} {
		f, err := host.NewDeviceFilter(tc.include, tc.exclude)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range tc.keep {
			if !f.Keep(n) {
				t.Errorf("include %q exclude %q: %s dropped", tc.include, tc.exclude, n)
			}
		}
		for _, n := range tc.drop {
			if f.Keep(n) {
				t.Errorf("include %q exclude %q: %s kept", tc.include, tc.exclude, n)
			}
		}
	}
	if _, err := host.NewDeviceFilter("(", ""); err == nil {
		t.Error("bad regexp accepted")
	}
	if _, err := host.NewDeviceFilter("a", "b"); err == nil {
		t.Error("include and exclude together accepted")
	}
}

// The once-logger remembers a bounded number of messages (most recent
// kept): a message pushed out is logged at warning level again, a repeat
// of a remembered one at debug level, and repeats are counted.
func TestOnceLoggerLRU(t *testing.T) {
	var logs bytes.Buffer
	o := newOnceLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})), 2)
	for _, m := range []string{"a", "b", "a", "c", "a", "b"} {
		o.log("x", errors.New("err "+m))
	}
	// a b (a again: debug) c (evicts b) (a again: debug) b (new again)
	if n := strings.Count(logs.String(), "level=WARN"); n != 4 {
		t.Errorf("%d warnings, want 4:\n%s", n, logs.String())
	}
	if got := o.suppressed.Load(); got != 2 {
		t.Errorf("suppressed %d, want 2", got)
	}
	if len(o.seen) != 2 || o.order.Len() != 2 {
		t.Errorf("remembers %d/%d messages, want at most 2", len(o.seen), o.order.Len())
	}
}

// fakeAppender is a collector that appends its metrics to a slice
// (appender), as the infiniband collector does.

// rdma_snapshot_age_seconds has one series per slow source a scrape
// read (its source label the host's name for it), at the age the host's
// clock says, and none for a source no collector asked for; a background
// source the options turn on (sminfo) has one from its first published
// round, none the options leave off (the fabric's).
func TestSnapshotAgeSeries(t *testing.T) {
	at := time.Unix(1_000_000, 0)
	env := hostEnv(t, "../fixtures/hosts/numa-remote", sminfo("/nonexistent"), func(o *host.Options) { o.Now = func() time.Time { return at } })
	// No loop runs: the test runs sminfo's round (no umad on the
	// fixture: a round that finds no port to query).
	env.Host.Round(context.Background())
	a := newAggregator(env.Host, slog.New(slog.DiscardHandler), 0, map[string]Collector{"reads": snapReader(func(ctx context.Context, s *host.Snapshot) {
		_, _ = s.Tuning(ctx)
		_ = s.Hostname(ctx)
	})})
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Bind(context.Background()))
	// The first gather reads; the second serves the cached values 3s on.
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	at = at.Add(3 * time.Second)
	want := `
# HELP rdma_snapshot_age_seconds Age of the state a scrape served, by slow source or background worker, in seconds.
# TYPE rdma_snapshot_age_seconds gauge
rdma_snapshot_age_seconds{source="hostname"} 3
rdma_snapshot_age_seconds{source="sminfo"} 3
rdma_snapshot_age_seconds{source="tuning"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rdma_snapshot_age_seconds"); err != nil {
		t.Error(err)
	}
}

// Every background worker the server registers has one health series,
// its reason the worker's; one with a latest value has an age, which
// replaces the host's own entry of the same source (one series each).
func TestWorkerSeries(t *testing.T) {
	at := time.Unix(1_000_000, 0)
	env := hostEnv(t, "../fixtures/hosts/numa-remote", sminfo("/nonexistent"), func(o *host.Options) { o.Now = func() time.Time { return at } })
	env.Host.Round(context.Background()) // the host's own sminfo age: 0 s
	a := newAggregator(env.Host, slog.New(slog.DiscardHandler), 0, map[string]Collector{})
	a.now = func() time.Time { return at }
	a.workers = func() []worker.Report {
		return []worker.Report{
			{Name: "sminfo", Status: worker.Status{Latest: at.Add(-7 * time.Second)}},
			{Name: "diagnose", Status: worker.Status{Latest: at.Add(-2 * time.Second), Problem: worker.Failing}},
			{Name: "fabric_scan", Status: worker.Status{Problem: worker.FirstRoundPending}},
			{Name: "probe_responder", Status: worker.Status{Problem: worker.Stopped}},
			{Name: "portwatch"},
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Bind(context.Background()))
	want := `
# HELP rdma_background_worker_healthy 1 while a background worker runs and its latest round succeeded; reason says why not.
# TYPE rdma_background_worker_healthy gauge
rdma_background_worker_healthy{reason="",worker="portwatch"} 1
rdma_background_worker_healthy{reason="",worker="sminfo"} 1
rdma_background_worker_healthy{reason="failing",worker="diagnose"} 0
rdma_background_worker_healthy{reason="first_round_pending",worker="fabric_scan"} 0
rdma_background_worker_healthy{reason="stopped",worker="probe_responder"} 0
# HELP rdma_snapshot_age_seconds Age of the state a scrape served, by slow source or background worker, in seconds.
# TYPE rdma_snapshot_age_seconds gauge
rdma_snapshot_age_seconds{source="diagnose"} 2
rdma_snapshot_age_seconds{source="sminfo"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rdma_snapshot_age_seconds", "rdma_background_worker_healthy"); err != nil {
		t.Error(err)
	}
}

// snapReader is a collector that reads sources of the snapshot it is given.
type snapReader func(ctx context.Context, s *host.Snapshot)

func (r snapReader) Update(ctx context.Context, s *host.Snapshot, _ *sink) error {
	r(ctx, s)
	return nil
}

// A sink never copies the metrics it holds: a thousand take about
// their own 16 KB of interfaces, not the 32 KB (and ten copies) of a
// slice grown by append. They come out in the order added.
func TestSinkChunksNotCopied(t *testing.T) {
	const n = 1000
	ms := make([]prometheus.Metric, n)
	d := desc("rdma_test_thing", "t.", "i")
	for i := range ms {
		ms[i] = expo.Gauge(d, float64(i), strconv.Itoa(i))
	}
	var out sink
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for _, m := range ms {
		out.add(m)
	}
	runtime.ReadMemStats(&m1)
	if got, limit := m1.TotalAlloc-m0.TotalAlloc, uint64(n*16*13/10); got > limit {
		t.Errorf("%d metrics took %d bytes, want at most %d", n, got, limit)
	}
	if got := out.all(); !slices.Equal(got, ms) {
		t.Errorf("the sink gives back %d metrics, not the %d added in order", len(got), n)
	}
}

// TestCollectorPanicIsItsError: a collector that panics after adding a
// sample fails alone (success 0, one error, its sample dropped) and the
// process lives; before, the panic ended the server.
func TestCollectorPanicIsItsError(t *testing.T) {
	a := newAggregator(host.New(host.Options{}), slog.New(slog.DiscardHandler), time.Second, map[string]Collector{
		"fake_ok": fakes()["fake_ok"],
		"fake_panic": fakeCollector{func(_ context.Context, out *sink) error {
			out.add(prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 99))
			var none []int
			_ = none[0]
			return nil
		}},
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Bind(context.Background()))
	want := `
# HELP rdma_fake fake
# TYPE rdma_fake gauge
rdma_fake 7
# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="fake_ok"} 1
rdma_scrape_collector_success{collector="fake_panic"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rdma_fake", "rdma_scrape_collector_success"); err != nil {
		t.Fatal(err)
	}
}
