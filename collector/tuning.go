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

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type tuningCollector struct {
	modules []string
	// keep hides the rdma cgroup limits of excluded devices, so that no
	// series names a device the operator excluded.
	keep func(string) bool
	// cgroups exports the per-cgroup rdma limits
	// (--collector.tuning.cgroup-limits).
	cgroups bool

	hugepages, hugepagesFree, nodeHugepages, nodeHugepagesFree *expo.Desc
	sysctl, governor, thp, kernel, selinux, module             *expo.Desc
	memlock, memlockProcs, cgroupRDMA                          *expo.Desc

	// out is the samples of the last read (a slow source).
	out rendered[*tuning.Snapshot]
}

func tuningSpec() Spec {
	return Spec{Name: "tuning", Default: true,
		Help: "host tuning from /proc and /sys: hugepages, sysctls, CPU governors, transparent hugepages, kernel, SELinux, RDMA modules, memlock limits, rdma cgroup limits",
		Flags: func(app *kingpin.Application, f *Flags) {
			o := &f.Tuning
			app.Flag("collector.tuning.modules",
				"Comma-separated kernel modules reported by rdma_host_module_loaded (1 loaded, 0 not).").
				Default(strings.Join(tuning.DefaultModules, ",")).StringVar(&o.Modules)
			app.Flag("collector.tuning.cgroup-limits",
				"Export rdma_host_cgroup_rdma_limit, one series per cgroup with a finite rdma.max: per job step or pod on a Slurm or Kubernetes node, so off by default (diagnose's cgroup.rdma judges them either way).").
				BoolVar(&o.CgroupLimits)
		},
		New: func(env Env, f *Flags) (Collector, error) {
			c := NewTuningCollector(env, f.Tuning.modules())
			c.(*tuningCollector).cgroups = f.Tuning.CgroupLimits
			return c, nil
		}}
}

// TuningOptions are the tuning collector's flags.
type TuningOptions struct {
	// Modules are the modules rdma_host_module_loaded reports
	// (comma-separated).
	Modules string
	// CgroupLimits exports rdma_host_cgroup_rdma_limit: one series per
	// cgroup, which on a Slurm or Kubernetes node means per job or pod.
	CgroupLimits bool
}

// modules are the module names of --collector.tuning.modules.
func (o TuningOptions) modules() []string {
	var mods []string
	for _, m := range strings.Split(o.Modules, ",") {
		if m = strings.TrimSpace(m); m != "" {
			mods = append(mods, m)
		}
	}
	return mods
}

// NewTuningCollector builds the tuning collector; modules are the module
// names reported loaded or not.
func NewTuningCollector(env Env, modules []string) Collector {
	c := &tuningCollector{
		modules: modules,
		keep:    env.Host.Keep,

		hugepages:         desc("rdma_host_hugepages", "Hugepages configured in the system-wide pool of this page size (nr_hugepages).", "size_bytes"),
		hugepagesFree:     desc("rdma_host_hugepages_free", "Hugepages of this size not in use (free_hugepages).", "size_bytes"),
		nodeHugepages:     desc("rdma_host_node_hugepages", "Hugepages of this size allocated on a NUMA node.", "node", "size_bytes"),
		nodeHugepagesFree: desc("rdma_host_node_hugepages_free", "Free hugepages of this size on a NUMA node.", "node", "size_bytes"),
		sysctl:            desc("rdma_host_sysctl", "Value of a /proc/sys setting (vm.max_map_count, vm.nr_hugepages, net.core.rmem_max, ...).", "name"),
		governor:          desc("rdma_host_cpu_governor_cpus", "Online CPUs running a cpufreq governor; absent without cpufreq (VMs).", "governor"),
		thp:               desc("rdma_host_transparent_hugepages", "Selected transparent hugepage mode (setting enabled or defrag); always 1.", "setting", "mode"),
		kernel:            desc("rdma_host_kernel_info", "Running kernel release; always 1.", "release"),
		selinux:           desc("rdma_host_selinux_info", "SELinux mode (enforcing, permissive, disabled); informational, rdma_doctor never changes it; always 1.", "mode"),
		module:            desc("rdma_host_module_loaded", "1 when the kernel module is in /proc/modules, 0 when not (built-in drivers never are).", "module"),
		memlock:           desc("rdma_host_memlock_limit_bytes", "RLIMIT_MEMLOCK of the exporter (process=\"self\") or of a configured process in bytes; +Inf when unlimited.", "process", "limit"),
		memlockProcs:      desc("rdma_host_memlock_processes", "Running processes of a name configured in tuning.memlock_processes.", "process"),
		cgroupRDMA:        desc("rdma_host_cgroup_rdma_limit", "A finite limit in a cgroup v2 rdma.max (entries that are all max are left out); +Inf for max.", "cgroup", "device", "resource"),
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

func (c *tuningCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	s, err := snap.Tuning(ctx)
	if s == nil {
		return err
	}
	rerr := c.out.append(out, s, err, func(out *sink) error {
		for _, p := range s.Hugepages {
			size := strconv.FormatUint(p.SizeBytes, 10)
			if p.Node < 0 {
				optGauge(out, c.hugepages, p.Total, size)
				optGauge(out, c.hugepagesFree, p.Free, size)
			} else {
				node := strconv.Itoa(p.Node)
				optGauge(out, c.nodeHugepages, p.Total, node, size)
				optGauge(out, c.nodeHugepagesFree, p.Free, node, size)
			}
		}
		for _, sc := range s.Sysctls {
			if sc.Values.OK && len(sc.Values.V) == 1 {
				gauge(out, c.sysctl, float64(sc.Values.V[0]), sc.Name)
			}
		}
		for g, n := range s.GovernorCounts() {
			gauge(out, c.governor, float64(n), g)
		}
		if s.THPEnabled.OK {
			gauge(out, c.thp, 1, "enabled", s.THPEnabled.V)
		}
		if s.THPDefrag.OK {
			gauge(out, c.thp, 1, "defrag", s.THPDefrag.V)
		}
		if s.KernelRelease.OK {
			gauge(out, c.kernel, 1, s.KernelRelease.V)
		}
		if s.SELinux.OK {
			gauge(out, c.selinux, 1, s.SELinux.V)
		}
		for _, m := range c.modules {
			if loaded, ok := s.ModuleLoaded(m); ok {
				gauge(out, c.module, b2f(loaded), m)
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
			gauge(out, c.memlock, limitValue(p.soft), name, "soft")
			gauge(out, c.memlock, limitValue(p.hard), name, "hard")
		}
		for name, n := range s.MemlockProcesses {
			gauge(out, c.memlockProcs, float64(n), name)
		}
		for _, l := range s.RDMACgroups {
			if !c.cgroups || !l.Limited() || !c.keep(l.Device) {
				continue
			}
			gauge(out, c.cgroupRDMA, limitValue(l.HCAHandle), l.Cgroup, l.Device, "hca_handle")
			gauge(out, c.cgroupRDMA, limitValue(l.HCAObject), l.Cgroup, l.Device, "hca_object")
		}
		return errors.Join(s.Errors...)
	})
	return errors.Join(rerr, err)
}
