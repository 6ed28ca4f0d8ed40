// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// TuningChecks registers the checks of tuning.go; checks.All lists every concern's.
func TuningChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "dev.driver",
		Title: "RDMA user-space access modules loaded",
		Reads: []diagnose.Source{diagnose.SourceTuning, diagnose.SourceInfiniband},
		Doc: "The modules user space needs next to the HCA driver are loaded (/proc/modules): ib_uverbs (verbs, /dev/infiniband/uverbs*), " +
			"rdma_ucm (rdma_cm, RoCE and iWARP connection setup) and, on hosts with InfiniBand ports, ib_umad (MAD tools: sminfo, perfquery, " +
			"ibdiagnet). A missing one warns: it may be built into the kernel (/sys/module/<name> then exists).",
		Remedy: "modprobe the module and persist it (/etc/modules-load.d/rdma.conf), or install the rdma-core/OFED package that loads it.",
		Run:    checkDevDriver,
	})
	l.Register(&diagnose.Check{
		ID:    "cpu.governor",
		Title: "CPU frequency governor",
		Reads: []diagnose.Source{diagnose.SourceTuning},
		Doc: "Every CPU runs the governor diagnose.policies.cpu_governor asks for (default performance, as both mlnx_tune " +
			"profiles set); skips on hosts without cpufreq (VMs).",
		Remedy: "cpupower frequency-set -g performance, or a tuned profile (action cpu-governor).",
		Run:    checkGovernor,
	})
	l.Register(&diagnose.Check{
		ID:    "mem.hugepages",
		Title: "Hugepages reserved",
		Reads: []diagnose.Source{diagnose.SourceTuning},
		Doc: "With diagnose.policies.hugepages set, at least min_pages pages of page_size_kib exist over the NUMA nodes; " +
			"hugepages help DPDK/VMA and some MPI/UCX setups, they are not required for verbs. Without the policy the check skips.",
		Remedy: "Reserve pages per NUMA node (/sys/devices/system/node/node<N>/hugepages/...; 1 GiB pages at boot: hugepagesz=1G hugepages=N) (action hugepages).",
		Run:    checkHugepages,
	})
	l.Register(&diagnose.Check{
		ID:    "mem.memlock",
		Title: "Locked-memory limit of the job launchers",
		Reads: []diagnose.Source{diagnose.SourceTuning},
		Doc: "RLIMIT_MEMLOCK of the processes named in tuning.memlock_processes (slurmd, ...) is unlimited, or at least " +
			"diagnose.policies.memlock_min_kib: verbs pin memory against it and the 64 KiB default makes registration fail (fail). " +
			"Without configured processes the check skips.",
		Remedy: "A limits.d drop-in (* soft/hard memlock unlimited) and LimitMEMLOCK=infinity for systemd-started launchers (action memlock).",
		Run:    checkMemlock,
	})
	l.Register(&diagnose.Check{
		ID:    "sysctl.net",
		Title: "Socket buffer sysctls for IPoIB",
		Reads: []diagnose.Source{diagnose.SourceTuning, diagnose.SourceNetdev},
		Doc: "On hosts with IPoIB netdevs, net.core.rmem_max and wmem_max are at least 4194304 and net.core.netdev_max_backlog " +
			"at least 250000 (mlnx-tools' values; diagnose.policies.sysctls). They tune sockets and IPoIB, not verbs or NCCL over IB, " +
			"so hosts without IPoIB skip.",
		Remedy: "sysctl -w the values and persist them in /etc/sysctl.d/90-rdma-doctor.conf (action sysctl).",
		Run:    checkSysctls,
	})
	l.Register(&diagnose.Check{
		ID:    "cgroup.rdma",
		Title: "rdma cgroup limits as configured",
		Reads: []diagnose.Source{diagnose.SourceTuning},
		Doc: "Each cgroup v2 rdma.max line named in diagnose.policies.rdma_cgroup_limits (device \"*\": every RDMA device of the host) " +
			"has the configured hca_handle and hca_object limits (warn otherwise, also when the cgroup has no rdma.max because it does not " +
			"exist or its parent does not enable the rdma controller). Too low a limit makes ibv_open_device or QP/MR creation fail with " +
			"EAGAIN inside the cgroup. Without configured limits the check skips; finite limits are exported either way.",
		Remedy: "Write the device's line (echo \"mlx5_0 hca_handle=64 hca_object=max\" > /sys/fs/cgroup/<cgroup>/rdma.max, action rdma-cgroup); " +
			"a cgroup without rdma.max needs +rdma in its parent's cgroup.subtree_control, which is the cgroup manager's (systemd, Slurm) job.",
		Run: checkRDMACgroups,
	})
	l.Register(&diagnose.Check{
		ID:    "drv.kernel",
		Title: "Kernel at or above the site floor (RoCE)",
		Reads: []diagnose.Source{diagnose.SourceTuning, diagnose.SourceInfiniband},
		Doc: "On hosts with RoCE ports the running kernel is at least diagnose.policies.kernel_floor (default 5.4, the guide's number). " +
			"RoCE v2 itself exists since about 4.5, so this is a policy warning; roce.gid_v2 is the real test.",
		Remedy: "Upgrade the kernel (or the OFED stack) in a maintenance window.",
		Run:    checkKernel,
	})
}

