// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type gpuCollector struct {
	info, speed, width, degraded *expo.Desc
	affinity                     *expo.Desc
	ready, module                *expo.Desc
	pathDegraded, aer, rootAER   *expo.Desc
	acsRedirect, acsControl      *expo.Desc
	ats, iommu                   *expo.Desc

	// out is the samples of the last read (a slow source).
	out rendered[*gpu.Snapshot]
}

// Paths of GPUDirect RDMA, the values of rdma_gpudirect_ready's path label.
const (
	gpuDirectPeerMem = "peermem"
	gpuDirectDMABuf  = "dmabuf"
)

func gpuSpec() Spec {
	return Spec{Name: "gpu", Default: true,
		Help: "GPUs of the PCI bus, their PCI relation to every RDMA device (nvidia-smi topo -m) and GPUDirect RDMA readiness; nothing on a host without GPUs",
		New:  func(env Env, _ *Flags) (Collector, error) { return NewGPUCollector(env), nil }}
}

// NewGPUCollector builds the gpu collector. Its data is the snapshot's
// slow GPU source; a host without GPUs exports nothing from it.
func NewGPUCollector(Env) Collector {
	gl := []string{"gpu"}
	return &gpuCollector{
		info: desc("rdma_gpu_info", "A GPU of the PCI bus (NVIDIA 3D/VGA, AMD accelerator classes), numbered in PCI bus order as nvidia-smi does; always 1.",
			"gpu", "pci_address", "device_id", "numa_node", "driver"),
		speed:    desc("rdma_gpu_pcie_link_speed_gts", "Current PCIe link speed of the GPU per lane in GT/s (current_link_speed).", gl...),
		width:    desc("rdma_gpu_pcie_link_width_lanes", "Current PCIe link width of the GPU in lanes (current_link_width).", gl...),
		degraded: desc("rdma_gpu_pcie_link_degraded", "1 when the GPU's PCIe link trained narrower than the GPU supports (its speed is not judged: idle GPUs slow it).", gl...),
		affinity: desc("rdma_gpu_device_affinity", "PCI relation between a GPU and an RDMA device as nvidia-smi topo -m names it (PIX, PXB, PHB, NODE, SYS); always 1.",
			"gpu", "device", "link"),
		ready: desc("rdma_gpudirect_ready", "1 when a GPUDirect RDMA path (peermem, dmabuf) is ready, 0 when not; absent when it cannot be told.",
			"path"),
		module: desc("rdma_gpu_kernel_module_info", "The loaded NVIDIA kernel module (/proc/driver/nvidia/version): kind open or proprietary, and version; always 1.",
			"kind", "version"),
		pathDegraded: desc("rdma_gpu_pcie_path_degraded", "1 when a PCIe link between the GPU and its root port trained slower or narrower than both its ends support.", gl...),
		aer: desc("rdma_gpu_pcie_aer_errors_total", "PCIe AER errors the GPU recorded, by kind (correctable, nonfatal, fatal: the TOTAL_ERR_* lines of aer_dev_*).",
			"gpu", "kind"),
		rootAER: desc("rdma_gpu_pcie_root_port_aer_messages_total", "AER error messages the root port above the GPU received from anything below it, by kind (aer_rootport_total_err_*).",
			"gpu", "kind"),
		acsRedirect: desc("rdma_pci_acs_redirect_enabled", "1 when a bridge between a GPU and its nearest HCA redirects or blocks peer-to-peer traffic (ACS), 0 when not.",
			"pci_address"),
		acsControl: desc("rdma_pci_acs_control_register", "ACS control register of a bridge between a GPU and its nearest HCA (bit 2 ReqRedir, 3 CmpltRedir, 5 EgressCtrl).",
			"pci_address"),
		ats: desc("rdma_pci_ats_enabled", "1 when Address Translation Services is enabled on a GPU, an HCA or a bridge between them.",
			"pci_address"),
		iommu: desc("rdma_pci_iommu_domain_info", "IOMMU default domain type of a GPU or HCA of a GPU-HCA pair (identity, DMA, DMA-FQ, none); always 1.",
			"pci_address", "type"),
	}
}

func (c *gpuCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	s, err := snap.GPUs(ctx)
	if s == nil {
		return err
	}
	rerr := c.out.append(out, s, err, func(out *sink) error {
		for i := range s.GPUs {
			g := &s.GPUs[i]
			f := &g.Function
			numa := ""
			if f.NUMANode.OK {
				numa = strconv.Itoa(f.NUMANode.V)
			}
			gauge(out, c.info, 1, g.Name(), g.Address, fmt.Sprintf("%04x:%04x", g.Vendor, g.Device), numa, g.Driver)
			if f.LinkSpeed.OK {
				gauge(out, c.speed, f.LinkSpeed.V, g.Name())
			}
			if f.LinkWidth.OK {
				gauge(out, c.width, float64(f.LinkWidth.V), g.Name())
			}
			// Width only: a GPU's link speed follows its power state.
			if f.LinkWidth.OK && f.MaxLinkWidth.OK {
				gauge(out, c.degraded, b2f(f.LinkWidth.V < f.MaxLinkWidth.V), g.Name())
			}
			pathSeries(out, c.pathDegraded, c.aer, c.rootAER, f.AER, &f.Path, g.Name())
		}
		if p := s.P2P; p != nil {
			c.p2p(out, p)
		}
		for _, a := range s.Affinity {
			gauge(out, c.affinity, 1, strconv.Itoa(a.GPU), a.Device, a.Link.String())
		}
		if d := s.GPUDirect; d != nil {
			gauge(out, c.ready, b2f(d.PeerMemReady()), gpuDirectPeerMem)
			if r, ok := d.DMABufReady(); ok {
				gauge(out, c.ready, b2f(r), gpuDirectDMABuf)
			}
			if d.Module.OK {
				gauge(out, c.module, 1, string(d.Module.V), d.ModuleVersion)
			}
		}
		return errors.Join(s.Errors...)
	})
	return errors.Join(rerr, err)
}

// p2p exports the ACS, ATS and IOMMU state between the GPUs and their
// nearest HCAs. Each address is exported once: the bridges are unique,
// and a GPU or HCA is in Functions once.
func (c *gpuCollector) p2p(out *sink, p *gpu.P2P) {
	for i := range p.Bridges {
		b := &p.Bridges[i]
		a, present, known := b.Config.ACS()
		if !known {
			continue
		}
		gauge(out, c.acsRedirect, b2f(present && a.Redirects()), b.Address)
		if present {
			gauge(out, c.acsControl, float64(a.Ctl), b.Address)
		}
		if t, present, _ := b.Config.ATS(); present {
			gauge(out, c.ats, b2f(t.Enabled), b.Address)
		}
	}
	addrs := make([]string, 0, len(p.Functions))
	for a := range p.Functions {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		f := p.Functions[a]
		if t, present, _ := f.Config.ATS(); present {
			gauge(out, c.ats, b2f(t.Enabled), a)
		}
		if f.IOMMU.OK {
			gauge(out, c.iommu, 1, a, f.IOMMU.V)
		}
	}
}
