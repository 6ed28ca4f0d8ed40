// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package procself

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		m[f.GetName()] = f
	}
	return m
}

func value(f *dto.MetricFamily) float64 {
	m := f.GetMetric()[0]
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// The collector exports what client_golang's process collector exports on
// this machine's kernel: the same families with the same help and types,
// one unlabelled series each, and the same values where they cannot move
// between the two reads (ours is read first: counters can only be ahead
// in theirs).
func TestSameAsClientGolang(t *testing.T) {
	ours := gather(t, New())
	theirs := gather(t, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if len(theirs) == 0 {
		t.Fatal("client_golang's process collector exported nothing")
	}
	if len(ours) != len(theirs) {
		t.Errorf("%d families, client_golang %d", len(ours), len(theirs))
	}
	for name, want := range theirs {
		got := ours[name]
		if got == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if got.GetHelp() != want.GetHelp() || got.GetType() != want.GetType() || len(got.Metric) != 1 || len(got.Metric[0].Label) != 0 {
			t.Errorf("%s: help %q type %v %d series, want %q %v one unlabelled", name, got.GetHelp(), got.GetType(), len(got.Metric), want.GetHelp(), want.GetType())
			continue
		}
		g, w := value(got), value(want)
		switch name {
		case "process_max_fds", "process_virtual_memory_max_bytes":
			if g != w {
				t.Errorf("%s = %v, want %v", name, g, w)
			}
		case "process_start_time_seconds":
			if math.Abs(g-w) > 0.011 {
				t.Errorf("%s = %v, want %v", name, g, w)
			}
		case "process_cpu_seconds_total", "process_network_receive_bytes_total", "process_network_transmit_bytes_total":
			if g > w || g < 0 {
				t.Errorf("%s = %v, ahead of client_golang's later %v", name, g, w)
			}
		case "process_open_fds", "process_virtual_memory_bytes", "process_resident_memory_bytes":
			if g <= 0 || g > 2*w || w > 2*g {
				t.Errorf("%s = %v, client_golang %v", name, g, w)
			}
		default:
			t.Errorf("%s: a family this test does not know", name)
		}
	}
}

// A second collection re-reads the kept files: the CPU time counter does
// not go back and the start time stays.
func TestCollectTwice(t *testing.T) {
	c := New()
	first := gather(t, c)
	x := 0
	for i := range 2_000_000 {
		x += i
	}
	_ = x
	second := gather(t, c)
	for _, n := range []string{"process_cpu_seconds_total", "process_start_time_seconds"} {
		if first[n] == nil || second[n] == nil {
			t.Fatalf("%s missing", n)
		}
	}
	if value(second["process_cpu_seconds_total"]) < value(first["process_cpu_seconds_total"]) {
		t.Error("CPU time went back")
	}
	if value(second["process_start_time_seconds"]) != value(first["process_start_time_seconds"]) {
		t.Error("start time changed")
	}
}

func TestParseStat(t *testing.T) {
	// rdma_doctor's own line on this project's machine (Linux 6.18,
	// recorded while it served dgx-h100), with a command name of spaces
	// and parentheses put in.
	line := "26066 (rdma (doc) tor) S 1 26063 17363 0 -1 4194304 83950 0 0 0 1288 556 0 0 20 0 11 0 577229 2063835136 6774 " +
		"18446744073709551615 4194304 11240064 140724345373760 0 0 0 1002060288 0 2143420159 0 0 0 17 0 0 0 0 0 0 " +
		"18841600 19326528 1034678272 140724345375036 140724345375175 140724345375175 140724345376730 0\n"
	st, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stat{UTime: 1288, STime: 556, StartTime: 577229, VSize: 2063835136, RSS: 6774}); st != want {
		t.Errorf("ParseStat = %+v, want %+v", st, want)
	}
	for _, bad := range []string{"", "4242 (x S 1 2", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 2650 0 0 0 x 12 0 0 20 0 9 0 1733 1296187392 6343"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q): no error", bad)
		}
	}
}

func TestParseNetstat(t *testing.T) {
	in := "TcpExt: SyncookiesSent TW\nTcpExt: 0 57592\n" +
		"IpExt: InNoRoutes InOctets OutOctets InMcastOctets\nIpExt: 0 27442381108 26772411032 0\n"
	r, w, err := ParseNetstat([]byte(in))
	if err != nil || r != 27442381108 || w != 26772411032 {
		t.Errorf("ParseNetstat = %v, %v, %v", r, w, err)
	}
	if r, w, err := ParseNetstat([]byte("IpExt: InNoRoutes\nIpExt: 3\n")); err != nil || r != 0 || w != 0 {
		t.Errorf("without the octet fields: %v, %v, %v; want 0, 0 as client_golang", r, w, err)
	}
	for _, bad := range []string{"", "TcpExt: a\nTcpExt: 1\n", "IpExt: InOctets OutOctets\nIpExt: 1\n", "IpExt: InOctets\nIpExt: x\n"} {
		if _, _, err := ParseNetstat([]byte(bad)); err == nil {
			t.Errorf("ParseNetstat(%q): no error", bad)
		}
	}
}

// What one collection costs, here and in client_golang's process
// collector (package comment): go test -bench . -benchmem. On a host of
// few CPUs /proc/stat is short, so the library's extra cost here is less
// than on a large host, where the kernel prints every IRQ's count summed
// over every CPU for it.
func BenchmarkCollect(b *testing.B) {
	for _, c := range []struct {
		name string
		c    prometheus.Collector
	}{
		{"procself", New()},
		{"client_golang", collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
	} {
		b.Run(c.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(c.c)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