// userModules are the modules user space needs next to the HCA driver;
// ibOnly ones only matter with InfiniBand ports (MADs do not run on RoCE).
var userModules = []struct {
	name, why string
	ibOnly    bool
}{
	{"ib_uverbs", "verbs applications (/dev/infiniband/uverbs*)", false},
	{"rdma_ucm", "rdma_cm connection setup (RoCE, iWARP, MPI, NCCL's RDMA CM mode)", false},
	{"ib_umad", "MAD tools on InfiniBand: sminfo, perfquery, ibdiagnet", true},
}

func checkDevDriver(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	if _, ok := s.Tuning().ModuleLoaded("ib_core"); !ok {
		return kit.NoTargets("/proc/modules cannot be read"), nil
	}
	ib := false
	kit.ForEachPort(s, func(d *infiniband.Device, p *infiniband.Port) { ib = ib || kit.IsIBPort(d, p) })
	var out []diagnose.Finding
	for _, m := range userModules {
		if m.ibOnly && !ib {
			continue
		}
		loaded, _ := s.Tuning().ModuleLoaded(m.name)
		f := diagnose.Finding{Target: m.name, Expected: "loaded, for " + m.why, Evidence: "/proc/modules", Severity: diagnose.Pass, Observed: "loaded"}
		if !loaded {
			f.Severity, f.Observed = diagnose.Warn, "not in /proc/modules"
			f.Remedy = fmt.Sprintf("modprobe %s and persist it (echo %s >> /etc/modules-load.d/rdma.conf); if it is built into the kernel, /sys/module/%s exists and this is fine", m.name, m.name, m.name)
		}
		out = append(out, f)
	}
	return out, nil
}

func checkGovernor(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	want := cfg.Diagnose.Policies.Governor()
	if len(s.Tuning().Governors) == 0 {
		return kit.NoTargets("no CPU has cpufreq (a VM, or no cpufreq driver): the governor is the platform's"), nil
	}
	counts := s.Tuning().GovernorCounts()
	names := make([]string, 0, len(counts))
	for g := range counts {
		names = append(names, g)
	}
	sort.Strings(names)
	var parts []string
	for _, g := range names {
		parts = append(parts, fmt.Sprintf("%d × %s", counts[g], g))
	}
	f := diagnose.Finding{Target: "host", Observed: strings.Join(parts, ", "), Expected: fmt.Sprintf("%s on all %d CPUs (diagnose.policies.cpu_governor)", want, len(s.Tuning().Governors)),
		Evidence: "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", Severity: diagnose.Pass}
	if counts[want] != len(s.Tuning().Governors) {
		var other []string
		for _, g := range s.Tuning().Governors {
			if g.Governor != want {
				other = append(other, strconv.Itoa(g.CPU))
			}
		}
		f.Severity = diagnose.Warn
		f.Evidence += "; CPUs not on " + want + ": " + kit.CompactList(other, ",", 12)
		f.Remedy = fmt.Sprintf("cpupower frequency-set -g %s (or a tuned profile such as latency-performance); the BIOS power profile (C-states) matters as much", want)
		f.Action = "cpu-governor"
	}
	return []diagnose.Finding{f}, nil
}

