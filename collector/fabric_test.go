// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
)

// fabricOn is the fabric collector of opts over a host whose options run
// the scan (and, with opts.Counters, the sweep) of opts. No loop runs
// them: the test runs their rounds (Host.Round).
func fabricOn(t *testing.T, opts FabricOptions) (*FabricCollector, *rdmahost.Host) {
	t.Helper()
	h := rdmahost.New(rdmahost.Options{Fabric: &opts.FabricOptions})
	return NewFabricCollector(Env{Host: h, Logger: slog.New(slog.DiscardHandler)}, opts), h
}

// ibsimFabric is a collector whose host has scanned and swept the
// recorded ibsim fabric (internal/read/fabric/testdata/ibqueryerrors: faults
// set through ibsim's console, see that README), replayed by fake tools.
func ibsimFabric(t *testing.T, opts FabricOptions) Collector {
	t.Helper()
	tools := fabrictest.Install(t)
	opts.Path, opts.Counters, opts.IBQueryErrorsPath, opts.IBNetDiscoverPath, opts.SMInfoPath, opts.CacheDir = tools.IBLinkInfo, true, tools.IBQueryErrors, tools.IBNetDiscover, tools.SMInfo, t.TempDir()
	if opts.PortSeries == "" {
		opts.PortSeries = PortSeriesAll
	}
	c, h := fabricOn(t, opts)
	h.Round(context.Background())
	return hosted{c, h}
}

// shard is the fabric options of shard i of n.
func shard(i, n int) FabricOptions {
	return FabricOptions{FabricOptions: rdmahost.FabricOptions{Shard: i, Shards: n}}
}

// fabricSeries returns name's samples as "label=value,..." -> value.
func fabricSeries(t *testing.T, c Collector, name string) map[string]float64 {
	t.Helper()
	mfs, err := gatherOne(t, "fabric", c).Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(ls, ",")] = sampleValue(m)
		}
	}
	return out
}

