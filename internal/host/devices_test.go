// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// The slow PCI and IRQ state follows the class's devices at once, not
// after SlowRefresh: a device that vanishes from the class loses its
// PCI and IRQ facts, one that appears gets them, and one re-registered
// (a new sysfs directory) is read again, while a device that stays as it
// was is served from the cache.
func TestSlowStateFollowsClassDevices(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, fixture, root)
	p, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	h := New(Options{Paths: p, SlowRefresh: time.Hour, Now: func() time.Time { return now }})
	ctx := context.Background()
	class := filepath.Join(root, "sys/class/infiniband")
	fn0 := filepath.Join(root, "sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0")

	type seen struct {
		pci, irq []string
		numa0    int
	}
	look := func(step string) seen {
		t.Helper()
		s := h.Snapshot()
		devs, err := s.PCI(ctx)
		if err != nil {
			t.Fatalf("%s: PCI: %v", step, err)
		}
		pl, err := s.Placement(ctx)
		if err != nil {
			t.Fatalf("%s: placement: %v", step, err)
		}
		var out seen
		out.numa0 = -2
		for _, d := range devs {
			out.pci = append(out.pci, d.Name)
			if d.Name == "mlx5_0" && d.PCI.NUMANode.OK {
				out.numa0 = d.PCI.NUMANode.V
			}
		}
		for _, d := range pl.Devices {
			if d.Keyed() {
				out.irq = append(out.irq, d.Name)
			}
		}
		return out
	}
	want := func(step string, got seen, names []string, numa0 int) {
		t.Helper()
		if len(got.pci) != len(names) || len(got.irq) != len(names) || got.numa0 != numa0 {
			t.Errorf("%s: PCI %v, IRQs keyed %v, mlx5_0 numa %d; want %v for both, numa %d", step, got.pci, got.irq, got.numa0, names, numa0)
			return
		}
		for i := range names {
			if got.pci[i] != names[i] || got.irq[i] != names[i] {
				t.Errorf("%s: PCI %v, IRQs keyed %v; want %v", step, got.pci, got.irq, names)
			}
		}
	}
	both := []string{"mlx5_0", "mlx5_1"}
	want("first read", look("first read"), both, 1)

	// numa_node changes without the device changing: slow, so cached. A
	// change in the class reads the whole slow source again.
	if err := os.WriteFile(filepath.Join(fn0, "numa_node"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want("numa_node rewritten in place", look("numa_node rewritten"), both, 1)

	link, err := os.Readlink(filepath.Join(class, "mlx5_1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(class, "mlx5_1")); err != nil {
		t.Fatal(err)
	}
	want("mlx5_1 gone from the class", look("mlx5_1 gone"), []string{"mlx5_0"}, 0)

	if err := os.Symlink(link, filepath.Join(class, "mlx5_1")); err != nil {
		t.Fatal(err)
	}
	want("mlx5_1 back in the class", look("mlx5_1 back"), both, 0)
	if err := os.WriteFile(filepath.Join(fn0, "numa_node"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want("numa_node rewritten in place again", look("numa_node rewritten again"), both, 0)

	// mlx5_0 re-registered: a new class link and directory, and the
	// rewritten numa_node is read with it.
	hostfstest.Reregister(t, filepath.Join(root, "sys"), "mlx5_0")
	want("mlx5_0 re-registered", look("mlx5_0 re-registered"), both, 1)
	if age := h.Ages()[pciSource.Name()]; age != 0 {
		t.Errorf("PCI age %v after the re-read, want 0", age)
	}
}
