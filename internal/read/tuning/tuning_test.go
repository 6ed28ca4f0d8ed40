// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package tuning

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

func fixture(t testing.TB, name string) hostfs.Host { return hostfstest.Fixture(t, name) }

func read(t *testing.T, h hostfs.Host, opts Options) *Snapshot {
	t.Helper()
	s, err := Read(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sysctl(t *testing.T, s *Snapshot, name string) (int64, bool) {
	t.Helper()
	v, known := s.Sysctl(name)
	if !known {
		t.Fatalf("sysctl %s not read", name)
	}
	if !v.OK {
		return 0, false
	}
	return v.V[0], true
}

func TestReadDGX(t *testing.T) {
	s := read(t, fixture(t, "dgx-h100"), Options{MemlockProcesses: []string{"slurmd", "slurmstepd", "opensm"}})
	if len(s.Errors) != 0 {
		t.Errorf("errors: %v", s.Errors)
	}
	// 2 sizes system-wide and on each of the 2 nodes
	if len(s.Hugepages) != 6 {
		t.Errorf("%d hugepage pools, want 6: %+v", len(s.Hugepages), s.Hugepages)
	}
	for _, p := range s.Hugepages {
		if !p.Total.OK || !p.Free.OK || p.Total.V != 0 || (p.SizeBytes != 2<<20 && p.SizeBytes != 1<<30) || p.Node < -1 || p.Node > 1 {
			t.Errorf("pool %+v", p)
		}
	}
	for name, want := range map[string]int64{"vm.max_map_count": 65530, "net.core.rmem_max": 212992, "net.core.netdev_max_backlog": 1000, "kernel.numa_balancing": 1, "vm.nr_hugepages": 0} {
		if v, ok := sysctl(t, s, name); !ok || v != want {
			t.Errorf("%s = %d (%v), want %d", name, v, ok, want)
		}
	}
	if c := s.GovernorCounts(); len(c) != 1 || c["performance"] != 224 {
		t.Errorf("governors %v, want 224 performance", c)
	}
	if s.THPEnabled.V != "madvise" || s.THPDefrag.V != "madvise" || s.KernelRelease.V != "5.15.0-1042-nvidia" || s.SELinux.V != "disabled" {
		t.Errorf("thp %v/%v kernel %v selinux %v", s.THPEnabled, s.THPDefrag, s.KernelRelease, s.SELinux)
	}
	for mod, want := range map[string]bool{"mlx5_ib": true, "ib_ipoib": true, "nvidia_peermem": true, "mlx4_ib": false} {
		if got, ok := s.ModuleLoaded(mod); !ok || got != want {
			t.Errorf("module %s loaded %v (%v), want %v", mod, got, ok, want)
		}
	}
	want := map[string][]uint64{"self": {8388608}, "slurmd": {Unlimited}, "slurmstepd": {Unlimited, 65536}}
	got := map[string][]uint64{}
	for _, m := range s.Memlock {
		got[m.Process] = append(got[m.Process], m.Soft)
		if m.Soft != m.Hard {
			t.Errorf("%+v: soft and hard differ in the fixture", m)
		}
	}
	for p, w := range want {
		if !slices.Equal(got[p], w) {
			t.Errorf("memlock %s = %v, want %v", p, got[p], w)
		}
	}
	if s.MemlockProcesses["slurmstepd"] != 2 || s.MemlockProcesses["slurmd"] != 1 || s.MemlockProcesses["opensm"] != 0 {
		t.Errorf("process counts %v", s.MemlockProcesses)
	}
	// job_4242 limits 8 devices; system.slice and slurm are all "max".
	var limited []CgroupRDMALimit
	for _, l := range s.RDMACgroups {
		if l.Limited() {
			limited = append(limited, l)
		}
	}
	if len(limited) != 8 || len(s.RDMACgroups) != 27 {
		t.Fatalf("%d limited of %d rdma cgroup entries, want 8 of 27 (3 cgroups, 9 devices): %+v", len(limited), len(s.RDMACgroups), s.RDMACgroups)
	}
	if l := limited[0]; l.Cgroup != "/slurm/job_4242" || l.Device != "mlx5_0" || l.HCAHandle != 8 || l.HCAObject != 65536 {
		t.Errorf("first limit %+v", l)
	}
	if !slices.Equal(s.RDMAMaxRead, []string{"/slurm", "/slurm/job_4242", "/system.slice"}) {
		t.Errorf("rdma.max read in %v", s.RDMAMaxRead)
	}
}

// The host whose CPUs run powersave; CPUs 62 and 63 are offline and have
// no governor to count.
func TestReadPowersave(t *testing.T) {
	s := read(t, fixture(t, "numa-remote"), Options{})
	if c := s.GovernorCounts(); len(c) != 1 || c["powersave"] != 62 {
		t.Errorf("governors %v, want 62 powersave", c)
	}
}

// A host without cpufreq (a VM) and without SELinux or cgroup v2: the
// values are absent, nothing is an error.
func TestReadNoCpufreq(t *testing.T) {
	s := read(t, fixture(t, "iwarp-i40iw"), Options{})
	if len(s.Errors) != 0 {
		t.Errorf("errors: %v", s.Errors)
	}
	if len(s.Governors) != 0 {
		t.Errorf("governors %v, want none", s.Governors)
	}
	if s.SELinux.V != "disabled" || len(s.RDMACgroups) != 0 {
		t.Errorf("selinux %v, cgroups %v", s.SELinux, s.RDMACgroups)
	}
	if v, ok := sysctl(t, s, "vm.max_map_count"); !ok || v != 65530 {
		t.Errorf("max_map_count %d %v", v, ok)
	}
	// mlx4-qdr's old kernel has no kernel.numa_balancing: absent, no error.
	s = read(t, fixture(t, "mlx4-qdr"), Options{})
	if len(s.Errors) != 0 {
		t.Errorf("mlx4-qdr errors: %v", s.Errors)
	}
	if _, ok := sysctl(t, s, "kernel.numa_balancing"); ok {
		t.Error("mlx4-qdr: numa_balancing present")
	}
	if s.SELinux.V != "permissive" || s.THPEnabled.V != "always" {
		t.Errorf("mlx4-qdr selinux %v thp %v", s.SELinux, s.THPEnabled)
	}
}

// The broken host: each garbled file loses its own value, with an error
// naming it; the rest is intact.
func TestReadBroken(t *testing.T) {
	s := read(t, fixture(t, "broken"), Options{})
	var msgs []string
	for _, e := range s.Errors {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		"/proc/sys/kernel/osrelease", "/proc/sys/net/core/rmem_max", "/proc/sys/vm/max_map_count",
		"hugepages-2048kB/nr_hugepages", "transparent_hugepage/enabled", "cpu3/cpufreq/scaling_governor",
		"/sys/fs/selinux/enforce", "/proc/modules", "/proc/self/limits", "job_1/rdma.max",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no error names %s; errors:\n%s", want, all)
		}
	}
	if len(s.Errors) != 10 {
		t.Errorf("%d errors, want 10:\n%s", len(s.Errors), all)
	}
	if s.KernelRelease.OK || s.THPEnabled.OK || s.SELinux.OK {
		t.Errorf("garbled values present: %v %v %v", s.KernelRelease, s.THPEnabled, s.SELinux)
	}
	if s.THPDefrag.V != "madvise" {
		t.Errorf("defrag %v: intact file lost", s.THPDefrag)
	}
	if _, ok := sysctl(t, s, "net.core.rmem_max"); ok {
		t.Error("rmem_max present")
	}
	if v, ok := sysctl(t, s, "net.core.wmem_max"); !ok || v != 212992 {
		t.Errorf("wmem_max %d %v", v, ok)
	}
	// 224 CPUs: cpu3 garbled, cpu7 without cpufreq
	if c := s.GovernorCounts(); c["performance"] != 222 || len(c) != 1 {
		t.Errorf("governors %v, want 222 performance", c)
	}
	// the torn last line of /proc/modules is dropped, the rest is kept
	if loaded, ok := s.ModuleLoaded("mlx5_core"); !loaded || !ok || len(s.Modules.V) != 14 {
		t.Errorf("modules %d, mlx5_core %v %v", len(s.Modules.V), loaded, ok)
	}
	for _, m := range s.Memlock {
		if m.Process == "self" {
			t.Errorf("memlock from a torn limits file: %+v", m)
		}
	}
	for _, p := range s.Hugepages {
		// only the system-wide nr_hugepages is garbled
		if p.Total.OK == (p.Node == -1) || !p.Free.OK {
			t.Errorf("pool %+v: want only the system-wide total absent", p)
		}
	}
	if len(s.RDMACgroups) != 1 || s.RDMACgroups[0].Device != "mlx5_1" {
		t.Errorf("rdma cgroups %+v, want only mlx5_1", s.RDMACgroups)
	}
}

// Faults injected through hostfs: a read error is an error and leaves the
// value out; a missing optional file is neither.
func TestReadFaults(t *testing.T) {
	h := fixture(t, "dgx-h100")
	sys := &hostfstest.Faulty{Base: h.Sys, Errors: map[string]error{
		"devices/system/cpu/cpu5/cpufreq/scaling_governor": syscall.EACCES,
		"devices/system/cpu/cpu6/cpufreq/scaling_governor": fs.ErrNotExist,
		"kernel/mm/transparent_hugepage/defrag":            syscall.EIO,
		"fs/cgroup/cgroup.subtree_control":                 fs.ErrNotExist,
	}}
	proc := &hostfstest.Faulty{Base: h.Proc, Errors: map[string]error{
		"sys/net/core/wmem_max": syscall.EACCES,
		"modules":               fs.ErrNotExist,
		"30117/limits":          fs.ErrNotExist, // exited between scan and read
	}}
	s := read(t, hostfs.Host{Root: h.Root, Sys: sys, Proc: proc}, Options{MemlockProcesses: []string{"slurmstepd"}})
	if len(s.Errors) != 3 {
		t.Errorf("errors %v, want 3 (governor, defrag, wmem_max)", s.Errors)
	}
	for _, e := range s.Errors {
		if !errors.Is(e, syscall.EACCES) && !errors.Is(e, syscall.EIO) {
			t.Errorf("unexpected error %v", e)
		}
	}
	if c := s.GovernorCounts(); c["performance"] != 222 {
		t.Errorf("governors %v, want 222", c)
	}
	if s.THPDefrag.OK || !s.THPEnabled.OK || s.Modules.OK {
		t.Errorf("defrag %v enabled %v modules %v", s.THPDefrag, s.THPEnabled, s.Modules.OK)
	}
	if _, ok := s.ModuleLoaded("mlx5_ib"); ok {
		t.Error("ModuleLoaded claims to know without /proc/modules")
	}
	if len(s.RDMACgroups) != 0 {
		t.Errorf("cgroups %v without subtree_control", s.RDMACgroups)
	}
	if s.MemlockProcesses["slurmstepd"] != 1 {
		t.Errorf("slurmstepd count %d, want 1 (one exited)", s.MemlockProcesses["slurmstepd"])
	}
}

// An offline CPU found through its own online file (no online list) keeps
// no governor.
func TestReadCPUHotplug(t *testing.T) {
	dir := t.TempDir()
	for path, v := range map[string]string{
		"sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance\n",
		"sys/devices/system/cpu/cpu1/online":                   "0\n",
		"sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "performance\n",
		"sys/devices/system/cpu/cpu2/online":                   "1\n",
		"sys/devices/system/cpu/cpu2/cpufreq/scaling_governor": "powersave\n",
		"proc/sys/kernel/osrelease":                            "6.1.0\n",
		"proc/self/limits":                                     "Limit Soft Limit Hard Limit Units\nMax locked memory 65536 65536 bytes\n",
	} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := hostfs.Paths{Rootfs: dir}.Resolve()
	s := read(t, p.Open(), Options{})
	if len(s.Errors) != 0 {
		t.Errorf("errors %v", s.Errors)
	}
	if c := s.GovernorCounts(); c["performance"] != 1 || c["powersave"] != 1 {
		t.Errorf("governors %v", c)
	}
	if len(s.Memlock) != 1 || s.Memlock[0].Soft != 65536 {
		t.Errorf("memlock %+v", s.Memlock)
	}
}

func TestReadCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, fixture(t, "dgx-h100"), Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}

func BenchmarkReadDGX(b *testing.B) {
	h := fixture(b, "dgx-h100")
	opts := Options{MemlockProcesses: []string{"slurmd", "slurmstepd"}}
	for b.Loop() {
		if _, err := Read(context.Background(), h, opts); err != nil {
			b.Fatal(err)
		}
	}
}
