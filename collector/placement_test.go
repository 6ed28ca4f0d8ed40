// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
)

const fixtureHosts = "../fixtures/hosts/"

// The remote-NUMA host: both HCAs on node 1, every completion IRQ allowed
// only on node-0 CPUs, mlx5_1's all on CPU 0, irqbalance running, mlx5_1's
// PCIe link at 16 of 32 GT/s.
func TestPlacementNUMARemote(t *testing.T) {
	env := hostEnv(t, fixtureHosts+"numa-remote")
	want := `
# HELP rdma_device_irq_cpus Distinct CPUs the device's completion IRQs are delivered to; 1 means all on one CPU.
# TYPE rdma_device_irq_cpus gauge
rdma_device_irq_cpus{device="mlx5_0"} 16
rdma_device_irq_cpus{device="mlx5_1"} 1
# HELP rdma_device_irqs Completion IRQs of the RDMA device's PCI function in /proc/interrupts.
# TYPE rdma_device_irqs gauge
rdma_device_irqs{device="mlx5_0"} 16
rdma_device_irqs{device="mlx5_1"} 16
# HELP rdma_device_irqs_off_node Completion IRQs allowed (smp_affinity_list) on at least one CPU outside the device's local_cpulist.
# TYPE rdma_device_irqs_off_node gauge
rdma_device_irqs_off_node{device="mlx5_0"} 16
rdma_device_irqs_off_node{device="mlx5_1"} 16
# HELP rdma_host_irqbalance_running 1 when an irqbalance process runs in this PID namespace (it rewrites IRQ affinity, undoing manual pinning).
# TYPE rdma_host_irqbalance_running gauge
rdma_host_irqbalance_running 1
# HELP rdma_scrape_collector_errors Read and parse errors a collector met in this scrape; their series are left out.
# TYPE rdma_scrape_collector_errors gauge
rdma_scrape_collector_errors{collector="irq"} 0
`
	if err := testutil.GatherAndCompare(gatherOne(t, "irq", on(env, NewIRQCollector(env, false))), strings.NewReader(want),
		"rdma_device_irqs", "rdma_device_irqs_off_node", "rdma_device_irq_cpus", "rdma_host_irqbalance_running",
		"rdma_scrape_collector_errors", "rdma_device_irq_info"); err != nil {
		t.Error(err)
	}
	want = `
# HELP rdma_device_numa_node NUMA node of the RDMA device's PCI function (numa_node); -1 when the platform assigns none.
# TYPE rdma_device_numa_node gauge
rdma_device_numa_node{device="mlx5_0"} 1
rdma_device_numa_node{device="mlx5_1"} 1
# HELP rdma_device_pci_info PCI function of the RDMA device and the CPUs local to it (local_cpulist); always 1.
# TYPE rdma_device_pci_info gauge
rdma_device_pci_info{device="mlx5_0",local_cpulist="16-31,48-61",pci_address="0000:98:00.0"} 1
rdma_device_pci_info{device="mlx5_1",local_cpulist="16-31,48-61",pci_address="0000:c8:00.0"} 1
# HELP rdma_device_pcie_link_degraded 1 when the PCIe link trained slower or narrower than the function supports (a card in a lesser slot included).
# TYPE rdma_device_pcie_link_degraded gauge
rdma_device_pcie_link_degraded{device="mlx5_0"} 0
rdma_device_pcie_link_degraded{device="mlx5_1"} 1
# HELP rdma_device_pcie_link_speed_gts Current PCIe link speed per lane in GT/s (current_link_speed).
# TYPE rdma_device_pcie_link_speed_gts gauge
rdma_device_pcie_link_speed_gts{device="mlx5_0"} 32
rdma_device_pcie_link_speed_gts{device="mlx5_1"} 16
# HELP rdma_device_pcie_link_max_speed_gts Highest PCIe link speed the function supports, in GT/s (max_link_speed).
# TYPE rdma_device_pcie_link_max_speed_gts gauge
rdma_device_pcie_link_max_speed_gts{device="mlx5_0"} 32
rdma_device_pcie_link_max_speed_gts{device="mlx5_1"} 32
# HELP rdma_device_pcie_link_width_lanes Current PCIe link width in lanes (current_link_width).
# TYPE rdma_device_pcie_link_width_lanes gauge
rdma_device_pcie_link_width_lanes{device="mlx5_0"} 16
rdma_device_pcie_link_width_lanes{device="mlx5_1"} 16
`
	if err := testutil.GatherAndCompare(gatherOne(t, "pci", on(env, NewPCICollector(env))), strings.NewReader(want),
		"rdma_device_numa_node", "rdma_device_pci_info", "rdma_device_pcie_link_degraded",
		"rdma_device_pcie_link_speed_gts", "rdma_device_pcie_link_max_speed_gts", "rdma_device_pcie_link_width_lanes"); err != nil {
		t.Error(err)
	}
}