func sampleValue(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

const (
	leaf1Label  = "guid=" + fabrictest.Leaf1
	leaf2Label  = "guid=" + fabrictest.Leaf2
	leaf3Label  = "guid=" + fabrictest.Leaf3
	leaf4Label  = "guid=" + fabrictest.Leaf4
	spine1Label = "guid=" + fabrictest.Spine1
	ports       = fabrictest.SwitchPorts
)

func TestFabricCounterSeries(t *testing.T) {
	c := ibsimFabric(t, FabricOptions{})
	for _, w := range []struct {
		name, labels string
		want         float64
	}{
		{"rdma_fabric_port_symbol_errors_total", leaf1Label + ",port=1", 4200},
		{"rdma_fabric_port_symbol_errors_total", leaf3Label + ",port=1", 0}, // a clean port: a real zero
		{"rdma_fabric_port_counter_saturated", "counter=symbol_error," + leaf1Label + ",port=2", 1},
		{"rdma_fabric_port_counter_saturated", "counter=symbol_error," + leaf1Label + ",port=1", 0},
		{"rdma_fabric_port_counter_saturated", "counter=port_xmit_wait," + leaf3Label + ",port=6", 0},
		{"rdma_fabric_port_link_downed_total", leaf2Label + ",port=5", 3},
		{"rdma_fabric_port_transmit_discards_total", spine1Label + ",port=2", 77},
		{"rdma_fabric_port_transmit_wait_total", leaf3Label + ",port=6", 100000},
		{"rdma_fabric_port_state", leaf4Label + ",port=4", 1}, // unplugged, still a series
		{"rdma_fabric_port_physical_state", leaf4Label + ",port=4", 2},
		{"rdma_fabric_port_state", leaf4Label + ",port=1", 4},
		{"rdma_fabric_port_counters_unknown", leaf4Label + ",port=4", 0},
		{"rdma_fabric_node_info", leaf1Label + ",node=leaf001,node_type=switch", 1},
		{"rdma_fabric_counter_sweep_success", "", 1},
		{"rdma_fabric_counter_sweep_ports", "", ports},
		{"rdma_fabric_counter_sweep_ports_unknown", "", 0},
		{"rdma_fabric_counter_sweep_failures_total", "reason=mad_failed", 0},
		{"rdma_fabric_counter_sweep_skipped_total", "", 0},
		{"rdma_fabric_counter_sweep_in_progress_seconds", "", 0}, // Round's sweep has ended
	} {
		got, ok := fabricSeries(t, c, w.name)[w.labels]
		if !ok || got != w.want {
			t.Errorf("%s{%s} = %v (present %v), want %v", w.name, w.labels, got, ok, w.want)
		}
	}
	// Data counters are 4-octet words, exported in octets; 64-bit fields
	// (PortCountersExtended) have no saturated series.
	_, h := unwrap(c)
	words := h.Snapshot().FabricSweep(context.Background()).Last.Find(0x200002, 1).Values[fabric.DataReceived].V
	if got := fabricSeries(t, c, "rdma_fabric_port_data_received_bytes_total")[leaf1Label+",port=1"]; got != float64(words)*4 || words == 0 {
		t.Errorf("data received %v, want %d words x 4", got, words)
	}
	if _, ok := fabricSeries(t, c, "rdma_fabric_port_counter_saturated")["counter=port_rcv_data,"+leaf1Label+",port=1"]; ok {
		t.Error("a 64-bit counter has a saturated series")
	}
	if n := len(fabricSeries(t, c, "rdma_fabric_port_state")); n != ports {
		t.Errorf("%d port state series, want every switch port (%d)", n, ports)
	}
	if n := len(fabricSeries(t, c, "rdma_fabric_counter_sweep_failures_total")); n != len(fabric.Reasons) {
		t.Errorf("%d failure reasons exported, want all %d", n, len(fabric.Reasons))
	}
}

// TestFabricPortSeriesTrim: the trimming modes drop counter series, never
// a port's state or unknown series.
func TestFabricPortSeriesTrim(t *testing.T) {
	count := func(c Collector) (state, unknown, counters int) {
		mfs, err := gatherOne(t, "fabric", c).Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch n := mf.GetName(); {
			case n == "rdma_fabric_port_state":
				state = len(mf.GetMetric())
			case n == "rdma_fabric_port_counters_unknown":
				unknown = len(mf.GetMetric())
			case strings.HasPrefix(n, "rdma_fabric_port_") && strings.HasSuffix(n, "_total"):
				counters += len(mf.GetMetric())
			}
		}
		return
	}
	s0, u0, all := count(ibsimFabric(t, FabricOptions{}))
	s1, u1, errs := count(ibsimFabric(t, FabricOptions{PortSeries: PortSeriesErrors}))
	s2, u2, erroring := count(ibsimFabric(t, FabricOptions{PortSeries: PortSeriesErroringPorts}))
	if s0 != ports || s1 != ports || s2 != ports || u0 != ports || u1 != ports || u2 != ports {
		t.Errorf("state/unknown series %d/%d %d/%d %d/%d, want %d each", s0, u0, s1, u1, s2, u2, ports)
	}
	// Four ports have error counters set in the console: leaf1's two
	// symbol errors, spine1's discards, leaf2's link downed (leaf3's
	// XmitWait is not an error).
	if all != ports*17 || errs != ports*13 || erroring != 4*17 {
		t.Errorf("counter series all %d errors %d erroring-ports %d, want %d %d %d", all, errs, erroring, ports*17, ports*13, 4*17)
	}
	if _, err := testutil.GatherAndCount(gatherOne(t, "fabric", ibsimFabric(t, FabricOptions{}))); err != nil {
		t.Error(err)
	}
}

// TestFabricShards: two and three exporters split the switches by GUID;
// the union of their per-port and per-link series covers every port and
// link exactly once, and the fabric-wide counts come from one shard only.
func TestFabricShards(t *testing.T) {
	allLinks := len(fabricSeries(t, ibsimFabric(t, FabricOptions{}), "rdma_fabric_link_info"))
	for _, n := range []int{2, 3} {
		ports, links := map[string]int{}, map[string]int{}
		wide := 0
		for i := range n {
			c := ibsimFabric(t, shard(i, n))
			wide += len(fabricSeries(t, c, "rdma_fabric_links")) + len(fabricSeries(t, c, "rdma_fabric_links_degraded"))
			for k := range fabricSeries(t, c, "rdma_fabric_port_symbol_errors_total") {
				ports[k]++
			}
			for k := range fabricSeries(t, c, "rdma_fabric_port_state") {
				ports["state "+k]++
			}
			for k := range fabricSeries(t, c, "rdma_fabric_link_info") {
				links[k]++
			}
		}
		if len(ports) != 2*fabrictest.SwitchPorts || len(links) != allLinks || allLinks == 0 {
			t.Errorf("%d shards: %d port series, %d links; want %d and %d", n, len(ports), len(links), 2*fabrictest.SwitchPorts, allLinks)
		}
		if wide != 2 {
			t.Errorf("%d shards: rdma_fabric_links and _links_degraded exported %d times in all, want once each", n, wide)
		}
		for k, v := range ports {
			if v != 1 {
				t.Errorf("%d shards: %s exported %d times", n, k, v)
			}
		}
	}
}

