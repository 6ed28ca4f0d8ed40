// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package tuning reads the host settings the RDMA tuning guides talk about
// (hugepages, sysctls, CPU frequency governor, transparent hugepages,
// kernel, SELinux, loaded modules, memlock limits, rdma cgroup limits) into
// a typed snapshot. The collector exports it, diagnose judges it and
// remediate compares it with the desired state; all of them read through
// this package, so every file has one parser.
package tuning

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/cpulist"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/procs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing (file absent, unreadable or garbled);
// a missing value is never zero.
type Opt[T any] = sysattr.Opt[T]

func some[T any](v T) Opt[T] { return sysattr.Some(v) }

// Sysctls are the /proc/sys settings read by default, by their sysctl name.
// rmem/wmem and the backlog matter to IPoIB and TCP only, not to verbs;
// max_map_count and numa_balancing are informational (research/diagnose.md
// §2.7, §7).
var Sysctls = []string{
	"vm.max_map_count",
	"vm.nr_hugepages",
	"net.core.rmem_max",
	"net.core.wmem_max",
	"net.core.rmem_default",
	"net.core.wmem_default",
	"net.core.netdev_max_backlog",
	"kernel.numa_balancing",
}

// DefaultModules are the kernel modules of the RDMA stack whose presence is
// reported (as loaded or not) by default.
var DefaultModules = []string{
	"ib_core", "ib_uverbs", "ib_umad", "ib_ipoib", "ib_cm", "iw_cm", "rdma_cm", "rdma_ucm",
	"mlx5_core", "mlx5_ib", "mlx4_core", "mlx4_ib",
}

// Options select what Read reads beyond the fixed set.
type Options struct {
	// MemlockProcesses are process names (as in /proc/<pid>/comm) whose
	// RLIMIT_MEMLOCK is read, e.g. "slurmd".
	MemlockProcesses []string
}

// HugepagePool is one hugepage size, system-wide (Node -1) or on one NUMA
// node.
type HugepagePool struct {
	Node      int
	SizeBytes uint64
	Total     Opt[uint64]
	Free      Opt[uint64]
}

// Sysctl is one /proc/sys value. Value is absent when the kernel has no
// such setting (kernel.numa_balancing without CONFIG_NUMA_BALANCING) or
// the file could not be read or parsed.
type Sysctl struct {
	Name   string
	Values Opt[[]int64]
}

// CPUGovernor is the cpufreq governor of one online CPU.
type CPUGovernor struct {
	CPU      int
	Governor string
}

// ProcessMemlock is RLIMIT_MEMLOCK of one process. Process is "self" for
// the process running rdma_doctor (from <procfs>/self/limits), else the
// configured name.
type ProcessMemlock struct {
	Process string
	PID     int
	Soft    uint64
	Hard    uint64
}

// CgroupRDMALimit is one device line of one cgroup's rdma.max. Cgroup is the
// path below the cgroup v2 root ("/slurm/job_42").
type CgroupRDMALimit struct {
	Cgroup string
	RDMALimit
}

// Snapshot is the tuning state of a host.
type Snapshot struct {
	Hugepages []HugepagePool
	Sysctls   []Sysctl
	// Governors lists the online CPUs that have cpufreq; empty on VMs and
	// hosts without a cpufreq driver.
	Governors []CPUGovernor
	// THPEnabled and THPDefrag are the selected modes of
	// /sys/kernel/mm/transparent_hugepage/{enabled,defrag}.
	THPEnabled    Opt[string]
	THPDefrag     Opt[string]
	KernelRelease Opt[string]
	// SELinux is enforcing, permissive, or disabled (no selinuxfs).
	SELinux Opt[string]
	// Modules is every line of /proc/modules; absent when the file is
	// unreadable.
	Modules Opt[[]Module]
	// Memlock holds this process' limit and each configured process'.
	Memlock []ProcessMemlock
	// MemlockProcesses counts the running processes of each configured name
	// (0 when none runs).
	MemlockProcesses map[string]int
	// RDMACgroups are the rdma.max lines of every cgroup the rdma
	// controller is delegated to, unlimited ones too (Limited tells).
	RDMACgroups []CgroupRDMALimit
	// RDMAMaxRead are the cgroups whose rdma.max was read, so that a cgroup
	// without the controller is told from one whose lines are all max.
	RDMAMaxRead []string
	// Errors are the read and parse errors met; each names its file.
	Errors []error
}

