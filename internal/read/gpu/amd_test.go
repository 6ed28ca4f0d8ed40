// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package gpu

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// AMD Instinct discovery, from recorded lspci output (no recorded sysfs
// dump, rocm-smi --showtopo or amd-smi topology of an Instinct host with
// RDMA NICs was found; fixtures/README.md lists what was searched). Each
// line is what lspci printed on a real host; the vendor and class codes
// are pci.ids' for the names it printed: "[AMD/ATI]" is 0x1002, "[AMD]"
// 0x1022 (the CPU side), "Display controller" as a subclass 0x0380,
// "Processing accelerators" 0x1200, "PCI bridge" 0x0604.
var recordedAMD = []struct {
	source, line string
	vendor       uint16
	class        uint32
	gpu          bool
}{
	// ROCm/ROCm #4098 (Dell server, 4 x MI210, `lspci | grep -i amd`):
	// each MI210 below the card's own switch, an [AMD] upstream port and
	// an [AMD/ATI] downstream port.
	{"ROCm/ROCm#4098", "4a:00.0 PCI bridge: Advanced Micro Devices, Inc. [AMD] Device 14c7", 0x1022, 0x060400, false},
	{"ROCm/ROCm#4098", "4b:00.0 PCI bridge: Advanced Micro Devices, Inc. [AMD/ATI] Device 14c8", 0x1002, 0x060400, false},
	{"ROCm/ROCm#4098", "4c:00.0 Display controller: Advanced Micro Devices, Inc. [AMD/ATI] Aldebaran/MI200 [Instinct MI210] (rev 02)", 0x1002, 0x038000, true},
	{"ROCm/ROCm#4098", "04:00.0 VGA compatible controller: Matrox Electronics Systems Ltd. Integrated Matrox G200eW3 Graphics Controller (rev 04)", 0x102b, 0x030000, false},
	// ROCm/legacy-rocm-build #4454 (8 x MI300X and a ConnectX at
	// 9e:00.0, `lspci -k`): the same shape with the MI300X's bridges.
	{"ROCm/legacy-rocm-build#4454", "19:00.0 PCI bridge: Advanced Micro Devices, Inc. [AMD] Device 1500", 0x1022, 0x060400, false},
	{"ROCm/legacy-rocm-build#4454", "1a:00.0 PCI bridge: Advanced Micro Devices, Inc. [AMD/ATI] Device 1501", 0x1002, 0x060400, false},
	{"ROCm/legacy-rocm-build#4454", "1b:00.0 Processing accelerators: Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X]", 0x1002, 0x120000, true},
	// apache/cloudstack #11701: an MI325X, "pci_class":"Processing
	// accelerators [1200]", device 74a5.
	{"apache/cloudstack#11701", "05:00.0 Processing accelerators [1200]: Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI325X] [1002:74a5]", 0x1002, 0x120000, true},
	// akash-network/provider-configs #40: a Radeon Instinct MI50/MI60,
	// class 03 subclass 80 prog-if 00.
	{"akash-network/provider-configs#40", "84:00.0 Display controller: Advanced Micro Devices, Inc. [AMD/ATI] Vega 20 [Radeon Pro VII/Radeon Instinct MI50 32GB]", 0x1002, 0x038000, true},
}

func TestIsGPURecordedAMD(t *testing.T) {
	for _, r := range recordedAMD {
		if got := IsGPU(r.vendor, r.class); got != r.gpu {
			t.Errorf("%s: %q (%04x, %06x): IsGPU %v, want %v", r.source, r.line, r.vendor, r.class, got, r.gpu)
		}
	}
	// An AMD VGA controller is a Radeon, not an accelerator; NVIDIA's
	// classes are not AMD's.
	for _, c := range []struct {
		vendor uint16
		class  uint32
	}{{VendorAMD, 0x030000}, {VendorAMD, 0x030200}, {VendorNVIDIA, 0x120000}, {VendorNVIDIA, 0x038000}, {0x1022, 0x120000}} {
		if IsGPU(c.vendor, c.class) {
			t.Errorf("IsGPU(%04x, %06x) = true", c.vendor, c.class)
		}
	}
}

// The MI210 of ROCm/ROCm #6281 (Inventec Cetus, EPYC 7V12), from its
// lshw tree: the [AMD] bridge c1:00.0, the [AMD/ATI] bridge c2:00.0 and
// the MI210 c3:00.0, whose amdgpu probe failed (no driver bound; dmesg
// "ALDEBARAN 0x1002:0x740F"); and a second MI210 at 83:00.0. The root
// ports above c1:00.0 and 82:00.0 are cut from the recording: the tree
// gives each one (c0:01.1, 80:01.1) so that the sysfs path has the shape
// the kernel gives it; nothing below asserts on them. lshw names no
// bridge device ids: 14c7 and 14c8 are those of the same card's bridges
// in ROCm/ROCm #4098. Discovery finds
// both MI210s (vendor 0x1002, class 0x038000, device 0x740f, no driver),
// not their bridges, and does not ask the NVIDIA prerequisites.
func TestReadAMDInstinct(t *testing.T) {
	root := t.TempDir()
	put := func(rel, v string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fn := func(path, vendor, device, class string) {
		dev := "sys/devices/" + path
		put(dev+"/vendor", vendor)
		put(dev+"/device", device)
		put(dev+"/class", class)
		put(dev+"/numa_node", "-1")
		addr := path[strings.LastIndex(path, "/")+1:]
		link := filepath.Join(root, "sys/bus/pci/devices", addr)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../../devices/"+path, link); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"pci0000:c0/0000:c0:01.1/0000:c1:00.0/0000:c2:00.0/0000:c3:00.0", "pci0000:80/0000:80:01.1/0000:81:00.0/0000:82:00.0/0000:83:00.0"} {
		parts := strings.Split(b, "/")
		fn(strings.Join(parts[:3], "/"), "0x1022", "0x14c7", "0x060400")
		fn(strings.Join(parts[:4], "/"), "0x1002", "0x14c8", "0x060400")
		fn(b, "0x1002", "0x740f", "0x038000")
	}
	p, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(context.Background(), p.Open(), Options{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.GPUs) != 2 {
		t.Fatalf("%d GPUs, want the two MI210s: %+v", len(s.GPUs), s.GPUs)
	}
	for i, want := range []string{"0000:83:00.0", "0000:c3:00.0"} {
		g := s.GPUs[i]
		if g.Address != want || g.Index != i || g.Vendor != VendorAMD || g.Device != 0x740f || g.Class != 0x038000 || g.Driver != "" {
			t.Errorf("GPU%d: %+v, want the MI210 at %s, no driver", i, g, want)
		}
		if len(g.Chain.Bridges) != 3 || !strings.HasSuffix(g.Chain.Bridges[2], ":00.0") {
			t.Errorf("GPU%d chain %+v: want the root port and the card's two bridges", i, g.Chain)
		}
	}
	if s.GPUDirect != nil {
		t.Errorf("an AMD-only host was judged by NVIDIA's GPUDirect prerequisites: %+v", s.GPUDirect)
	}
}