func checkHugepages(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	pol := cfg.Diagnose.Policies.Hugepages
	var pools []string
	for _, p := range s.Tuning().Hugepages {
		if p.Node < 0 && p.Total.OK {
			pools = append(pools, fmt.Sprintf("%d × %d KiB", p.Total.V, p.SizeBytes/1024))
		}
	}
	if pol.MinPages == 0 || pol.PageSizeKiB == 0 {
		return []diagnose.Finding{{Severity: diagnose.Skip, Target: "host", Observed: kit.OrText(pools, "no hugepages"),
			Evidence: "no requirement: set diagnose.policies.hugepages (page_size_kib, min_pages) to judge; verbs do not need hugepages"}}, nil
	}
	size := pol.PageSizeKiB * 1024
	var total, free uint64
	var perNode []string
	found := false
	for _, p := range s.Tuning().Hugepages {
		if p.SizeBytes != size || p.Node < 0 || !p.Total.OK {
			continue
		}
		found = true
		total += p.Total.V
		if p.Free.OK {
			free += p.Free.V
		}
		perNode = append(perNode, fmt.Sprintf("node%d %d", p.Node, p.Total.V))
	}
	if !found { // no per-node pools (no NUMA): the system-wide pool
		for _, p := range s.Tuning().Hugepages {
			if p.SizeBytes == size && p.Node < 0 && p.Total.OK {
				found, total = true, p.Total.V
				if p.Free.OK {
					free = p.Free.V
				}
			}
		}
	}
	f := diagnose.Finding{Target: fmt.Sprintf("hugepages-%dkB", pol.PageSizeKiB), Expected: fmt.Sprintf("at least %d pages (diagnose.policies.hugepages)", pol.MinPages),
		Evidence: "/sys/devices/system/node/node*/hugepages, /sys/kernel/mm/hugepages", Severity: diagnose.Pass}
	if !found {
		f.Observed = fmt.Sprintf("no %d KiB pool (the kernel or CPU lacks that page size)", pol.PageSizeKiB)
	} else {
		f.Observed = fmt.Sprintf("%d pages, %d free", total, free)
		if len(perNode) > 0 {
			f.Observed += " (" + strings.Join(perNode, ", ") + ")"
		}
	}
	if !found || total < pol.MinPages {
		f.Severity = diagnose.Warn
		f.Remedy = fmt.Sprintf("reserve %d pages of %d KiB, spread over the NUMA nodes: echo <n> > /sys/devices/system/node/node<N>/hugepages/hugepages-%dkB/nr_hugepages "+
			"(1 GiB pages: at boot, hugepagesz=1G hugepages=%d)", pol.MinPages, pol.PageSizeKiB, pol.PageSizeKiB, pol.MinPages)
		f.Action = "hugepages"
	}
	return []diagnose.Finding{f}, nil
}

func memlockText(v uint64) string {
	if v == tuning.Unlimited {
		return "unlimited"
	}
	return kit.BytesText(float64(v))
}

func checkMemlock(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	want := uint64(tuning.Unlimited)
	wantText := "unlimited"
	if m := cfg.Diagnose.Policies.MemlockMinKiB; m != nil {
		want, wantText = *m*1024, fmt.Sprintf("at least %d KiB (diagnose.policies.memlock_min_kib)", *m)
	}
	var out []diagnose.Finding
	for _, name := range cfg.Tuning.MemlockProcesses {
		if s.Tuning().MemlockProcesses[name] == 0 {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: name, Evidence: "no process named " + name + " runs"})
		}
	}
	// One finding per process name, judged by its lowest limit: a
	// target per process (slurmstepd for every job step) would make a new
	// series for every PID. The PIDs are evidence.
	worst := map[string]int{}
	pids := map[string][]int{}
	var names []string
	for i, m := range s.Tuning().Memlock {
		if m.Process == "self" {
			continue // rdma_doctor itself registers no memory
		}
		w, seen := worst[m.Process]
		if !seen {
			names = append(names, m.Process)
		}
		if !seen || m.Soft < s.Tuning().Memlock[w].Soft {
			worst[m.Process] = i
		}
		pids[m.Process] = append(pids[m.Process], m.PID)
	}
	for _, name := range names {
		m := s.Tuning().Memlock[worst[name]]
		ev := fmt.Sprintf("/proc/%d/limits Max locked memory", m.PID)
		if n := len(pids[name]); n > 1 {
			ev += fmt.Sprintf(" (the lowest of %d %s processes: pids %s)", n, name, pidList(pids[name]))
		}
		f := diagnose.Finding{Target: name, Observed: fmt.Sprintf("soft %s, hard %s", memlockText(m.Soft), memlockText(m.Hard)),
			Expected: wantText, Evidence: ev, Severity: diagnose.Pass}
		if m.Soft < want {
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s and the jobs it starts cannot pin enough memory for verbs: add LimitMEMLOCK=infinity to its systemd unit "+
				"(systemctl edit %s) and a limits.d drop-in (* soft memlock unlimited, * hard memlock unlimited), then restart it", m.Process, m.Process)
			f.Action = "memlock"
		}
		out = append(out, f)
	}
	if len(cfg.Tuning.MemlockProcesses) == 0 {
		return kit.NoTargets("no job launcher to judge: name the daemons that start RDMA jobs in tuning.memlock_processes (e.g. slurmd)"), nil
	}
	if len(out) == 0 {
		return kit.NoTargets("the limits of the configured processes cannot be read"), nil
	}
	return out, nil
}

