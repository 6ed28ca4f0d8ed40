// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

func gatherHost(t *testing.T, host string, cfg *config.Config) prometheus.Gatherer {
	t.Helper()
	env := hostEnv(t, "../fixtures/hosts/"+host)
	env.Config = cfg
	return gatherOne(t, "infiniband", on(env, NewInfinibandCollector(env)))
}

// The guide's case: a 200 Gb/s HDR card whose port trained at FDR, and a
// second port at 2X width, both below the configured expectation.
func TestInfinibandDegradedLink(t *testing.T) {
	cfg, err := config.Parse([]byte("expected:\n  boards:\n    - board_id: MT_0000000223\n      rate_gbps: 200\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP rdma_port_expected_rate_bytes_per_second Rate the port is expected to run at, from the config file or the board_id table; absent when unknown.
# TYPE rdma_port_expected_rate_bytes_per_second gauge
rdma_port_expected_rate_bytes_per_second{device="mlx5_0",port="1"} 2.5e+10
rdma_port_expected_rate_bytes_per_second{device="mlx5_1",port="1"} 2.5e+10
# HELP rdma_port_link_degraded 1 when the expected rate is known and the active rate is below it.
# TYPE rdma_port_link_degraded gauge
rdma_port_link_degraded{device="mlx5_0",port="1"} 1
rdma_port_link_degraded{device="mlx5_1",port="1"} 1
# HELP rdma_port_link_width_lanes Active link width in lanes.
# TYPE rdma_port_link_width_lanes gauge
rdma_port_link_width_lanes{device="mlx5_0",port="1"} 4
rdma_port_link_width_lanes{device="mlx5_1",port="1"} 2
# HELP rdma_port_rate_bytes_per_second Active link rate.
# TYPE rdma_port_rate_bytes_per_second gauge
rdma_port_rate_bytes_per_second{device="mlx5_0",port="1"} 7e+09
rdma_port_rate_bytes_per_second{device="mlx5_1",port="1"} 1.25e+10
`
	if err := testutil.GatherAndCompare(gatherHost(t, "cx6-hdr-fdr", cfg), strings.NewReader(want),
		"rdma_port_expected_rate_bytes_per_second", "rdma_port_link_degraded", "rdma_port_link_width_lanes", "rdma_port_rate_bytes_per_second"); err != nil {
		t.Error(err)
	}
	// Without a config nothing is expected of an unknown board: no series,
	// never a guess from the HCA family.
	n, err := testutil.GatherAndCount(gatherHost(t, "cx6-hdr-fdr", &config.Config{}), "rdma_port_expected_rate_bytes_per_second", "rdma_port_link_degraded")
	if err != nil || n != 0 {
		t.Errorf("without config: %d expected/degraded series, %v; want none", n, err)
	}
}

func TestInfinibandDGX(t *testing.T) {
	g := gatherHost(t, "dgx-h100", &config.Config{})
	want := `
# HELP rdma_port_link_degraded 1 when the expected rate is known and the active rate is below it.
# TYPE rdma_port_link_degraded gauge
rdma_port_link_degraded{device="mlx5_0",port="1"} 0
rdma_port_link_degraded{device="mlx5_1",port="1"} 0
rdma_port_link_degraded{device="mlx5_4",port="1"} 0
rdma_port_link_degraded{device="mlx5_5",port="1"} 0
rdma_port_link_degraded{device="mlx5_6",port="1"} 0
rdma_port_link_degraded{device="mlx5_7",port="1"} 0
rdma_port_link_degraded{device="mlx5_8",port="1"} 0
rdma_port_link_degraded{device="mlx5_9",port="1"} 0
rdma_port_link_degraded{device="mlx5_bond_0",port="1"} 0
# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="infiniband"} 1
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_port_link_degraded", "rdma_scrape_collector_success"); err != nil {
		t.Error(err)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for key, v := range map[string]float64{
		// port_rcv_data 205128687774249 words × 4 (gpud PR #943).
		"rdma_port_data_received_bytes_total,device=mlx5_1,port=1":                820514751096996,
		"rdma_port_link_downed_total,device=mlx5_1,port=1":                        255,
		"rdma_port_counter_saturated,counter=link_downed,device=mlx5_1,port=1":    1,
		"rdma_port_counter_saturated,counter=port_xmit_wait,device=mlx5_5,port=1": 1,
		"rdma_port_counter_saturated,counter=symbol_error,device=mlx5_0,port=1":   0,
		"rdma_port_rate_bytes_per_second,device=mlx5_bond_0,port=1":               25e9,
		"rdma_port_link_width_lanes,device=mlx5_bond_0,port=1":                    2,
		"rdma_port_expected_rate_bytes_per_second,device=mlx5_0,port=1":           50e9,
		"rdma_port_state,device=mlx5_4,port=1":                                    4,
		"rdma_port_physical_state,device=mlx5_4,port=1":                           5,
		"rdma_port_hw_counter_total,counter=out_of_sequence,device=mlx5_0,port=1": 0,
	} {
		if g, ok := got[key]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", key, g, ok, v)
		}
	}
	for key := range got {
		if strings.Contains(key, "counter=lifespan") {
			t.Errorf("lifespan exported as a counter: %s", key)
		}
	}
}

// The label slices a collection reuses from the last one follow the
// counters: after mlx5_0 is re-registered with one counter fewer and one
// hw counter more, a collector that has served the old device writes
// exactly what a new one writes.
func TestInfinibandLabelsFollowCounters(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, "../fixtures/hosts/cx6-hdr-fdr", root)
	env := hostEnv(t, root)
	served := gatherOne(t, "infiniband", on(env, NewInfinibandCollector(env)))
	before := gatherText(t, served)
	if !strings.Contains(before, `counter="symbol_error",device="mlx5_0",port="1"`) {
		t.Fatal("the fixture's mlx5_0 port 1 has no symbol_error counter")
	}

	// A re-registration: a new link and directory, with other counters.
	dir := hostfstest.Reregister(t, filepath.Join(root, "sys"), "mlx5_0")
	if err := os.Remove(filepath.Join(dir, "ports/1/counters/symbol_error")); err != nil {
		t.Fatal(err)
	}
	// out_of_buffer is a real mlx5 hw counter the fixture's port lacks.
	if err := os.WriteFile(filepath.Join(dir, "ports/1/hw_counters/out_of_buffer"), []byte("12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := gatherText(t, served)
	fresh := hostEnv(t, root)
	want := gatherText(t, gatherOne(t, "infiniband", on(fresh, NewInfinibandCollector(fresh))))
	if after != want {
		t.Errorf("after re-registration, the collector that served the old device writes\n%s\nwant\n%s", after, want)
	}
	if strings.Contains(after, `counter="symbol_error",device="mlx5_0",port="1"`) || !strings.Contains(after, `counter="out_of_buffer",device="mlx5_0",port="1"`) {
		t.Error("the re-registered device's counters are not those of its new directory")
	}
}

// gatherText is g's exposition, less what changes between two
// collections of the same tree: the collector's duration and the
// process's count of kept descriptors.
func gatherText(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if n := mf.GetName(); n == "rdma_scrape_collector_duration_seconds" || n == "rdma_host_kept_descriptors" {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// hwCounterOrder is the label values (counter, device[, port]) of the
// samples of family name in the order the collector sends them.
func hwCounterOrder(t *testing.T, env Env, name string) [][]string {
	t.Helper()
	var out sink
	if err := NewInfinibandCollector(env).Update(context.Background(), env.Host.Snapshot(), &out); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, m := range out.all() {
		if !strings.Contains(m.Desc().String(), `"`+name+`"`) {
			continue
		}
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		var values []string // in label-name order, as the exposition sorts
		for _, lp := range pb.GetLabel() {
			values = append(values, lp.GetValue())
		}
		got = append(got, values)
	}
	return got
}

// The hw counter families sort by counter first; the collector sends
// them in that order (counter by counter across devices and ports), so
// the exposition does not merge a run per port. (No fixture has device
// hw counters on more than one device; they go the same way.)
func TestInfinibandHWCountersSentInOrder(t *testing.T) {
	got := hwCounterOrder(t, hostEnv(t, "../fixtures/hosts/dgx-h100"), "rdma_port_hw_counter_total")
	if len(got) != 9*25 { // 9 devices of one port, 25 counters each (lifespan is no counter)
		t.Errorf("%d samples, want %d", len(got), 9*25)
	}
	for i := 1; i < len(got); i++ {
		if slices.Compare(got[i-1], got[i]) >= 0 {
			t.Fatalf("sample %d %v sent after %v", i, got[i], got[i-1])
		}
	}
}

// A port that lacks a counter the others have (a failed read, another
// driver) gets its counters sent port by port: none is lost or
// repeated.
func TestInfinibandHWCountersUneven(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, "../fixtures/hosts/dgx-h100", root)
	dir, err := filepath.EvalSymlinks(filepath.Join(root, "sys/class/infiniband/mlx5_4"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "ports/1/hw_counters/duplicate_request")); err != nil {
		t.Fatal(err)
	}
	got := hwCounterOrder(t, hostEnv(t, root), "rdma_port_hw_counter_total")
	seen := map[string]bool{}
	for _, v := range got {
		k := strings.Join(v, "/")
		if seen[k] {
			t.Errorf("%s sent twice", k)
		}
		seen[k] = true
	}
	if len(seen) != 9*25-1 || seen["duplicate_request/mlx5_4/1"] || !seen["duplicate_request/mlx5_0/1"] {
		t.Errorf("%d distinct samples, want %d without mlx5_4's duplicate_request", len(seen), 9*25-1)
	}
}

// A class with no device (the RDMA core loaded, no driver bound: the
// side-by-side benchmark's generated-0 host) sends no hw counter and
// does not panic: counterMajor once indexed the first of no sets.
func TestInfinibandHWCountersNoDevice(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sys/class/infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := hwCounterOrder(t, hostEnv(t, root), "rdma_port_hw_counter_total"); len(got) != 0 {
		t.Errorf("%d port hw counters on a class with no device, want none", len(got))
	}
	if got := hwCounterOrder(t, hostEnv(t, root), "rdma_device_hw_counter_total"); len(got) != 0 {
		t.Errorf("%d device hw counters on a class with no device, want none", len(got))
	}
}