func TestPlacementPerIRQ(t *testing.T) {
	env := hostEnv(t, fixtureHosts+"numa-remote")
	g := gatherOne(t, "irq", on(env, NewIRQCollector(env, true)))
	for metric, n := range map[string]int{"rdma_device_irq_info": 34, "rdma_device_irq_interrupts_total": 34, "rdma_device_irq_off_node": 34} {
		if got, err := testutil.GatherAndCount(g, metric); err != nil || got != n {
			t.Errorf("%s: %d series, %v; want %d", metric, got, err, n)
		}
	}
	want := map[string]string{
		// mlx5_1 comp0: allowed and delivered on CPU 0, node 0
		`rdma_device_irq_info{device="mlx5_1",effective_affinity_list="0",irq="201",kind="completion",name="mlx5_comp0@pci:0000:c8:00.0",smp_affinity_list="0"}`: "1",
		// the async vector may run anywhere, node 1 included: off-node too
		`rdma_device_irq_info{device="mlx5_0",effective_affinity_list="0",irq="180",kind="control",name="mlx5_async0@pci:0000:98:00.0",smp_affinity_list="0-61"}`: "1",
		`rdma_device_irq_off_node{device="mlx5_0",irq="180"}`: "1",
		`rdma_device_irq_off_node{device="mlx5_0",irq="195"}`: "1",
	}
	got := seriesMap(t, g)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %s", k, got[k], v)
		}
	}
	// Off by default: no per-IRQ series.
	if n, _ := testutil.GatherAndCount(gatherOne(t, "irq", on(env, NewIRQCollector(env, false))), "rdma_device_irq_info"); n != 0 {
		t.Errorf("%d per-IRQ series without the flag", n)
	}
}

// seriesMap renders every gathered series as name{labels} -> value.
func seriesMap(t *testing.T, g prometheus.Gatherer) map[string]string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			key := mf.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			out[key] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) string {
	switch {
	case m.Gauge != nil:
		return strconv.FormatFloat(m.Gauge.GetValue(), 'g', -1, 64)
	case m.Counter != nil:
		return strconv.FormatFloat(m.Counter.GetValue(), 'g', -1, 64)
	}
	return "?"
}

// TestPlacementBroken: every fault of the broken host leaves out exactly
// the series it affects.
func TestPlacementBroken(t *testing.T) {
	env := hostEnv(t, fixtureHosts+"broken")
	got := seriesMap(t, gatherOne(t, "irq", on(env, NewIRQCollector(env, false))))
	got2 := seriesMap(t, gatherOne(t, "pci", on(env, NewPCICollector(env))))
	for k, v := range got2 {
		got[k] = v
	}
	for k, v := range map[string]string{
		`rdma_device_irqs{device="mlx5_0"}`:                  "16",
		`rdma_device_irqs_off_node{device="mlx5_0"}`:         "0",
		`rdma_device_irq_cpus{device="mlx5_0"}`:              "16",
		`rdma_device_irqs{device="mlx5_2"}`:                  "16",
		`rdma_device_irq_cpus{device="mlx5_2"}`:              "16",
		`rdma_device_irqs{device="mlx5_3"}`:                  "16",
		`rdma_host_irqbalance_running`:                       "0",
		`rdma_device_numa_node{device="mlx5_0"}`:             "0",
		`rdma_device_numa_node{device="mlx5_3"}`:             "0",
		`rdma_device_pcie_link_width_lanes{device="mlx5_3"}`: "16",
		`rdma_scrape_collector_success{collector="irq"}`:     "0",
		`rdma_scrape_collector_errors{collector="irq"}`:      "2", // torn lines, garbage affinity
		`rdma_scrape_collector_success{collector="pci"}`:     "0",
		`rdma_scrape_collector_errors{collector="pci"}`:      "1", // numa_node garbage
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %s", k, got[k], v)
		}
	}
	for _, absent := range []string{
		`rdma_device_irqs{device="mlx5_1"}`, // torn line: the count would be short
		`rdma_device_irqs_off_node{device="mlx5_1"}`,
		`rdma_device_irq_cpus{device="mlx5_1"}`,
		`rdma_device_irqs_off_node{device="mlx5_2"}`, // garbage smp_affinity_list
		`rdma_device_irqs_off_node{device="mlx5_3"}`, // /proc/irq entries missing
		`rdma_device_irq_cpus{device="mlx5_3"}`,
		`rdma_device_numa_node{device="mlx5_2"}`,           // numa_node garbage
		`rdma_device_pcie_link_speed_gts{device="mlx5_3"}`, // "Unknown"
		`rdma_device_pcie_link_degraded{device="mlx5_3"}`,
		`rdma_device_irqs{device="mlx5_4"}`, // dangling class link
		`rdma_device_pci_info{device="mlx5_4"`,
	} {
		for k := range got {
			if strings.HasPrefix(k, absent) {
				t.Errorf("series for a broken input present: %s", k)
			}
		}
	}
}