func TestParseShard(t *testing.T) {
	for s, ok := range map[string]bool{"0/1": true, "1/3": true, "3/3": false, "-1/2": false, "1": false, "a/b": false, "0/0": false} {
		if _, _, err := ParseShard(s); (err == nil) != ok {
			t.Errorf("ParseShard(%q) err %v", s, err)
		}
	}
}

// TestFabricSweepReadsNothing: a sweep that reads none of its ports
// (ibnetdiscover missing) is sweep success 0, every port unknown, and an
// error of the collector; the ports' state series stay.
func TestFabricSweepReadsNothing(t *testing.T) {
	tools := fabrictest.Install(t)
	fc, h := fabricOn(t, FabricOptions{FabricOptions: rdmahost.FabricOptions{Path: tools.IBLinkInfo, Counters: true, IBQueryErrorsPath: tools.IBQueryErrors,
		IBNetDiscoverPath: filepath.Join(t.TempDir(), "ibnetdiscover"), SMInfoPath: tools.SMInfo, CacheDir: t.TempDir()}, PortSeries: PortSeriesAll})
	h.Round(context.Background())
	c := hosted{fc, h}
	for name, want := range map[string]float64{
		"rdma_fabric_counter_sweep_success":       0,
		"rdma_fabric_counter_sweep_ports_unknown": ports,
		"rdma_scrape_collector_success":           0,
	} {
		got := fabricSeries(t, c, name)
		if len(got) == 0 {
			t.Errorf("no %s", name)
		}
		for k, v := range got {
			if v != want && (name != "rdma_scrape_collector_success" || strings.Contains(k, "fabric")) {
				t.Errorf("%s{%s} = %v, want %v", name, k, v, want)
			}
		}
	}
	if got := fabricSeries(t, c, "rdma_fabric_counter_sweep_failures_total")["reason=start_failed"]; got != 1 {
		t.Errorf("start_failed = %v, want 1 (the discovery that could not start)", got)
	}
	if n := len(fabricSeries(t, c, "rdma_fabric_port_state")); n != ports {
		t.Errorf("%d state series", n)
	}
	if n := len(fabricSeries(t, c, "rdma_fabric_port_symbol_errors_total")); n != 0 {
		t.Errorf("%d symbol error series from a sweep that read nothing", n)
	}
}

// TestFabricSweepOverrun: while a sweep runs its age is exported; once it
// has overrun its interval the sweeper's stand-in (every port unknown)
// reads success 0, its ports unknown, and the collector says why.
func TestFabricSweepOverrun(t *testing.T) {
	c, _ := fabricOn(t, FabricOptions{})
	now := time.Date(2025, 1, 1, 0, 10, 0, 0, time.UTC)
	began := now.Add(-90 * time.Second)
	ports := []fabric.PortCounters{{PortLine: fabric.PortLine{GUID: 0x200002, Port: 1, Switch: true}, Unknown: true, Reason: fabric.ReasonTimeout},
		{PortLine: fabric.PortLine{GUID: 0x200002, Port: 2, Switch: true}, Unknown: true, Reason: fabric.ReasonTimeout}}
	st := fabric.SweepStatus{Running: began, Skipped: 1, Sweeps: 1, LastSuccess: now.Add(-2 * time.Minute), Failures: map[fabric.Reason]uint64{},
		Last: &fabric.Sweep{Start: began, Overrun: true, Ports: ports, Unknown: len(ports), Failures: map[fabric.Reason]int{}}}
	value := func(out *sink, name string) (float64, bool) {
		for _, m := range out.all() {
			if strings.Contains(m.Desc().String(), `"`+name+`"`) {
				var d dto.Metric
				if err := m.Write(&d); err != nil {
					t.Fatal(err)
				}
				return sampleValue(&d), true
			}
		}
		return 0, false
	}
	out := &sink{}
	err := c.sweepHealth(out, st, now)
	if err == nil || !strings.Contains(err.Error(), "past its interval") {
		t.Errorf("error %v, want the overrun named", err)
	}
	for name, want := range map[string]float64{
		"rdma_fabric_counter_sweep_in_progress_seconds": 90,
		"rdma_fabric_counter_sweep_success":             0,
		"rdma_fabric_counter_sweep_ports_unknown":       2,
		"rdma_fabric_counter_sweep_skipped_total":       1,
	} {
		if got, ok := value(out, name); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	st.Running = time.Time{}
	out = &sink{}
	_ = c.sweepHealth(out, st, now)
	if got, ok := value(out, "rdma_fabric_counter_sweep_in_progress_seconds"); !ok || got != 0 {
		t.Errorf("no sweep running: in progress %v (present %v), want 0", got, ok)
	}
}
