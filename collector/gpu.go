// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/expo"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
)

type gpuCollector struct {
	info, speed, width, degraded *expo.Desc
	affinity                     *expo.Desc
	ready, module                *expo.Desc
}

// Paths of GPUDirect RDMA, the values of rdma_gpudirect_ready's path label.
const (
	gpuDirectPeerMem = "peermem"
	gpuDirectDMABuf  = "dmabuf"
)

// NewGPUCollector builds the gpu collector. Its data is the snapshot's
// slow GPU source; a host without GPUs exports nothing from it.
func NewGPUCollector(Env) Collector {
	gl := []string{"gpu"}
	return &gpuCollector{
		info: desc("rdma_gpu_info", "A GPU of the PCI bus (NVIDIA 3D/VGA, AMD accelerator classes), numbered in PCI bus order as nvidia-smi does; always 1.",
			"gpu", "pci_address", "device_id", "numa_node", "driver"),
		speed:    desc("rdma_gpu_pcie_link_speed_gts", "Current PCIe link speed of the GPU per lane in GT/s (current_link_speed).", gl...),
		width:    desc("rdma_gpu_pcie_link_width_lanes", "Current PCIe link width of the GPU in lanes (current_link_width).", gl...),
		degraded: desc("rdma_gpu_pcie_link_degraded", "1 when the GPU's PCIe link trained slower or narrower than the GPU supports.", gl...),
		affinity: desc("rdma_gpu_device_affinity", "PCI relation between a GPU and an RDMA device as nvidia-smi topo -m names it (link: PIX one switch, PXB several, PHB host bridge, NODE same NUMA node, SYS across nodes), from the sysfs PCI paths; always 1.",
			"gpu", "device", "link"),
		ready: desc("rdma_gpudirect_ready", "1 when a GPUDirect RDMA path is ready: peermem (nvidia_peermem or nv_peer_mem registered with ib_core), dmabuf (NVIDIA open kernel module, kernel 5.12+ with CONFIG_PCI_P2PDMA); absent when it cannot be told.",
			"path"),
		module: desc("rdma_gpu_kernel_module_info", "The loaded NVIDIA kernel module (/proc/driver/nvidia/version): kind open or proprietary, and version; always 1.",
			"kind", "version"),
	}
}

func (c *gpuCollector) Update(ctx context.Context, snap *host.Snapshot, ch chan<- prometheus.Metric) error {
	s, err := snap.GPUs(ctx)
	if s == nil {
		return err
	}
	for i := range s.GPUs {
		g := &s.GPUs[i]
		f := &g.Function
		numa := ""
		if f.NUMANode.OK {
			numa = strconv.Itoa(f.NUMANode.V)
		}
		gauge(ch, c.info, 1, g.Name(), g.Address, fmt.Sprintf("%04x:%04x", g.Vendor, g.Device), numa, g.Driver)
		if f.LinkSpeed.OK {
			gauge(ch, c.speed, f.LinkSpeed.V, g.Name())
		}
		if f.LinkWidth.OK {
			gauge(ch, c.width, float64(f.LinkWidth.V), g.Name())
		}
		if deg, ok := f.LinkDegraded(); ok {
			gauge(ch, c.degraded, b2f(deg), g.Name())
		}
	}
	for _, a := range s.Affinity {
		gauge(ch, c.affinity, 1, strconv.Itoa(a.GPU), a.Device, a.Link.String())
	}
	if d := s.GPUDirect; d != nil {
		gauge(ch, c.ready, b2f(d.PeerMemReady()), gpuDirectPeerMem)
		if r, ok := d.DMABufReady(); ok {
			gauge(ch, c.ready, b2f(r), gpuDirectDMABuf)
		}
		if d.Module.OK {
			gauge(ch, c.module, 1, string(d.Module.V), d.ModuleVersion)
		}
	}
	return errors.Join(append(s.Errors, err)...)
}
