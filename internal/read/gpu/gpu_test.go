// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package gpu

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

func readFixture(t *testing.T, name string, nodes int) *Snapshot {
	t.Helper()
	p, err := hostfs.Paths{Rootfs: "../../../fixtures/hosts/" + name}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(context.Background(), p.Open(), Options{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// matrix renders the GPU rows of `nvidia-smi topo -m` for the RDMA
// devices, in device order.
func matrix(s *Snapshot) string {
	var b strings.Builder
	b.WriteString("     ")
	for _, d := range s.Devices {
		fmt.Fprintf(&b, " %-6s", d.Name)
	}
	b.WriteString("\n")
	for _, g := range s.GPUs {
		fmt.Fprintf(&b, "GPU%d ", g.Index)
		for _, d := range s.Devices {
			cell := "?"
			for _, a := range s.Affinity {
				if a.GPU == g.Index && a.Device == d.Name {
					cell = a.Link.String()
				}
			}
			fmt.Fprintf(&b, " %-6s", cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The recorded H100 host (gpud's lspci -vvv): each GPU and one CX-7 sit
// on their own PEX890xx switch, each switch on a root port of its own host
// bridge, four per socket. nvidia-smi's legend gives PIX on the rail, NODE
// to the other HCAs of the socket and SYS across sockets; the computed
// matrix must be that, cell for cell.
func TestMatrixHGXH100(t *testing.T) {
	s := readFixture(t, "hgx-h100", 2)
	if len(s.Errors) != 0 {
		t.Fatalf("errors: %v", s.Errors)
	}
	want := `      mlx5_0 mlx5_1 mlx5_4 mlx5_5 mlx5_6 mlx5_7 mlx5_8 mlx5_9
GPU0  PIX    NODE   NODE   NODE   SYS    SYS    SYS    SYS   
GPU1  NODE   PIX    NODE   NODE   SYS    SYS    SYS    SYS   
GPU2  NODE   NODE   PIX    NODE   SYS    SYS    SYS    SYS   
GPU3  NODE   NODE   NODE   PIX    SYS    SYS    SYS    SYS   
GPU4  SYS    SYS    SYS    SYS    PIX    NODE   NODE   NODE  
GPU5  SYS    SYS    SYS    SYS    NODE   PIX    NODE   NODE  
GPU6  SYS    SYS    SYS    SYS    NODE   NODE   PIX    NODE  
GPU7  SYS    SYS    SYS    SYS    NODE   NODE   NODE   PIX   
`
	if got := matrix(s); got != want {
		t.Errorf("matrix:\n%s\nwant:\n%s", got, want)
	}
	g := s.GPUs[0]
	if g.Address != "0000:19:00.0" || g.Driver != "nvidia" || g.Device != 0x2330 || g.Class != 0x030200 ||
		!g.Function.NUMANode.OK || g.Function.NUMANode.V != 0 || g.Function.LinkSpeed.V != 32 || g.Function.MaxLinkWidth.V != 16 {
		t.Errorf("GPU0 = %+v", g)
	}
	if want := []string{"0000:15:01.0", "0000:16:00.0", "0000:17:01.0"}; g.Chain.Root != "pci0000:15" || strings.Join(g.Chain.Bridges, ",") != strings.Join(want, ",") {
		t.Errorf("GPU0 chain = %+v", g.Chain)
	}
	if s.GPUs[7].Address != "0000:db:00.0" || s.GPUs[7].Function.NUMANode.V != 1 {
		t.Errorf("GPU7 = %+v", s.GPUs[7])
	}
	gd := s.GPUDirect
	if gd == nil || !gd.PeerMemReady() || gd.PeerMemModule != "nvidia_peermem" || !gd.PeerMemHolder {
		t.Errorf("peermem: %+v", gd)
	}
	if !gd.Module.OK || gd.Module.V != ModuleOpen || gd.ModuleVersion != "555.42.02" {
		t.Errorf("module: %+v", gd)
	}
	// No kernel configuration on the host: DMA-BUF cannot be told.
	if _, ok := gd.DMABufReady(); ok || gd.P2PDMA.OK {
		t.Errorf("dmabuf told without a config: %+v", gd)
	}
	if l, devs, ok := s.Closest(2); !ok || l != PIX || strings.Join(devs, ",") != "mlx5_4" {
		t.Errorf("closest of GPU2 = %v %v %v", l, devs, ok)
	}
}

// Without the rail-2 HCA, GPU2's nearest HCAs are the socket's others, at
// NODE; the peer-memory module is loaded but holds no ib_core, and the
// proprietary module rules DMA-BUF out.
func TestHGXH100NoGDR(t *testing.T) {
	s := readFixture(t, "hgx-h100-nogdr", 2)
	if len(s.Devices) != 7 {
		t.Fatalf("devices: %+v", s.Devices)
	}
	if l, devs, ok := s.Closest(2); !ok || l != NODE || strings.Join(devs, ",") != "mlx5_0,mlx5_1,mlx5_5" {
		t.Errorf("closest of GPU2 = %v %v %v", l, devs, ok)
	}
	gd := s.GPUDirect
	if gd.PeerMemReady() || gd.PeerMemModule != "nvidia_peermem" || gd.PeerMemHolder {
		t.Errorf("peermem: %+v", gd)
	}
	if r, ok := gd.DMABufReady(); r || !ok || gd.Module.V != ModuleProprietary || gd.ModuleVersion != "515.76" {
		t.Errorf("dmabuf %v %v: %+v", r, ok, gd)
	}
}

// A host without GPUs reads no RDMA device chains and no GPUDirect state.
func TestNoGPUs(t *testing.T) {
	s := readFixture(t, "dgx-h100", 2)
	if len(s.GPUs) != 0 || s.Devices != nil || s.GPUDirect != nil || len(s.Errors) != 0 {
		t.Errorf("snapshot of a GPU-less host: %+v", s)
	}
}

func some(v int) Opt[int] { return sysattr.Some(v) }

func TestRelation(t *testing.T) {
	c := func(root string, b ...string) Chain { return Chain{Root: root, Bridges: b} }
	for _, tc := range []struct {
		name   string
		a, b   Chain
		na, nb Opt[int]
		nodes  int
		want   Link
		ok     bool
	}{
		{"one switch", c("pci0000:15", "rp", "usp", "dsp1"), c("pci0000:15", "rp", "usp", "dsp2"), some(0), some(0), 2, PIX, true},
		{"same downstream port (functions of one card)", c("pci0000:15", "rp", "usp", "dsp"), c("pci0000:15", "rp", "usp", "dsp"), some(0), some(0), 2, PIX, true},
		{"two switch levels (DGX A100)", c("pci0000:00", "rp", "usp1", "dsp1", "usp2", "dsp2"), c("pci0000:00", "rp", "usp1", "dsp3"), some(0), some(0), 2, PXB, true},
		{"root ports of one host bridge (EPYC)", c("pci0000:00", "00:03.1"), c("pci0000:00", "00:01.1"), some(0), some(0), 1, PHB, true},
		{"host bridges of one node", c("pci0000:15", "rp"), c("pci0000:37", "rp"), some(0), some(0), 2, NODE, true},
		{"across sockets", c("pci0000:15", "rp"), c("pci0000:97", "rp"), some(0), some(1), 2, SYS, true},
		{"unknown node on a 2-node host", c("pci0000:15", "rp"), c("pci0000:97", "rp"), some(-1), some(1), 2, 0, false},
		{"absent node on a 2-node host", c("pci0000:15", "rp"), c("pci0000:97", "rp"), Opt[int]{}, some(1), 2, 0, false},
		{"one-node host", c("pci0000:15", "rp"), c("pci0000:97", "rp"), some(-1), some(-1), 1, NODE, true},
	} {
		got, ok := Relation(tc.a, tc.b, tc.na, tc.nb, tc.nodes)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseChain(t *testing.T) {
	for _, tc := range []struct {
		in, root, bridges, fn string
		ok                    bool
	}{
		{"../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0", "pci0000:15", "0000:15:01.0,0000:16:00.0,0000:17:01.0", "0000:19:00.0", true},
		{"../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:1a:00.0/infiniband/mlx5_0", "pci0000:15", "0000:15:01.0,0000:16:00.0,0000:17:02.0", "0000:1a:00.0", true},
		// Hyper-V: a domain of its own below the VMBus device.
		{"../../devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/7870ef30-8b76-45f5-9aa4-ee2ea1b19ddc/pci8b76:00/8b76:00:02.0/infiniband/mlx5_0", "pci8b76:00", "", "8b76:00:02.0", true},
		{"../../devices/virtual/infiniband/rxe0", "", "", "", false},
		{"0000:19:00.0", "", "", "", false},
	} {
		c, fn, ok := ParseChain(tc.in)
		if ok != tc.ok || c.Root != tc.root || strings.Join(c.Bridges, ",") != tc.bridges || fn != tc.fn {
			t.Errorf("ParseChain(%q) = %+v %q %v", tc.in, c, fn, ok)
		}
	}
}

func TestParseNVIDIAVersion(t *testing.T) {
	for _, tc := range []struct {
		in, version string
		kind        Module
		bad         bool
	}{
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022\nGCC version:  gcc version 7.5.0\n", "515.76", ModuleProprietary, false},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.42.02  Release Build  (dvs-builder@U16-I3-A03-02-4)  Mon May 13 17:10:33 UTC 2024\n", "555.42.02", ModuleOpen, false},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build", "580.65.06", ModuleOpen, false},
		{"", "", "", true},
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module\n", "", "", true},
		{"garbage", "", "", true},
	} {
		k, v, err := ParseNVIDIAVersion(tc.in)
		if (err != nil) != tc.bad || k != tc.kind || v != tc.version {
			t.Errorf("ParseNVIDIAVersion(%q) = %q %q %v", tc.in, k, v, err)
		}
	}
}

func TestParseKernelConfig(t *testing.T) {
	text := "# comment\nCONFIG_PCI_P2PDMA=y\n# CONFIG_DMABUF_MOVE_NOTIFY is not set\nCONFIG_X=\"s\"\n"
	got := ParseKernelConfig([]byte(text), "CONFIG_PCI_P2PDMA", "CONFIG_DMABUF_MOVE_NOTIFY", "CONFIG_X", "CONFIG_ABSENT")
	want := map[string]string{"CONFIG_PCI_P2PDMA": "y", "CONFIG_DMABUF_MOVE_NOTIFY": "n", "CONFIG_X": "s", "CONFIG_ABSENT": "n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestDMABufReady(t *testing.T) {
	open, prop := Opt[Module]{V: ModuleOpen, OK: true}, Opt[Module]{V: ModuleProprietary, OK: true}
	y, n := Opt[string]{V: "y", OK: true}, Opt[string]{V: "n", OK: true}
	rel := func(s string) Opt[string] { return Opt[string]{V: s, OK: true} }
	for _, tc := range []struct {
		name      string
		g         GPUDirect
		ready, ok bool
	}{
		{"open, P2PDMA", GPUDirect{Module: open, P2PDMA: y, KernelRelease: rel("6.8.0-45-generic")}, true, true},
		{"proprietary", GPUDirect{Module: prop, P2PDMA: y}, false, true},
		{"open, no P2PDMA", GPUDirect{Module: open, P2PDMA: n}, false, true},
		{"open, kernel 5.4", GPUDirect{Module: open, KernelRelease: rel("5.4.0-1")}, false, true},
		{"open, config unknown", GPUDirect{Module: open, KernelRelease: rel("5.15.0-105-generic")}, false, false},
		{"driver not loaded, P2PDMA", GPUDirect{P2PDMA: y}, false, false},
	} {
		r, ok := tc.g.DMABufReady()
		if r != tc.ready || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.name, r, ok, tc.ready, tc.ok)
		}
	}
}

// The kernel configuration comes from /boot/config-<release>, else from
// /proc/config.gz; a corrupt config.gz is one error and absent values.
func TestReadConfig(t *testing.T) {
	root := t.TempDir()
	write := func(name string, b []byte) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/sys/kernel/osrelease", []byte("6.8.0-45-generic\n"))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte("CONFIG_PCI_P2PDMA=y\nCONFIG_DMABUF_MOVE_NOTIFY=y\n")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	write("proc/config.gz", gz.Bytes())
	p, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	g := ReadGPUDirect(p.Open())
	if g.ConfigSource != "/proc/config.gz" || g.P2PDMA.V != "y" || g.MoveNotify.V != "y" || len(g.Errors) != 0 {
		t.Errorf("from config.gz: %+v", g)
	}
	write("boot/config-6.8.0-45-generic", []byte("# CONFIG_PCI_P2PDMA is not set\n"))
	g = ReadGPUDirect(p.Open())
	if g.ConfigSource != "/boot/config-6.8.0-45-generic" || g.P2PDMA.V != "n" || g.MoveNotify.V != "n" {
		t.Errorf("from /boot: %+v", g)
	}
	os.Remove(filepath.Join(root, "boot/config-6.8.0-45-generic"))
	write("proc/config.gz", []byte("not gzip"))
	g = ReadGPUDirect(p.Open())
	if g.P2PDMA.OK || len(g.Errors) != 1 {
		t.Errorf("corrupt config.gz: %+v", g)
	}
}
