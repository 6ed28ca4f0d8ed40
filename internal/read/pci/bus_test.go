// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// dgx-h100's bus: the 8 ConnectX-7 (InfiniBand controllers) and the two
// BlueField-3 functions (Ethernet), no driver links in the fixture.
func TestReadNetworkFunctionsFixture(t *testing.T) {
	fns, err := ReadNetworkFunctions(fixtureHost(t, "dgx-h100").Sys)
	if err != nil {
		t.Fatal(err)
	}
	classes := map[uint32]int{}
	for _, f := range fns {
		classes[f.Class]++
		if f.Vendor != MellanoxVendor || f.Driver != "" || !strings.HasPrefix(f.ID(), "15b3:") || !f.RDMACapable() {
			t.Errorf("%+v", f)
		}
	}
	if len(fns) != 10 || classes[0x020700] != 8 || classes[0x020000] != 2 {
		t.Errorf("%d functions, classes %v; want 8 InfiniBand and 2 Ethernet", len(fns), classes)
	}
}

// A bus with a ConnectX bound to vfio-pci, one without a driver, a virtio
// NIC (listed: a network function, not RDMA-capable), a Mellanox bridge
// (not a network function), and a function whose vendor file is garbage
// (an error; the rest is still listed).
func TestReadNetworkFunctions(t *testing.T) {
	root := t.TempDir()
	fn := func(addr, vendor, device, class, driver string) {
		dir := filepath.Join(root, "sys/devices/pci0000:00", addr)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"vendor": vendor, "device": device, "class": class} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o444); err != nil {
				t.Fatal(err)
			}
		}
		if driver != "" {
			if err := os.Symlink("../../../bus/pci/drivers/"+driver, filepath.Join(dir, "driver")); err != nil {
				t.Fatal(err)
			}
		}
		bus := filepath.Join(root, "sys", BusDir)
		if err := os.MkdirAll(bus, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../../devices/pci0000:00/"+addr, filepath.Join(bus, addr)); err != nil {
			t.Fatal(err)
		}
	}
	fn("0000:00:03.0", "0x1af4", "0x1041", "0x020000", "virtio-pci")
	fn("0000:5e:00.0", "0x15b3", "0x1021", "0x020700", "vfio-pci")
	fn("0000:5e:00.1", "0x15b3", "0x1021", "0x020700", "")
	fn("0000:5d:00.0", "0x15b3", "0x1979", "0x060400", "pcieport")
	fn("0000:7f:00.0", "lots", "0x1021", "0x020700", "")
	p, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	fns, err := ReadNetworkFunctions(p.Open().Sys)
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.Contains(pe.Path, "0000:7f:00.0/vendor") {
		t.Errorf("error %v, want a parse error naming 0000:7f:00.0/vendor", err)
	}
	if len(fns) != 3 || fns[0] != (BusFunction{"0000:00:03.0", 0x1af4, 0x1041, 0x020000, "virtio-pci"}) ||
		fns[1] != (BusFunction{"0000:5e:00.0", 0x15b3, 0x1021, 0x020700, "vfio-pci"}) ||
		fns[2] != (BusFunction{"0000:5e:00.1", 0x15b3, 0x1021, 0x020700, ""}) {
		t.Errorf("functions %+v", fns)
	}
	empty, _ := hostfs.Paths{Rootfs: t.TempDir()}.Resolve()
	if _, err := ReadNetworkFunctions(empty.Open().Sys); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no bus: %v, want ErrNotExist", err)
	}
}

// RDMACapable: RDMA hardware of any vendor by class, vendor or driver;
// an Ethernet NIC whose RDMA is optional, or a virtio NIC, is not. The
// ids are those of the fixture hosts (fixtures/README.md) and of this
// repository's plain VM (fixtures/recorded/lspci-nn-plain-vm-virtio.txt).
func TestRDMACapable(t *testing.T) {
	for _, tc := range []struct {
		f    BusFunction
		want bool
	}{
		{BusFunction{Vendor: 0x15b3, Device: 0x1021, Class: 0x020700}, true},                        // CX-7, InfiniBand class
		{BusFunction{Vendor: 0x15b3, Device: 0xa2dc, Class: 0x020000, Driver: "vfio-pci"}, true},    // BF-3 Ethernet, held by vfio
		{BusFunction{Vendor: 0x15b3, Device: 0x1003, Class: 0x028000}, true},                        // ConnectX-3: "Network controller"
		{BusFunction{Vendor: 0x8086, Device: 0x24f0, Class: 0x020800}, true},                        // Omni-Path HFI: fabric class
		{BusFunction{Vendor: 0x1d0f, Device: 0xefa0, Class: 0x020000}, true},                        // EFA
		{BusFunction{Vendor: 0x1077, Device: 0x7322, Class: 0x0c0600}, true},                        // serial-bus InfiniBand class
		{BusFunction{Vendor: 0x1d0f, Device: 0xec20, Class: 0x020000, Driver: "ena"}, false},        // ENA: Ethernet only
		{BusFunction{Vendor: 0x1af4, Device: 0x1041, Class: 0x020000, Driver: "virtio-pci"}, false}, // virtio-net
		{BusFunction{Vendor: 0x14e4, Device: 0x16d6, Class: 0x020000, Driver: "bnxt_en"}, false},    // RoCE optional
		{BusFunction{Vendor: 0x8086, Device: 0x1593, Class: 0x020000, Driver: "ice"}, false},        // irdma optional
		{BusFunction{Vendor: 0x1234, Device: 0x0001, Class: 0x020000, Driver: "hfi1"}, true},        // an RDMA-only driver
	} {
		if got := tc.f.RDMACapable(); got != tc.want {
			t.Errorf("%s class %06x driver %q: RDMACapable %v, want %v", tc.f.ID(), tc.f.Class, tc.f.Driver, got, tc.want)
		}
	}
}

func TestParseHexID(t *testing.T) {
	for in, want := range map[string]uint64{"0x15b3\n": 0x15b3, "0x020700\n": 0x020700, "0xffff": 0xffff} {
		if got, err := ParseHexID(in, 0xffffff); err != nil || got != want {
			t.Errorf("ParseHexID(%q) = %#x, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "15b3", "0x", "0x-1", "0x1000000", "0xg"} {
		if _, err := ParseHexID(in, 0xffffff); err == nil {
			t.Errorf("ParseHexID(%q): no error", in)
		}
	}
}

func FuzzParseHexID(f *testing.F) {
	for _, s := range []string{"0x15b3\n", "0x020700\n", "0x1021\n", "lots"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseHexID(s, 0xffff)
		if err == nil && v > 0xffff {
			t.Fatalf("%q: %#x above the maximum", s, v)
		}
	})
}
