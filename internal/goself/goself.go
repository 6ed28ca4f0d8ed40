// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package goself exports the exporter's own go_* series: the names, types
// and sources of client_golang's default Go collector
// (collectors.NewGoCollector), read for less. That collector gathers
// through its registry on every scrape: 54 µs, 70 kB and 361 allocations
// (go test -bench), 8-9 % of a dgx-h100 scrape's CPU in an A/B run of the
// server. Here one runtime/metrics.Read fills a kept sample list and the
// values go out as expo samples the text path writes directly, the GC
// pause summary of debug.ReadGCStats among them.
package goself

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/expo"
)

// series is one go_* gauge or counter: the sum of runtime/metrics values,
// by their indexes in Collector.samples.
type series struct {
	desc    *expo.Desc
	counter bool
	sources []int
}

// table is every go_* gauge and counter and the runtime/metrics values it
// adds up (the memstats names are the runtime.MemStats fields they stood
// for before runtime/metrics; client_golang keeps them, so do we).
var table = []struct {
	name, help string
	counter    bool
	sources    []string
}{
	{"go_gc_gogc_percent", "The GOGC setting: the heap growth, in percent of the live heap, that starts a GC cycle (runtime/metrics /gc/gogc:percent).", false, []string{"/gc/gogc:percent"}},
	{"go_gc_gomemlimit_bytes", "The GOMEMLIMIT setting, in bytes; math.MaxInt64 when unset (runtime/metrics /gc/gomemlimit:bytes).", false, []string{"/gc/gomemlimit:bytes"}},
	{"go_sched_gomaxprocs_threads", "The GOMAXPROCS setting: how many OS threads run Go code at once (runtime/metrics /sched/gomaxprocs:threads).", false, []string{"/sched/gomaxprocs:threads"}},
	{"go_memstats_alloc_bytes", "Bytes of heap objects in use (memory/classes/heap/objects).", false, []string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_alloc_bytes_total", "Bytes allocated on the heap since start, freed or not (gc/heap/allocs).", true, []string{"/gc/heap/allocs:bytes"}},
	{"go_memstats_buck_hash_sys_bytes", "Bytes of the profiling bucket hash table (memory/classes/profiling/buckets).", false, []string{"/memory/classes/profiling/buckets:bytes"}},
	{"go_memstats_frees_total", "Heap objects freed since start, tiny ones included (gc/heap/frees plus gc/heap/tiny/allocs).", true, []string{"/gc/heap/frees:objects", "/gc/heap/tiny/allocs:objects"}},
	{"go_memstats_gc_sys_bytes", "Bytes of garbage collector metadata (memory/classes/metadata/other).", false, []string{"/memory/classes/metadata/other:bytes"}},
	{"go_memstats_heap_alloc_bytes", "Bytes of heap objects in use, as go_memstats_alloc_bytes (memory/classes/heap/objects).", false, []string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_heap_idle_bytes", "Heap bytes holding no object: returned to the OS or free to reuse (memory/classes/heap/released plus free).", false, []string{"/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{"go_memstats_heap_inuse_bytes", "Heap bytes in spans that hold objects (memory/classes/heap/objects plus unused).", false, []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}},
	{"go_memstats_heap_objects", "Heap objects in use (gc/heap/objects).", false, []string{"/gc/heap/objects:objects"}},
	{"go_memstats_heap_released_bytes", "Heap bytes returned to the OS (memory/classes/heap/released).", false, []string{"/memory/classes/heap/released:bytes"}},
	{"go_memstats_heap_sys_bytes", "Heap bytes mapped from the OS (memory/classes/heap: objects, unused, released and free).", false, []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{"go_memstats_mallocs_total", "Heap objects allocated since start, tiny ones included (gc/heap/allocs plus gc/heap/tiny/allocs).", true, []string{"/gc/heap/allocs:objects", "/gc/heap/tiny/allocs:objects"}},
	{"go_memstats_mcache_inuse_bytes", "Bytes of mcache structures in use (memory/classes/metadata/mcache/inuse).", false, []string{"/memory/classes/metadata/mcache/inuse:bytes"}},
	{"go_memstats_mcache_sys_bytes", "Bytes of mcache structures mapped from the OS (memory/classes/metadata/mcache: inuse and free).", false, []string{"/memory/classes/metadata/mcache/inuse:bytes", "/memory/classes/metadata/mcache/free:bytes"}},
	{"go_memstats_mspan_inuse_bytes", "Bytes of mspan structures in use (memory/classes/metadata/mspan/inuse).", false, []string{"/memory/classes/metadata/mspan/inuse:bytes"}},
	{"go_memstats_mspan_sys_bytes", "Bytes of mspan structures mapped from the OS (memory/classes/metadata/mspan: inuse and free).", false, []string{"/memory/classes/metadata/mspan/inuse:bytes", "/memory/classes/metadata/mspan/free:bytes"}},
	{"go_memstats_next_gc_bytes", "Heap size at which the next GC cycle is to end (gc/heap/goal).", false, []string{"/gc/heap/goal:bytes"}},
	{"go_memstats_other_sys_bytes", "Bytes of other runtime allocations (memory/classes/other).", false, []string{"/memory/classes/other:bytes"}},
	{"go_memstats_stack_inuse_bytes", "Bytes of goroutine stacks on the heap (memory/classes/heap/stacks).", false, []string{"/memory/classes/heap/stacks:bytes"}},
	{"go_memstats_stack_sys_bytes", "Bytes of stacks mapped from the OS: goroutine and OS thread stacks (memory/classes/heap/stacks plus os-stacks).", false, []string{"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes"}},
	{"go_memstats_sys_bytes", "Bytes mapped from the OS by the Go runtime (memory/classes/total).", false, []string{"/memory/classes/total:bytes"}},
}

// Collector is the go_* series. Safe for concurrent use.
type Collector struct {
	series                                  []series
	goroutines, threads, info, pauses, last *expo.Desc

	mu sync.Mutex
	// samples is the runtime/metrics values read, each once.
	samples []metrics.Sample
	// gc is reused: ReadGCStats fills its pause history in place once it
	// is large enough, instead of allocating it on every scrape.
	gc debug.GCStats
}

// New returns the collector. A runtime/metrics value this Go release
// does not have leaves its series out.
func New() *Collector {
	c := &Collector{
		goroutines: expo.NewDesc("go_goroutines", "Goroutines that exist now."),
		threads:    expo.NewDesc("go_threads", "OS threads the Go runtime has created (runtime.ThreadCreateProfile)."),
		info:       expo.NewDesc("go_info", "1, labelled with the Go release the exporter was built with.", "version"),
		pauses: expo.NewDesc("go_gc_duration_seconds",
			"Stop-the-world pause time of the GC cycles: quantiles over the recent cycles, sum and count since start."),
		last: expo.NewDesc("go_memstats_last_gc_time_seconds",
			"When the last GC cycle ended, in seconds since the epoch (0: none yet)."),
	}
	index := map[string]int{}
	known := map[string]bool{}
	for _, d := range metrics.All() {
		known[d.Name] = true
	}
	for _, t := range table {
		ok := true
		for _, src := range t.sources {
			ok = ok && known[src]
		}
		if !ok {
			continue
		}
		idx := make([]int, len(t.sources))
		for i, src := range t.sources {
			j, seen := index[src]
			if !seen {
				j = len(c.samples)
				index[src] = j
				c.samples = append(c.samples, metrics.Sample{Name: src})
			}
			idx[i] = j
		}
		c.series = append(c.series, series{desc: expo.NewDesc(t.name, t.help), counter: t.counter, sources: idx})
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.series {
		ch <- s.desc.Prometheus()
	}
	for _, d := range []*expo.Desc{c.goroutines, c.threads, c.info, c.pauses, c.last} {
		ch <- d.Prometheus()
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.AppendMetrics(nil) {
		ch <- m
	}
}

// AppendMetrics appends what Collect sends to out: the metrics handler
// takes them as a slice, without a goroutine and a channel per scrape.
func (c *Collector) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	c.mu.Lock()
	metrics.Read(c.samples)
	for _, s := range c.series {
		v, ok := 0.0, true
		for _, i := range s.sources {
			x, good := value(c.samples[i].Value)
			v += x
			ok = ok && good
		}
		if !ok {
			continue
		}
		if s.counter {
			out = append(out, expo.Counter(s.desc, v))
		} else {
			out = append(out, expo.Gauge(s.desc, v))
		}
	}
	out = c.appendGC(out)
	c.mu.Unlock()
	threads, _ := runtime.ThreadCreateProfile(nil)
	return append(out,
		expo.Gauge(c.goroutines, float64(runtime.NumGoroutine())),
		expo.Gauge(c.threads, float64(threads)),
		expo.Gauge(c.info, 1, runtime.Version()))
}

// value is a runtime/metrics value as a float; false for a kind this
// package does not export (a histogram, or a name the runtime does not
// know, KindBad).
func value(v metrics.Value) (float64, bool) {
	switch v.Kind() {
	case metrics.KindUint64:
		return float64(v.Uint64()), true
	case metrics.KindFloat64:
		return v.Float64(), true
	}
	return 0, false
}

// appendGC appends the series of debug.ReadGCStats: the
// go_gc_duration_seconds summary (quantiles 0, 0.25, 0.5, 0.75 and 1 of
// the recent pauses, their sum and count since start) and
// go_memstats_last_gc_time_seconds. Called with mu held.
func (c *Collector) appendGC(out []prometheus.Metric) []prometheus.Metric {
	s := &c.gc
	if s.PauseQuantiles == nil {
		s.PauseQuantiles = make([]time.Duration, 5)
	}
	debug.ReadGCStats(s)
	q := make([]expo.Quantile, len(s.PauseQuantiles))
	for i, d := range s.PauseQuantiles {
		q[i] = expo.Quantile{Q: float64(i) / float64(len(s.PauseQuantiles)-1), V: d.Seconds()}
	}
	last := 0.0
	if !s.LastGC.IsZero() {
		last = float64(s.LastGC.UnixNano()) / 1e9
	}
	return append(out,
		expo.Summary(c.pauses, uint64(s.NumGC), s.PauseTotal.Seconds(), q),
		expo.Gauge(c.last, last))
}
