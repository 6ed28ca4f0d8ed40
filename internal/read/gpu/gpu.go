// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpu reads the GPUs of the PCI bus and where they sit against the
// RDMA devices: each GPU's function (NUMA node, PCIe link, driver), the
// PCI ancestor chain of every GPU and RDMA device (the path of its sysfs
// directory), the nvidia-smi `topo -m` relation between every GPU and
// every RDMA device computed from those chains, and whether GPUDirect RDMA
// can work (gpudirect.go). Nothing here needs a GPU driver or NVML: it is
// all sysfs and procfs, readable without privileges.
package gpu

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing; a missing value is never zero.
type Opt[T any] = sysattr.Opt[T]

// PCI vendor ids of the GPU makers read here.
const (
	VendorNVIDIA = 0x10de
	VendorAMD    = 0x1002
)

// IsGPU reports whether a function is a GPU by its vendor and 24-bit
// class: NVIDIA 3D (0x0302xx) and VGA (0x0300xx) controllers; AMD
// processing accelerators (0x1200xx) and display controllers (0x0380xx),
// the classes of the Instinct cards. An AMD VGA controller (0x0300xx) is a
// Radeon or a server's BMC-less graphics, not an accelerator, and so is an
// NVIDIA NVSwitch (class 0x0680xx).
func IsGPU(vendor uint16, class uint32) bool {
	sub := class >> 8
	switch vendor {
	case VendorNVIDIA:
		return sub == 0x0302 || sub == 0x0300
	case VendorAMD:
		return sub == 0x1200 || sub == 0x0380
	}
	return false
}

// GPU is one GPU function of the PCI bus.
type GPU struct {
	// Index is the GPU's place in PCI bus order, as nvidia-smi and
	// CUDA_DEVICE_ORDER=PCI_BUS_ID number them ("GPU0").
	Index   int
	Address string
	Vendor  uint16
	Device  uint16
	Class   uint32
	// Driver is the bound kernel driver (nvidia, amdgpu, vfio-pci); ""
	// when none is bound, which is a state, not an error.
	Driver string
	// Function holds the NUMA node and PCIe link, read by the one PCI
	// function reader.
	Function pci.Function
	// Chain is where the function sits.
	Chain Chain
}

// Name is the GPU's label value ("0" for GPU0).
func (g *GPU) Name() string { return strconv.Itoa(g.Index) }

// Endpoint is one RDMA device and where its PCI function sits.
type Endpoint struct {
	Name    string
	Address string
	// NUMANode is the function's numa_node; -1 when the platform assigns
	// none.
	NUMANode Opt[int]
	Chain    Chain
}

// Chain is a PCI function's place in the tree (pci.Chain).
type Chain = pci.Chain

// ParseChain reads a chain from a sysfs link target or path (pci.ParseChain).
func ParseChain(p string) (Chain, string, bool) { return pci.ParseChain(p) }

// Link is the nvidia-smi `topo -m` relation between two PCI functions,
// nearest first; the values are NVML's nvmlGpuTopologyLevel_t.
type Link int

// The relations, as nvidia-smi's legend defines them.
const (
	// PIX: at most a single PCIe bridge (one switch) between them.
	PIX Link = 10
	// PXB: several PCIe bridges, without the host bridge.
	PXB Link = 20
	// PHB: through a PCIe host bridge (the CPU's root complex).
	PHB Link = 30
	// NODE: across host bridges within one NUMA node.
	NODE Link = 40
	// SYS: across NUMA nodes (the SMP interconnect).
	SYS Link = 50
)

func (l Link) String() string {
	switch l {
	case PIX:
		return "PIX"
	case PXB:
		return "PXB"
	case PHB:
		return "PHB"
	case NODE:
		return "NODE"
	case SYS:
		return "SYS"
	}
	return fmt.Sprintf("Link(%d)", int(l))
}