// GovernorCounts returns the number of CPUs per governor.
func (s *Snapshot) GovernorCounts() map[string]int {
	m := map[string]int{}
	for _, g := range s.Governors {
		m[g.Governor]++
	}
	return m
}

// ModuleLoaded reports whether a module is in /proc/modules; ok is false
// when /proc/modules could not be read. Built-in drivers (=y) never appear
// there.
func (s *Snapshot) ModuleLoaded(name string) (loaded, ok bool) {
	if !s.Modules.OK {
		return false, false
	}
	for _, m := range s.Modules.V {
		if m.Name == name {
			return true, true
		}
	}
	return false, true
}

// Sysctl returns the values of a sysctl by name.
func (s *Snapshot) Sysctl(name string) (Opt[[]int64], bool) {
	for _, c := range s.Sysctls {
		if c.Name == name {
			return c.Values, true
		}
	}
	return Opt[[]int64]{}, false
}

// ParseError is a file that was read but is not in the kernel's format.
type ParseError = sysattr.ParseError

type reader struct {
	host hostfs.Host
	errs []error
}

func (r *reader) fail(err error) { r.errs = append(r.errs, err) }

// read returns a file's content. A missing file is no error unless
// required: most of these files exist only with a feature (cpufreq,
// selinuxfs, NUMA balancing, cgroup v2).
func (r *reader) read(f hostfs.FS, name string, required bool) (string, bool) {
	b, err := f.ReadFile(name)
	if err != nil {
		if required || !errors.Is(err, fs.ErrNotExist) {
			r.fail(err)
		}
		return "", false
	}
	return string(b), true
}

func parsed[T any](r *reader, f hostfs.FS, name string, required bool, parse func(string) (T, error)) Opt[T] {
	s, ok := r.read(f, name, required)
	return sysattr.Parse(s, ok, parse, r.fail, func() string { return r.label(f, name) })
}

// label names a file in errors the way an operator finds it on the host.
func (r *reader) label(f hostfs.FS, name string) string {
	if f == r.host.Proc {
		return "/proc/" + name
	}
	return "/sys/" + name
}

func parseUint(s string) (uint64, error) { return infiniband.ParseUint(s) }

// Read takes a tuning snapshot of the host. It returns an error only when
// ctx ends; file errors are in Snapshot.Errors and leave their values out.
func Read(ctx context.Context, host hostfs.Host, opts Options) (*Snapshot, error) {
	r := &reader{host: host}
	s := &Snapshot{}
	steps := []func(*Snapshot){
		r.hugepages, r.sysctls, r.governors, r.kernel, r.modules,
		func(s *Snapshot) { r.memlock(ctx, s, opts.MemlockProcesses) },
		func(s *Snapshot) { r.cgroups(ctx, s) },
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			s.Errors = r.errs
			return s, err
		}
		step(s)
	}
	s.Errors = r.errs
	return s, ctx.Err()
}

// hugepages reads the system-wide pools (/sys/kernel/mm/hugepages) and the
// per-node ones (/sys/devices/system/node/node<N>/hugepages).
func (r *reader) hugepages(s *Snapshot) {
	s.Hugepages = append(s.Hugepages, r.pools(-1, "kernel/mm/hugepages")...)
	nodes, err := r.host.Sys.ReadDir("devices/system/node")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.fail(err)
		}
		return
	}
	for _, e := range nodes {
		n, ok := nodeNumber(e.Name())
		if !ok {
			continue
		}
		s.Hugepages = append(s.Hugepages, r.pools(n, "devices/system/node/"+e.Name()+"/hugepages")...)
	}
}

