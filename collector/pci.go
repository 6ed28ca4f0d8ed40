// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type pciCollector struct {
	numaNode, info                   *expo.Desc
	speed, width, maxSpeed, maxWidth *expo.Desc
	degraded, pathDegraded           *expo.Desc
	aer, rootAER                     *expo.Desc
	maxPayload, maxReadRequest       *expo.Desc

	// out is the samples of the last PCI read (a slow source).
	out rendered[pciKey]
}

// pciKey tells one PCI read's device list from another: the slow source
// serves the same slice until it reads again.
type pciKey struct {
	first *pci.Device
	n     int
}

func keyOf(devs []pci.Device) pciKey {
	if len(devs) == 0 {
		return pciKey{}
	}
	return pciKey{&devs[0], len(devs)}
}

func pciSpec() Spec {
	return Spec{Name: "pci", Default: true,
		Help: "NUMA node, local CPUs and PCIe link of each RDMA device's PCI function",
		New:  func(env Env, _ *Flags) (Collector, error) { return NewPCICollector(env), nil }}
}

// NewPCICollector builds the pci collector. Its data is the snapshot's
// slow PCI source: an excluded device is not read, and the irq collector
// and diagnose share the read.
func NewPCICollector(Env) Collector {
	dl := []string{"device"}
	return &pciCollector{
		numaNode: desc("rdma_device_numa_node", "NUMA node of the RDMA device's PCI function (numa_node); -1 when the platform assigns none.", dl...),
		info: desc("rdma_device_pci_info", "PCI function of the RDMA device and the CPUs local to it (local_cpulist); always 1.",
			[]string{"device", "pci_address", "local_cpulist"}...),
		speed:        desc("rdma_device_pcie_link_speed_gts", "Current PCIe link speed per lane in GT/s (current_link_speed).", dl...),
		width:        desc("rdma_device_pcie_link_width_lanes", "Current PCIe link width in lanes (current_link_width).", dl...),
		maxSpeed:     desc("rdma_device_pcie_link_max_speed_gts", "Highest PCIe link speed the function supports, in GT/s (max_link_speed).", dl...),
		maxWidth:     desc("rdma_device_pcie_link_max_width_lanes", "Widest PCIe link the function supports, in lanes (max_link_width).", dl...),
		degraded:     desc("rdma_device_pcie_link_degraded", "1 when the PCIe link trained slower or narrower than the function supports (a card in a lesser slot included).", dl...),
		pathDegraded: desc("rdma_device_pcie_path_degraded", "1 when a PCIe link between the RDMA device and its root port trained slower or narrower than both its ends support.", dl...),
		aer: desc("rdma_device_pcie_aer_errors_total", "PCIe AER errors the RDMA device's function recorded, by kind (correctable, nonfatal, fatal).",
			"device", "kind"),
		rootAER: desc("rdma_device_pcie_root_port_aer_messages_total", "AER error messages the root port above the RDMA device received from below it, by kind.",
			"device", "kind"),
		// Both need the config space past its 64-byte header: root only.
		maxPayload:     desc("rdma_device_pcie_max_payload_bytes", "Max_Payload_Size the RDMA device's function may send (PCIe DevCtl, as lspci's MaxPayload); absent without root.", dl...),
		maxReadRequest: desc("rdma_device_pcie_max_read_request_bytes", "Max_Read_Request_Size the RDMA device's function may request (PCIe DevCtl, as lspci's MaxReadReq); absent without root.", dl...),
	}
}

func (c *pciCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	devs, err := snap.PCI(ctx)
	if err != nil {
		if errors.Is(err, infiniband.ErrNoClass) {
			return nil
		}
		if devs == nil {
			return err
		}
	}
	rerr := c.out.append(out, keyOf(devs), err, func(out *sink) error {
		var errs []error
		for _, d := range devs {
			errs = append(errs, d.PCI.Errors...)
			f := &d.PCI
			if f.Address == "" {
				continue // software device or vanished: no PCI function
			}
			local := ""
			if f.LocalCPUs.OK {
				local = f.LocalCPUs.V.String()
			}
			gauge(out, c.info, 1, d.Name, f.Address, local)
			optGauge(out, c.numaNode, f.NUMANode, d.Name)
			if f.LinkSpeed.OK {
				gauge(out, c.speed, f.LinkSpeed.V, d.Name)
			}
			if f.MaxLinkSpeed.OK {
				gauge(out, c.maxSpeed, f.MaxLinkSpeed.V, d.Name)
			}
			optGauge(out, c.width, f.LinkWidth, d.Name)
			optGauge(out, c.maxWidth, f.MaxLinkWidth, d.Name)
			if deg, ok := f.LinkDegraded(); ok {
				gauge(out, c.degraded, b2f(deg), d.Name)
			}
			optGauge(out, c.maxPayload, f.Payload.MaxPayload, d.Name)
			optGauge(out, c.maxReadRequest, f.Payload.MaxReadRequest, d.Name)
			errs = append(errs, f.Path.Errors...)
			pathSeries(out, c.pathDegraded, c.aer, c.rootAER, f.AER, &f.Path, d.Name)
		}
		return errors.Join(errs...)
	})
	return errors.Join(err, rerr)
}

// AER error kinds, the values of the kind label.
const (
	aerCorrectable = "correctable"
	aerNonFatal    = "nonfatal"
	aerFatal       = "fatal"
)

// pathSeries exports a function's PCIe health: whether its path to the
// root port is down-trained, its AER totals and its root port's. The pci
// and gpu collectors share it, each with its own label (device, gpu).
func pathSeries(out *sink, degraded, aer, rootAER *expo.Desc, own pci.AER, p *pci.Path, label string) {
	if p.RootPort != "" {
		if hops, ok := p.Degraded(); ok {
			gauge(out, degraded, b2f(len(hops) > 0), label)
		}
	}
	for _, s := range []struct {
		name      string
		dev, root pci.Opt[uint64]
	}{
		{aerCorrectable, own.Correctable, p.RootPortAER.RootPortCorrectable},
		{aerNonFatal, own.NonFatal, p.RootPortAER.RootPortNonFatal},
		{aerFatal, own.Fatal, p.RootPortAER.RootPortFatal},
	} {
		if s.dev.OK {
			counter(out, aer, float64(s.dev.V), label, s.name)
		}
		if s.root.OK {
			counter(out, rootAER, float64(s.root.V), label, s.name)
		}
	}
}
