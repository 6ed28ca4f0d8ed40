// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package goself

import (
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// gather is what reg's collectors export, by family name.
func gather(t *testing.T, cs ...prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	return out
}

func val(mf *dto.MetricFamily) float64 {
	m := mf.GetMetric()[0]
	return m.GetGauge().GetValue() + m.GetCounter().GetValue()
}

// The series are those of client_golang's default Go collector, family
// for family: the same names, types and label names, the settings equal,
// and the memory figures read a moment apart from the same runtime close
// to each other. A pedantic registry checks that each metric is
// consistent with its Desc.
func TestMatchesClientGolang(t *testing.T) {
	c := New()
	ours := gather(t, c)
	theirs := gather(t, collectors.NewGoCollector())
	after := gather(t, c)
	var missing, extra []string
	for name := range theirs {
		if ours[name] == nil {
			missing = append(missing, name)
		}
	}
	for name := range ours {
		if theirs[name] == nil {
			extra = append(extra, name)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("families missing %v, extra %v", missing, extra)
	}
	for name, mf := range theirs {
		o := ours[name]
		if o.GetType() != mf.GetType() || len(o.GetMetric()) != len(mf.GetMetric()) {
			t.Errorf("%s: type %v, %d series; client_golang %v, %d", name, o.GetType(), len(o.GetMetric()), mf.GetType(), len(mf.GetMetric()))
			continue
		}
		if got, want := labelNames(o.GetMetric()[0]), labelNames(mf.GetMetric()[0]); !slices.Equal(got, want) {
			t.Errorf("%s: labels %v, client_golang %v", name, got, want)
		}
	}
	for _, name := range []string{"go_gc_gogc_percent", "go_gc_gomemlimit_bytes", "go_sched_gomaxprocs_threads"} {
		if got, want := val(ours[name]), val(theirs[name]); got != want {
			t.Errorf("%s = %v, client_golang %v", name, got, want)
		}
	}
	if got := ours["go_info"].GetMetric()[0].GetLabel()[0].GetValue(); got != runtime.Version() {
		t.Errorf("go_info version %q, want %q", got, runtime.Version())
	}
	// Mapped memory can grow between two reads (the heap maps a new
	// arena): client_golang's value lies between ours before and after
	// it, give or take a tenth.
	for _, name := range []string{"go_memstats_sys_bytes", "go_memstats_heap_sys_bytes", "go_memstats_stack_sys_bytes", "go_memstats_gc_sys_bytes"} {
		a, b, want := val(ours[name]), val(after[name]), val(theirs[name])
		lo, hi := math.Min(a, b), math.Max(a, b)
		if want <= 0 || want < lo*0.9 || want > hi*1.1 {
			t.Errorf("%s: client_golang %v, ours %v before and %v after it", name, want, a, b)
		}
	}
	if s := ours["go_gc_duration_seconds"].GetMetric()[0].GetSummary(); len(s.GetQuantile()) != 5 {
		t.Errorf("go_gc_duration_seconds has %d quantiles, want 5", len(s.GetQuantile()))
	}
}

// Each family has its own help, not client_golang's text, and says where
// its value comes from.
func TestHelp(t *testing.T) {
	c := New()
	ours := gather(t, c)
	theirs := gather(t, collectors.NewGoCollector())
	for name, mf := range ours {
		if mf.GetHelp() == theirs[name].GetHelp() {
			t.Errorf("%s: the help is client_golang's", name)
		}
		if strings.HasPrefix(name, "go_memstats_") && name != "go_memstats_last_gc_time_seconds" && !strings.Contains(mf.GetHelp(), "/") {
			t.Errorf("%s: the help names no runtime/metrics source: %q", name, mf.GetHelp())
		}
	}
}

// Counters only grow: two reads with allocations between them.
func TestCountersGrow(t *testing.T) {
	c := New()
	first := gather(t, c)
	sink := make([][]byte, 0, 1000)
	for range 1000 {
		sink = append(sink, make([]byte, 64))
	}
	_ = sink
	second := gather(t, c)
	for _, name := range []string{"go_memstats_alloc_bytes_total", "go_memstats_mallocs_total"} {
		if a, b := val(first[name]), val(second[name]); b <= a {
			t.Errorf("%s went from %v to %v across 1000 allocations", name, a, b)
		}
	}
}