func nodeNumber(name string) (int, bool) {
	num, ok := strings.CutPrefix(name, "node")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0
}

func (r *reader) pools(node int, dir string) []HugepagePool {
	entries, err := r.host.Sys.ReadDir(dir)
	if err != nil {
		// No hugetlbfs support, or a node without memory: nothing to say.
		if !errors.Is(err, fs.ErrNotExist) {
			r.fail(err)
		}
		return nil
	}
	var out []HugepagePool
	for _, e := range entries {
		size, err := ParseHugepageSize(e.Name())
		if err != nil {
			continue // not a pool directory
		}
		p := dir + "/" + e.Name()
		out = append(out, HugepagePool{
			Node:      node,
			SizeBytes: size,
			Total:     parsed(r, r.host.Sys, p+"/nr_hugepages", true, parseUint),
			Free:      parsed(r, r.host.Sys, p+"/free_hugepages", true, parseUint),
		})
	}
	return out
}

func (r *reader) sysctls(s *Snapshot) {
	for _, name := range Sysctls {
		file := "sys/" + strings.ReplaceAll(name, ".", "/")
		s.Sysctls = append(s.Sysctls, Sysctl{Name: name, Values: parsed(r, r.host.Proc, file, false, ParseSysctl)})
	}
}

// governors reads scaling_governor of every online CPU. A CPU without
// cpufreq (VMs, no driver) is skipped, not an error. An offline CPU has no
// meaningful governor and is skipped too: the online list decides, else the
// CPU's own online file (cpu0 usually has none: it cannot be unplugged).
func (r *reader) governors(s *Snapshot) {
	entries, err := r.host.Sys.ReadDir("devices/system/cpu")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.fail(err)
		}
		return
	}
	online := parsed(r, r.host.Sys, "devices/system/cpu/online", false, cpulist.Parse)
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "cpu")
		if !ok {
			continue
		}
		cpu, err := strconv.Atoi(num)
		if err != nil || cpu < 0 {
			continue
		}
		dir := "devices/system/cpu/" + e.Name()
		if online.OK {
			if !online.V.Contains(cpu) {
				continue
			}
		} else if on, ok := r.read(r.host.Sys, dir+"/online", false); ok && strings.TrimSpace(on) == "0" {
			continue
		}
		g := parsed(r, r.host.Sys, dir+"/cpufreq/scaling_governor", false, ParseWord)
		if g.OK {
			s.Governors = append(s.Governors, CPUGovernor{CPU: cpu, Governor: g.V})
		}
	}
	sort.Slice(s.Governors, func(i, j int) bool { return s.Governors[i].CPU < s.Governors[j].CPU })
}

func selected(s string) (string, error) {
	v, _, err := ParseSelected(s)
	return v, err
}

func (r *reader) kernel(s *Snapshot) {
	s.THPEnabled = parsed(r, r.host.Sys, "kernel/mm/transparent_hugepage/enabled", false, selected)
	s.THPDefrag = parsed(r, r.host.Sys, "kernel/mm/transparent_hugepage/defrag", false, selected)
	s.KernelRelease = parsed(r, r.host.Proc, "sys/kernel/osrelease", true, ParseWord)
	// No selinuxfs means SELinux is disabled or not built in. Inside a
	// container it may also just not be mounted; the value is informational.
	if _, err := r.host.Sys.ReadDir("fs/selinux"); errors.Is(err, fs.ErrNotExist) {
		s.SELinux = some("disabled")
	} else {
		s.SELinux = parsed(r, r.host.Sys, "fs/selinux/enforce", true, ParseSELinuxEnforce)
	}
}