// Relation computes the link between two functions from their chains and
// NUMA nodes, as nvidia-smi reports it: below one switch is PIX (the
// switch's upstream port, or a shared downstream port, is the nearest
// common bridge and each side crosses at most one more bridge to it);
// a deeper common bridge is PXB; only the host bridge in common is PHB;
// different host bridges are NODE on one NUMA node and SYS across nodes.
// nodes is the host's NUMA node count: with one node (or none) different
// host bridges are NODE whatever numa_node says. ok is false when the NUMA
// nodes decide and one is unknown or -1 on a multi-node host.
func Relation(a, b Chain, numaA, numaB Opt[int], nodes int) (Link, bool) {
	if a.Root == b.Root {
		k := 0
		for k < len(a.Bridges) && k < len(b.Bridges) && a.Bridges[k] == b.Bridges[k] {
			k++
		}
		if k == 0 {
			return PHB, true
		}
		if len(a.Bridges)-k <= 1 && len(b.Bridges)-k <= 1 {
			return PIX, true
		}
		return PXB, true
	}
	if nodes <= 1 {
		return NODE, true
	}
	if !numaA.OK || !numaB.OK || numaA.V < 0 || numaB.V < 0 {
		return 0, false
	}
	if numaA.V == numaB.V {
		return NODE, true
	}
	return SYS, true
}

// Affinity is the relation of one GPU to one RDMA device.
type Affinity struct {
	GPU    int
	Device string
	Link   Link
}

// Snapshot is the GPUs of the host and their relation to the RDMA
// devices.
type Snapshot struct {
	// GPUs in PCI bus order; empty on a host without GPUs.
	GPUs []GPU
	// Devices are the RDMA devices that sit on a PCI function, by name.
	Devices []Endpoint
	// Affinity holds every GPU × device pair whose relation could be
	// computed, GPU order then device order.
	Affinity []Affinity
	// GPUDirect is the readiness of GPUDirect RDMA; nil on a host without
	// NVIDIA GPUs, where it is not asked.
	GPUDirect *GPUDirect
	// P2P is the ACS and IOMMU state between each GPU and its nearest
	// HCAs; nil on a host without GPUs.
	P2P *P2P
	// Errors are the read and parse errors met, each naming its file, and
	// the pairs that could not be classified.
	Errors []error
}

// Options say what Read reads.
type Options struct {
	// Keep selects the RDMA devices (the device filter); nil keeps all.
	Keep func(string) bool
	// Nodes is the host's NUMA node count (pci.Topology's nodes).
	Nodes int
}

// Read reads the GPUs of the PCI bus below sys, the RDMA devices' chains,
// their relations and (when there are GPUs) the GPUDirect readiness. A host
// without a PCI bus directory has no GPUs: an empty snapshot, no error.
func Read(ctx context.Context, h hostfs.Host, opts Options) (*Snapshot, error) {
	s := &Snapshot{}
	entries, err := h.Sys.ReadDir(pci.BusDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, nil
		}
		return nil, err
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		if !pci.IsAddress(e.Name()) {
			continue
		}
		g, ok, err := readGPU(h.Sys, e.Name())
		if err != nil {
			s.Errors = append(s.Errors, err)
		}
		if ok {
			s.GPUs = append(s.GPUs, g)
		}
	}
	if len(s.GPUs) == 0 {
		return s, nil
	}
	sort.Slice(s.GPUs, func(i, j int) bool { return s.GPUs[i].Address < s.GPUs[j].Address })
	for i := range s.GPUs {
		s.GPUs[i].Index = i
	}
	s.Devices, err = readEndpoints(h.Sys, opts.Keep, &s.Errors)
	if err != nil && !errors.Is(err, infiniband.ErrNoClass) {
		s.Errors = append(s.Errors, err)
	}
	for i := range s.GPUs {
		g := &s.GPUs[i]
		for _, d := range s.Devices {
			l, ok := Relation(g.Chain, d.Chain, g.Function.NUMANode, d.NUMANode, opts.Nodes)
			if !ok {
				s.Errors = append(s.Errors, fmt.Errorf("GPU%d (%s) and %s: on different host bridges and a NUMA node is unknown: relation not classified", g.Index, g.Address, d.Name))
				continue
			}
			s.Affinity = append(s.Affinity, Affinity{GPU: g.Index, Device: d.Name, Link: l})
		}
	}
	s.P2P = s.readP2P(h)
	// The prerequisites read are NVIDIA's (peermem, the NVIDIA module);
	// an AMD-only host is not judged by them.
	if slices.ContainsFunc(s.GPUs, func(g GPU) bool { return g.Vendor == VendorNVIDIA }) {
		s.GPUDirect = ReadGPUDirect(h)
		s.Errors = append(s.Errors, s.GPUDirect.Errors...)
	}
	return s, ctx.Err()
}

