// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/tuning"
)

var tuningModules = kingpin.Flag("collector.tuning.modules",
	"Comma-separated kernel modules reported by rdma_host_module_loaded (1 loaded, 0 not).").
	Default(strings.Join(tuning.DefaultModules, ",")).String()

func init() {
	registerCollector("tuning", true, "host tuning from /proc and /sys: hugepages, sysctls, CPU governors, transparent hugepages, kernel, SELinux, RDMA modules, memlock limits, rdma cgroup limits",
		func(env Env) (Collector, error) {
			var mods []string
			for _, m := range strings.Split(*tuningModules, ",") {
				if m = strings.TrimSpace(m); m != "" {
					mods = append(mods, m)
				}
			}
			filter, err := NewDeviceFilter(*ibDeviceInclude, *ibDeviceExclude)
			if err != nil {
				return nil, err
			}
			c := NewTuningCollector(env, mods).(*tuningCollector)
			c.filter = filter
			return c, nil
		})
}

type tuningCollector struct {
	host    hostfs.Host
	opts    tuning.Options
	modules []string
	// filter hides the rdma cgroup limits of excluded devices, so that no
	// series names a device the operator excluded.
	filter DeviceFilter

	hugepages, hugepagesFree, nodeHugepages, nodeHugepagesFree *prometheus.Desc
	sysctl, governor, thp, kernel, selinux, module             *prometheus.Desc
	memlock, memlockProcs, cgroupRDMA                          *prometheus.Desc
}

// NewTuningCollector builds the tuning collector; modules are the module
// names reported loaded or not.
func NewTuningCollector(env Env, modules []string) Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_host_"+name, help, labels, nil)
	}
	c := &tuningCollector{
		host:    env.Host,
		modules: modules,

		hugepages:         d("hugepages", "Hugepages configured in the system-wide pool of this page size (nr_hugepages).", "size_bytes"),
		hugepagesFree:     d("hugepages_free", "Hugepages of this size not in use (free_hugepages).", "size_bytes"),
		nodeHugepages:     d("node_hugepages", "Hugepages of this size allocated on a NUMA node.", "node", "size_bytes"),
		nodeHugepagesFree: d("node_hugepages_free", "Free hugepages of this size on a NUMA node.", "node", "size_bytes"),
		sysctl:            d("sysctl", "Value of a /proc/sys setting (vm.max_map_count, vm.nr_hugepages, net.core.rmem_max, ...); net.core.* affect sockets and IPoIB, not verbs.", "name"),
		governor:          d("cpu_governor_cpus", "Online CPUs running a cpufreq governor; absent without cpufreq (VMs).", "governor"),
		thp:               d("transparent_hugepages", "Selected transparent hugepage mode (setting enabled or defrag); always 1.", "setting", "mode"),
		kernel:            d("kernel_info", "Running kernel release; always 1.", "release"),
		selinux:           d("selinux_info", "SELinux mode (enforcing, permissive, disabled); informational, rdma_doctor never changes it; always 1.", "mode"),
		module:            d("module_loaded", "1 when the kernel module is in /proc/modules, 0 when not (built-in drivers never are).", "module"),
		memlock:           d("memlock_limit_bytes", "RLIMIT_MEMLOCK (ulimit -l) of rdma_doctor itself (process=\"self\") or of the lowest-limited running process of a configured name; +Inf when unlimited.", "process", "limit"),
		memlockProcs:      d("memlock_processes", "Running processes of a name configured in tuning.memlock_processes.", "process"),
		cgroupRDMA:        d("cgroup_rdma_limit", "A finite limit in a cgroup v2 rdma.max (entries that are all max are left out); +Inf for max.", "cgroup", "device", "resource"),
	}
	if env.Config != nil {
		c.opts.MemlockProcesses = env.Config.Tuning.MemlockProcesses
	}
	return c
}

// limitValue turns a kernel limit into a sample: unlimited is +Inf, so
// "limit < X" alerts work without a special case.
func limitValue(v uint64) float64 {
	if v == tuning.Unlimited {
		return math.Inf(1)
	}
	return float64(v)
}

func (c *tuningCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	s, err := tuning.Read(ctx, c.host, c.opts)
	if s == nil {
		return err
	}
	for _, p := range s.Hugepages {
		size := strconv.FormatUint(p.SizeBytes, 10)
		if p.Node < 0 {
			optGauge(ch, c.hugepages, p.Total, size)
			optGauge(ch, c.hugepagesFree, p.Free, size)
		} else {
			node := strconv.Itoa(p.Node)
			optGauge(ch, c.nodeHugepages, p.Total, node, size)
			optGauge(ch, c.nodeHugepagesFree, p.Free, node, size)
		}
	}
	for _, sc := range s.Sysctls {
		if sc.Values.OK && len(sc.Values.V) == 1 {
			gauge(ch, c.sysctl, float64(sc.Values.V[0]), sc.Name)
		}
	}
	for g, n := range s.GovernorCounts() {
		gauge(ch, c.governor, float64(n), g)
	}
	if s.THPEnabled.OK {
		gauge(ch, c.thp, 1, "enabled", s.THPEnabled.V)
	}
	if s.THPDefrag.OK {
		gauge(ch, c.thp, 1, "defrag", s.THPDefrag.V)
	}
	if s.KernelRelease.OK {
		gauge(ch, c.kernel, 1, s.KernelRelease.V)
	}
	if s.SELinux.OK {
		gauge(ch, c.selinux, 1, s.SELinux.V)
	}
	for _, m := range c.modules {
		if loaded, ok := s.ModuleLoaded(m); ok {
			gauge(ch, c.module, b2f(loaded), m)
		}
	}
	// One series pair per name: the lowest limit among its processes is
	// the one that breaks a job.
	type pair struct{ soft, hard uint64 }
	low := map[string]pair{}
	for _, m := range s.Memlock {
		p, seen := low[m.Process]
		if !seen || m.Soft < p.soft {
			p.soft = m.Soft
		}
		if !seen || m.Hard < p.hard {
			p.hard = m.Hard
		}
		low[m.Process] = p
	}
	for name, p := range low {
		gauge(ch, c.memlock, limitValue(p.soft), name, "soft")
		gauge(ch, c.memlock, limitValue(p.hard), name, "hard")
	}
	for name, n := range s.MemlockProcesses {
		gauge(ch, c.memlockProcs, float64(n), name)
	}
	for _, l := range s.RDMACgroups {
		if !l.Limited() || !c.filter.Keep(l.Device) {
			continue
		}
		gauge(ch, c.cgroupRDMA, limitValue(l.HCAHandle), l.Cgroup, l.Device, "hca_handle")
		gauge(ch, c.cgroupRDMA, limitValue(l.HCAObject), l.Cgroup, l.Device, "hca_object")
	}
	return errors.Join(append(s.Errors, err)...)
}