// TestPlacementAllHosts: every fixture host has the three contract series
// for each PCI RDMA device, the irqbalance gauge, and no errors.
func TestPlacementAllHosts(t *testing.T) {
	for host, devices := range map[string]int{
		"dgx-h100": 9, "cx6-hdr-fdr": 2, "roce-cx6dx": 2, "mlx4-qdr": 1, "iwarp-i40iw": 1, "opa-hfi1": 1, "numa-remote": 2,
	} {
		env := hostEnv(t, fixtureHosts+host)
		g := gatherOne(t, "irq", on(env, NewIRQCollector(env, false)))
		for _, m := range []string{"rdma_device_irqs", "rdma_device_irqs_off_node", "rdma_device_irq_cpus"} {
			if n, err := testutil.GatherAndCount(g, m); err != nil || n != devices {
				t.Errorf("%s: %s has %d series, %v; want %d", host, m, n, err, devices)
			}
		}
		got := seriesMap(t, g)
		if got[`rdma_scrape_collector_errors{collector="irq"}`] != "0" || got["rdma_host_irqbalance_running"] == "" {
			t.Errorf("%s: errors %s, irqbalance %q", host, got[`rdma_scrape_collector_errors{collector="irq"}`], got["rdma_host_irqbalance_running"])
		}
		if host == "dgx-h100" || host == "cx6-hdr-fdr" || host == "roce-cx6dx" {
			for k, v := range got {
				if strings.HasPrefix(k, "rdma_device_irqs_off_node") && v != "0" {
					t.Errorf("%s: %s = %s, want 0", host, k, v)
				}
			}
		}
		gp := gatherOne(t, "pci", on(env, NewPCICollector(env)))
		if n, err := testutil.GatherAndCount(gp, "rdma_device_numa_node", "rdma_device_pci_info"); err != nil || n != 2*devices {
			t.Errorf("%s: %d numa/pci_info series, %v; want %d", host, n, err, 2*devices)
		}
	}
}

// TestPlacementFilterAndNoRDMA: the infiniband device filter applies, and a
// host without RDMA is no error.
func TestPlacementFilterAndNoRDMA(t *testing.T) {
	env := hostEnv(t, fixtureHosts+"numa-remote", excluding(t, "mlx5_1"))
	for name, c := range map[string]Collector{"irq": on(env, NewIRQCollector(env, true)), "pci": on(env, NewPCICollector(env))} {
		got := seriesMap(t, gatherOne(t, name, c))
		for k := range got {
			if strings.Contains(k, `"mlx5_1"`) {
				t.Errorf("%s: excluded device read: %s", name, k)
			}
		}
	}
	empty := hostEnv(t, t.TempDir())
	for name, c := range map[string]Collector{"irq": on(empty, NewIRQCollector(empty, false)), "pci": on(empty, NewPCICollector(empty))} {
		inner, h := unwrap(c)
		if err := inner.Update(context.Background(), h.Snapshot(), &sink{}); err != nil {
			t.Errorf("%s on a host without RDMA: %v", name, err)
		}
	}
}

// BenchmarkScrapePlacement: the pci and irq collectors on the DGX fixture
// host (224 CPUs, 10 mlx5 functions of 17 vectors, a 460 KiB
// /proc/interrupts), as /metrics runs them: Aggregator in a registry,
// Gather per iteration. The slow-state cache is off, so each iteration is
// what one refresh of that state costs (a scrape within diagnose.interval
// of the last refresh reads none of it).
func BenchmarkScrapePlacement(b *testing.B) {
	for _, tc := range []struct {
		name   string
		perIRQ bool
		only   []string
	}{
		{"pci", false, []string{"pci"}},
		{"irq", false, []string{"irq"}},
		{"pci+irq", false, []string{"pci", "irq"}},
		{"pci+irq/per-irq", true, []string{"pci", "irq"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			env := hostEnv(b, fixtureHosts+"dgx-h100", func(o *rdmahost.Options) { o.SlowRefresh = -1 })
			cs := map[string]Collector{"pci": NewPCICollector(env), "irq": NewIRQCollector(env, tc.perIRQ)}
			run := map[string]Collector{}
			for _, n := range tc.only {
				run[n] = cs[n]
			}
			a := newAggregator(env.Host, env.Logger, 0, run)
			reg := prometheus.NewRegistry()
			reg.MustRegister(a.Bind(context.Background()))
			b.ReportAllocs()
			for b.Loop() {
				mfs, err := reg.Gather()
				if err != nil || len(mfs) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
