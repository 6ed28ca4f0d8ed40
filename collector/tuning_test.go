// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

func tuningOn(t *testing.T, host string, cfg *config.Config, with ...func(*rdmahost.Options)) Collector {
	t.Helper()
	if cfg != nil {
		with = append(with, func(o *rdmahost.Options) {
			o.Tuning = tuning.Options{MemlockProcesses: cfg.Tuning.MemlockProcesses}
		})
	}
	env := hostEnv(t, "../fixtures/hosts/"+host, with...)
	if cfg != nil {
		env.Config = cfg
	}
	c := NewTuningCollector(env, tuning.DefaultModules)
	c.(*tuningCollector).cgroups = true // --collector.tuning.cgroup-limits
	return on(env, c)
}

// The slurm host: memlock of the exporter, of slurmd, and of the worst of
// two slurmstepd; the rdma cgroup limit of a job.
func TestTuningDGX(t *testing.T) {
	cfg, err := config.Parse([]byte("tuning:\n  memlock_processes: [slurmd, slurmstepd, opensm]\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := gatherOne(t, "tuning", tuningOn(t, "dgx-h100", cfg))
	want := `
# HELP rdma_host_memlock_limit_bytes RLIMIT_MEMLOCK of the exporter (process="self") or of a configured process in bytes; +Inf when unlimited.
# TYPE rdma_host_memlock_limit_bytes gauge
rdma_host_memlock_limit_bytes{limit="hard",process="self"} 8.388608e+06
rdma_host_memlock_limit_bytes{limit="hard",process="slurmd"} +Inf
rdma_host_memlock_limit_bytes{limit="hard",process="slurmstepd"} 65536
rdma_host_memlock_limit_bytes{limit="soft",process="self"} 8.388608e+06
rdma_host_memlock_limit_bytes{limit="soft",process="slurmd"} +Inf
rdma_host_memlock_limit_bytes{limit="soft",process="slurmstepd"} 65536
# HELP rdma_host_memlock_processes Running processes of a name configured in tuning.memlock_processes.
# TYPE rdma_host_memlock_processes gauge
rdma_host_memlock_processes{process="opensm"} 0
rdma_host_memlock_processes{process="slurmd"} 1
rdma_host_memlock_processes{process="slurmstepd"} 2
# HELP rdma_host_cpu_governor_cpus Online CPUs running a cpufreq governor; absent without cpufreq (VMs).
# TYPE rdma_host_cpu_governor_cpus gauge
rdma_host_cpu_governor_cpus{governor="performance"} 224
# HELP rdma_host_selinux_info SELinux mode (enforcing, permissive, disabled); informational, rdma_doctor never changes it; always 1.
# TYPE rdma_host_selinux_info gauge
rdma_host_selinux_info{mode="disabled"} 1
# HELP rdma_host_transparent_hugepages Selected transparent hugepage mode (setting enabled or defrag); always 1.
# TYPE rdma_host_transparent_hugepages gauge
rdma_host_transparent_hugepages{mode="madvise",setting="defrag"} 1
rdma_host_transparent_hugepages{mode="madvise",setting="enabled"} 1
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_host_memlock_limit_bytes", "rdma_host_memlock_processes",
		"rdma_host_cpu_governor_cpus", "rdma_host_selinux_info", "rdma_host_transparent_hugepages"); err != nil {
		t.Error(err)
	}
	// 8 devices limited in job_4242, both resources each
	if n, err := testutil.GatherAndCount(g, "rdma_host_cgroup_rdma_limit"); err != nil || n != 16 {
		t.Errorf("%d cgroup limit series, %v; want 16", n, err)
	}
	if n, err := testutil.GatherAndCount(g, "rdma_host_module_loaded"); err != nil || n != len(tuning.DefaultModules) {
		t.Errorf("%d module series, %v", n, err)
	}
}

// The powersave host and the RHEL host with 1 GiB hugepages, split over
// the two nodes, and the classic 64 KiB memlock of slurmd.
func TestTuningHosts(t *testing.T) {
	for _, tc := range []struct {
		host, want string
		metrics    []string
	}{
		{"numa-remote", `
# HELP rdma_host_cpu_governor_cpus Online CPUs running a cpufreq governor; absent without cpufreq (VMs).
# TYPE rdma_host_cpu_governor_cpus gauge
rdma_host_cpu_governor_cpus{governor="powersave"} 62
`, []string{"rdma_host_cpu_governor_cpus"}},
		{"iwarp-i40iw", "", []string{"rdma_host_cpu_governor_cpus", "rdma_host_cgroup_rdma_limit"}},
		{"cx6-hdr-fdr", `
# HELP rdma_host_hugepages Hugepages configured in the system-wide pool of this page size (nr_hugepages).
# TYPE rdma_host_hugepages gauge
rdma_host_hugepages{size_bytes="1073741824"} 16
rdma_host_hugepages{size_bytes="2097152"} 0
# HELP rdma_host_node_hugepages_free Free hugepages of this size on a NUMA node.
# TYPE rdma_host_node_hugepages_free gauge
rdma_host_node_hugepages_free{node="0",size_bytes="1073741824"} 4
rdma_host_node_hugepages_free{node="0",size_bytes="2097152"} 0
rdma_host_node_hugepages_free{node="1",size_bytes="1073741824"} 8
rdma_host_node_hugepages_free{node="1",size_bytes="2097152"} 0
# HELP rdma_host_memlock_limit_bytes RLIMIT_MEMLOCK of the exporter (process="self") or of a configured process in bytes; +Inf when unlimited.
# TYPE rdma_host_memlock_limit_bytes gauge
rdma_host_memlock_limit_bytes{limit="hard",process="self"} 65536
rdma_host_memlock_limit_bytes{limit="soft",process="self"} 65536
# HELP rdma_host_sysctl Value of a /proc/sys setting (vm.max_map_count, vm.nr_hugepages, net.core.rmem_max, ...).
# TYPE rdma_host_sysctl gauge
rdma_host_sysctl{name="kernel.numa_balancing"} 1
rdma_host_sysctl{name="net.core.netdev_max_backlog"} 250000
rdma_host_sysctl{name="net.core.rmem_default"} 212992
rdma_host_sysctl{name="net.core.rmem_max"} 1.6777216e+07
rdma_host_sysctl{name="net.core.wmem_default"} 212992
rdma_host_sysctl{name="net.core.wmem_max"} 1.6777216e+07
rdma_host_sysctl{name="vm.max_map_count"} 262144
rdma_host_sysctl{name="vm.nr_hugepages"} 0
`, []string{"rdma_host_hugepages", "rdma_host_node_hugepages_free", "rdma_host_memlock_limit_bytes", "rdma_host_sysctl"}},
	} {
		t.Run(tc.host, func(t *testing.T) {
			if err := testutil.GatherAndCompare(gatherOne(t, "tuning", tuningOn(t, tc.host, nil)), strings.NewReader(tc.want), tc.metrics...); err != nil {
				t.Error(err)
			}
		})
	}
}

// The broken host: the collector fails (errors counted), every garbled
// value is absent, the intact ones are there.
func TestTuningBroken(t *testing.T) {
	g := gatherOne(t, "tuning", tuningOn(t, "broken", nil))
	want := `
# HELP rdma_scrape_collector_errors Read and parse errors a collector met in this scrape; their series are left out.
# TYPE rdma_scrape_collector_errors gauge
rdma_scrape_collector_errors{collector="tuning"} 10
# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="tuning"} 0
# HELP rdma_host_transparent_hugepages Selected transparent hugepage mode (setting enabled or defrag); always 1.
# TYPE rdma_host_transparent_hugepages gauge
rdma_host_transparent_hugepages{mode="madvise",setting="defrag"} 1
# HELP rdma_host_cpu_governor_cpus Online CPUs running a cpufreq governor; absent without cpufreq (VMs).
# TYPE rdma_host_cpu_governor_cpus gauge
rdma_host_cpu_governor_cpus{governor="performance"} 222
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_scrape_collector_errors", "rdma_scrape_collector_success",
		"rdma_host_transparent_hugepages", "rdma_host_cpu_governor_cpus", "rdma_host_kernel_info", "rdma_host_selinux_info", "rdma_host_memlock_limit_bytes"); err != nil {
		t.Error(err)
	}
	for name, want := range map[string]int{"rdma_host_sysctl": 6, "rdma_host_hugepages": 0, "rdma_host_hugepages_free": 1, "rdma_host_module_loaded": len(tuning.DefaultModules), "rdma_host_cgroup_rdma_limit": 2} {
		if n, err := testutil.GatherAndCount(g, name); err != nil || n != want {
			t.Errorf("%s: %d series, %v; want %d", name, n, err, want)
		}
	}
}

func BenchmarkScrapeTuning(b *testing.B) {
	env := benchEnv(b, "dgx-h100")
	c := on(env, NewTuningCollector(env, tuning.DefaultModules))
	benchCollector(b, c)
}

// Per-cgroup series (per job or pod) are off by default.
func TestTuningCgroupLimitsOffByDefault(t *testing.T) {
	env := hostEnv(t, "../fixtures/hosts/dgx-h100")
	c, err := Table[3].New(env, DefaultFlags())
	if err != nil || Table[3].Name != "tuning" {
		t.Fatal(Table[3].Name, err)
	}
	if n, err := testutil.GatherAndCount(gatherOne(t, "tuning", on(env, c)), "rdma_host_cgroup_rdma_limit"); err != nil || n != 0 {
		t.Errorf("%d cgroup limit series by default, %v; want 0", n, err)
	}
}

// The device filter also hides rdma cgroup limits of excluded devices.
func TestTuningDeviceFilter(t *testing.T) {
	c := tuningOn(t, "dgx-h100", nil, excluding(t, "mlx5_[4-9]"))
	if n, err := testutil.GatherAndCount(gatherOne(t, "tuning", c), "rdma_host_cgroup_rdma_limit"); err != nil || n != 4 {
		t.Errorf("%d cgroup limit series, %v; want 4 (mlx5_0 and mlx5_1)", n, err)
	}
}