func checkSysctls(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	ipoib := 0
	for _, n := range s.Netdev().Netdevs {
		if n.IPoIB != nil {
			ipoib++
		}
	}
	if ipoib == 0 {
		return kit.NoTargets("no IPoIB netdev: these sysctls tune sockets and IPoIB, not verbs"), nil
	}
	mins := cfg.Diagnose.Policies.SysctlMinimums()
	names := make([]string, 0, len(mins))
	for k := range mins {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []diagnose.Finding
	for _, name := range names {
		v, read := s.Tuning().Sysctl(name)
		f := diagnose.Finding{Target: name, Expected: fmt.Sprintf("at least %d (diagnose.policies.sysctls)", mins[name]),
			Evidence: "/proc/sys/" + strings.ReplaceAll(name, ".", "/")}
		switch {
		case !read:
			f.Severity, f.Evidence = diagnose.Skip, name+" is not read by the tuning reader (internal/read/tuning.Sysctls)"
		case !v.OK || len(v.V) == 0:
			f.Severity, f.Evidence = diagnose.Skip, "cannot read "+f.Evidence
		case v.V[0] < mins[name]:
			f.Severity, f.Observed = diagnose.Warn, strconv.FormatInt(v.V[0], 10)
			f.Remedy = fmt.Sprintf("sysctl -w %s=%d and persist it in /etc/sysctl.d/90-rdma-doctor.conf (IPoIB/TCP throughput only)", name, mins[name])
			f.Action = "sysctl"
		default:
			f.Severity, f.Observed = diagnose.Pass, strconv.FormatInt(v.V[0], 10)
		}
		out = append(out, f)
	}
	return out, nil
}

func checkKernel(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	floor := cfg.Diagnose.Policies.KernelFloor.Floor()
	roce := 0
	kit.ForEachPort(s, func(d *infiniband.Device, p *infiniband.Port) {
		if !p.IsInfiniBand() && !kit.IsRNIC(d) {
			roce++
		}
	})
	switch {
	case roce == 0:
		return kit.NoTargets("no RoCE port: the kernel floor is a RoCE policy"), nil
	case floor == "":
		return kit.NoTargets("diagnose.policies.kernel_floor is off"), nil
	case !s.Tuning().KernelRelease.OK:
		return kit.NoTargets("the kernel release (/proc/sys/kernel/osrelease) cannot be read"), nil
	}
	rel := s.Tuning().KernelRelease.V
	f := diagnose.Finding{Target: "host", Observed: rel, Expected: floor + " or later (diagnose.policies.kernel_floor, a site policy)",
		Evidence: fmt.Sprintf("/proc/sys/kernel/osrelease; %d RoCE port(s)", roce), Severity: diagnose.Pass}
	if config.CompareVersions(rel, floor) < 0 {
		f.Severity = diagnose.Warn
		f.Remedy = fmt.Sprintf("the kernel is older than the site's floor %s: plan an upgrade (or a current OFED); RoCE v2 itself works since ~4.5, see roce.gid_v2", floor)
	}
	return []diagnose.Finding{f}, nil
}

// RDMACgroupWant is one rdma.max line the configuration asks for.
type RDMACgroupWant struct {
	// Cgroup is below the cgroup v2 root ("/slurm").
	Cgroup string
	Limit  tuning.RDMALimit
	// Line is the configuration line that asks for it.
	Line int
}

// Where names the configuration line that asks for the limit.
func (w RDMACgroupWant) Where() string {
	return fmt.Sprintf("diagnose.policies.rdma_cgroup_limits, line %d", w.Line)
}

// RDMACgroupWants expands diagnose.policies.rdma_cgroup_limits over the
// host's RDMA devices: "*" is every device read (after the device filter),
// and an entry naming the device wins over "*" for the same cgroup. The
// order is the configuration's, devices in the host's order.
func RDMACgroupWants(s *diagnose.Reading, cfg *config.Config) []RDMACgroupWant {
	limits := cfg.Diagnose.Policies.RDMACgroupLimits
	named := map[[2]string]bool{}
	for _, l := range limits {
		if l.Device != "*" {
			named[[2]string{l.Cgroup, l.Device}] = true
		}
	}
	var out []RDMACgroupWant
	add := func(l config.RDMACgroupLimit, dev string) {
		out = append(out, RDMACgroupWant{Cgroup: l.Cgroup, Line: l.Line,
			Limit: tuning.RDMALimit{Device: dev, HCAHandle: uint64(*l.HCAHandle), HCAObject: uint64(*l.HCAObject)}})
	}
	for _, l := range limits {
		if l.Device != "*" {
			add(l, l.Device)
			continue
		}
		if s.IB() == nil {
			continue
		}
		for _, d := range s.IB().Devices {
			if !named[[2]string{l.Cgroup, d.Name}] {
				add(l, d.Name)
			}
		}
	}
	return out
}

// rdmaLimitText is a line's limits as rdma.max prints them.
func rdmaLimitText(l tuning.RDMALimit) string {
	_, rest, _ := strings.Cut(tuning.FormatRDMALimit(l), " ")
	return rest
}

func checkRDMACgroups(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	if len(cfg.Diagnose.Policies.RDMACgroupLimits) == 0 {
		return kit.NoTargets("no rdma cgroup limits configured (diagnose.policies.rdma_cgroup_limits); finite limits are exported as rdma_host_cgroup_rdma_limit"), nil
	}
	wants := RDMACgroupWants(s, cfg)
	if len(wants) == 0 {
		return kit.NoTargets("the configured limits name every device (\"*\") and the host has no RDMA device"), nil
	}
	read := map[string]bool{}
	for _, c := range s.Tuning().RDMAMaxRead {
		read[c] = true
	}
	have := map[[2]string]tuning.RDMALimit{}
	for _, l := range s.Tuning().RDMACgroups {
		have[[2]string{l.Cgroup, l.Device}] = l.RDMALimit
	}
	var out []diagnose.Finding
	for _, w := range wants {
		file := "/sys/fs/cgroup" + w.Cgroup + "/rdma.max"
		f := diagnose.Finding{Target: w.Cgroup + " " + w.Limit.Device, Expected: rdmaLimitText(w.Limit) + " (" + w.Where() + ")", Evidence: file, Severity: diagnose.Pass}
		got, ok := have[[2]string{w.Cgroup, w.Limit.Device}]
		switch {
		case !read[w.Cgroup]:
			f.Severity, f.Observed = diagnose.Warn, "no rdma.max"
			parent := path.Dir(w.Cgroup)
			f.Remedy = fmt.Sprintf("the cgroup %s does not exist or its parent does not enable the rdma controller: "+
				"echo +rdma > /sys/fs/cgroup%s/cgroup.subtree_control (on every level above it), or have the cgroup manager "+
				"(systemd, Slurm) delegate rdma", w.Cgroup, strings.TrimSuffix(parent, "/"))
		case !ok:
			f.Severity, f.Observed = diagnose.Warn, "no line for "+w.Limit.Device
			f.Remedy = fmt.Sprintf("%s is not registered with the rdma controller: check the device name (rdma dev) or the entry on line %d", w.Limit.Device, w.Line)
		case got != w.Limit:
			f.Severity, f.Observed = diagnose.Warn, rdmaLimitText(got)
			f.Remedy = fmt.Sprintf("echo %q > %s", tuning.FormatRDMALimit(w.Limit), file)
			f.Action = "rdma-cgroup"
		default:
			f.Observed = rdmaLimitText(got)
		}
		out = append(out, f)
	}
	return out, nil
}

// pidList lists at most 8 PIDs.
func pidList(pids []int) string {
	var parts []string
	for i, p := range pids {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more", len(pids)-8))
			break
		}
		parts = append(parts, fmt.Sprint(p))
	}
	return strings.Join(parts, ", ")
}