// readGPU reads one bus function; ok is false when it is not a GPU. Only
// the vendor is read of a function that is not an NVIDIA or AMD one.
func readGPU(sys hostfs.FS, addr string) (GPU, bool, error) {
	dir := pci.BusDir + "/" + addr
	v, err := readID(sys, dir+"/vendor", 0xffff)
	if err != nil {
		return GPU{}, false, err
	}
	if v != VendorNVIDIA && v != VendorAMD {
		return GPU{}, false, nil
	}
	c, err := readID(sys, dir+"/class", 0xffffff)
	if err != nil {
		return GPU{}, false, err
	}
	if !IsGPU(uint16(v), uint32(c)) {
		return GPU{}, false, nil
	}
	d, err := readID(sys, dir+"/device", 0xffff)
	if err != nil {
		return GPU{}, false, err
	}
	link, err := sys.ReadLink(dir)
	if err != nil {
		return GPU{}, false, err
	}
	chain, fn, ok := ParseChain(link)
	if !ok || fn != addr {
		return GPU{}, false, fmt.Errorf("%s: link %q does not end in the function's own address", dir, link)
	}
	g := GPU{Address: addr, Vendor: uint16(v), Device: uint16(d), Class: uint32(c), Chain: chain}
	g.Function = pci.ReadFunction(sys, dir)
	g.Function.Address = addr
	g.Function.Path = pci.ReadPath(sys, chain, addr)
	g.Function.Errors = append(g.Function.Errors, g.Function.Path.Errors...)
	if dl, err := sys.ReadLink(dir + "/driver"); err == nil {
		g.Driver = names.Label(path.Base(dl)) // a label value: the label policy
	} else if !errors.Is(err, fs.ErrNotExist) {
		g.Function.Errors = append(g.Function.Errors, err)
	}
	return g, true, errors.Join(g.Function.Errors...)
}

func readID(sys hostfs.FS, name string, max uint64) (uint64, error) {
	b, err := sys.ReadFile(name)
	if err != nil {
		return 0, err
	}
	v, err := pci.ParseHexID(string(b), max)
	if err != nil {
		return 0, &sysattr.ParseError{Path: name, Err: err}
	}
	return v, nil
}

// readEndpoints reads the chain and NUMA node of every kept RDMA device
// with a PCI function. Software devices (rxe, siw) have none and are left
// out; a dangling class link is the infiniband collector's to report.
func readEndpoints(sys hostfs.FS, keep func(string) bool, errs *[]error) ([]Endpoint, error) {
	names, err := infiniband.DeviceNames(sys, keep)
	if err != nil {
		return nil, err
	}
	var out []Endpoint
	for _, name := range names {
		link, err := sys.ReadLink(infiniband.ClassDir + "/" + name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				*errs = append(*errs, err)
			}
			continue
		}
		chain, fn, ok := ParseChain(link)
		if !ok {
			continue
		}
		if _, err := sys.ReadLink(pci.BusDir + "/" + fn); err != nil {
			// The class link points at a function that is gone.
			continue
		}
		d := sysattr.Dir{FS: sys, Path: pci.BusDir + "/" + fn}
		ep := Endpoint{Name: name, Address: fn, Chain: chain}
		ep.NUMANode = sysattr.Get(&d, "numa_node", true, pci.ParseNUMANode)
		*errs = append(*errs, d.Errs...)
		out = append(out, ep)
	}
	return out, nil
}

// Closest returns, for GPU g, the nearest relation it has to any device
// and the devices at that relation, in name order; ok is false when the
// GPU has no classified relation at all.
func (s *Snapshot) Closest(g int) (Link, []string, bool) {
	best := Link(0)
	var devs []string
	for _, a := range s.Affinity {
		if a.GPU != g {
			continue
		}
		switch {
		case best == 0 || a.Link < best:
			best, devs = a.Link, []string{a.Device}
		case a.Link == best:
			devs = append(devs, a.Device)
		}
	}
	return best, devs, best != 0
}