func (r *reader) modules(s *Snapshot) {
	text, ok := r.read(r.host.Proc, "modules", false)
	if !ok {
		return // a kernel without module support has no /proc/modules
	}
	mods, err := ParseModules(text)
	if err != nil {
		// Torn lines are left out; the rest still counts.
		r.fail(&ParseError{Path: "/proc/modules", Err: err})
	}
	s.Modules = some(mods)
}

// memlockOf reads RLIMIT_MEMLOCK from a limits file below procfs.
func (r *reader) memlockOf(name string) (Limit, bool) {
	text, ok := r.read(r.host.Proc, name, true)
	if !ok {
		return Limit{}, false
	}
	return r.memlockRow(name, text)
}

// memlockRow finds the memlock row of a limits file; other rows that do not
// parse do not matter here.
func (r *reader) memlockRow(name, text string) (Limit, bool) {
	limits, err := ParseLimits(text)
	for _, l := range limits {
		if l.Name == MemlockLimit {
			return l, true
		}
	}
	if err == nil {
		err = fmt.Errorf("no %q row", MemlockLimit)
	}
	r.fail(&ParseError{Path: "/proc/" + name, Err: err})
	return Limit{}, false
}

func (r *reader) memlock(ctx context.Context, s *Snapshot, names []string) {
	// "self" below --path.procfs is whatever process opens it: on the host
	// that is rdma_doctor itself, in a fixture tree the recorded file.
	if l, ok := r.memlockOf("self/limits"); ok {
		s.Memlock = append(s.Memlock, ProcessMemlock{Process: "self", Soft: l.Soft, Hard: l.Hard})
	}
	if len(names) == 0 {
		return
	}
	found, err := procs.Find(ctx, r.host.Proc, names...)
	if err != nil {
		r.fail(err)
		return
	}
	s.MemlockProcesses = map[string]int{}
	for _, name := range names {
		s.MemlockProcesses[name] = 0
		for _, pid := range found[name] {
			file := strconv.Itoa(pid) + "/limits"
			text, err := r.host.Proc.ReadFile(file)
			if errors.Is(err, fs.ErrNotExist) {
				continue // exited since the scan
			}
			s.MemlockProcesses[name]++
			if err != nil {
				r.fail(err)
				continue
			}
			if l, ok := r.memlockRow(file, string(text)); ok {
				s.Memlock = append(s.Memlock, ProcessMemlock{Process: name, PID: pid, Soft: l.Soft, Hard: l.Hard})
			}
		}
	}
}

// CgroupRoot is the cgroup v2 mount below the sysfs root.
const CgroupRoot = "fs/cgroup"

// cgroups collects the rdma.max limits of the cgroup v2 tree. A
// child cgroup has rdma.max only when its parent delegates the rdma
// controller (cgroup.subtree_control lists it), so the walk descends only
// there: on a host that does not use the controller it reads one file.
func (r *reader) cgroups(ctx context.Context, s *Snapshot) {
	var walk func(dir, rel string, depth int)
	walk = func(dir, rel string, depth int) {
		if ctx.Err() != nil || depth > 64 {
			return
		}
		ctl, ok := r.read(r.host.Sys, dir+"/cgroup.subtree_control", false)
		if !ok || !hasWord(ctl, "rdma") {
			return
		}
		entries, err := r.host.Sys.ReadDir(dir)
		if err != nil {
			r.fail(err)
			return
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			child, crel := dir+"/"+e.Name(), rel+"/"+e.Name()
			if text, ok := r.read(r.host.Sys, child+"/rdma.max", true); ok {
				limits, err := ParseRDMAMax(text)
				if err != nil {
					r.fail(&ParseError{Path: "/sys/" + child + "/rdma.max", Err: err})
				}
				s.RDMAMaxRead = append(s.RDMAMaxRead, crel)
				for _, l := range limits {
					s.RDMACgroups = append(s.RDMACgroups, CgroupRDMALimit{Cgroup: crel, RDMALimit: l})
				}
			}
			walk(child, crel, depth+1)
		}
	}
	walk(CgroupRoot, "", 0)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}
