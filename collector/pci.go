// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
)

func init() {
	registerCollector("pci", true, "NUMA node, local CPUs and PCIe link of each RDMA device's PCI function",
		func(env Env) (Collector, error) {
			filter, err := NewDeviceFilter(*ibDeviceInclude, *ibDeviceExclude)
			if err != nil {
				return nil, err
			}
			return NewPCICollector(env, filter), nil
		})
}

type pciCollector struct {
	sys    hostfs.FS
	filter DeviceFilter

	numaNode, info                   *prometheus.Desc
	speed, width, maxSpeed, maxWidth *prometheus.Desc
	degraded                         *prometheus.Desc
}

// NewPCICollector builds the pci collector. It honours the infiniband
// collector's device filter: an excluded device is not read here either.
func NewPCICollector(env Env, filter DeviceFilter) Collector {
	dl := []string{"device"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
	}
	return &pciCollector{
		sys:      env.Host.Sys,
		filter:   filter,
		numaNode: d("device_numa_node", "NUMA node of the RDMA device's PCI function (numa_node); -1 when the platform assigns none.", dl),
		info: d("device_pci_info", "PCI function of the RDMA device and the CPUs local to it (local_cpulist); always 1.",
			[]string{"device", "pci_address", "local_cpulist"}),
		speed:    d("device_pcie_link_speed_gts", "Current PCIe link speed per lane in GT/s (current_link_speed).", dl),
		width:    d("device_pcie_link_width_lanes", "Current PCIe link width in lanes (current_link_width).", dl),
		maxSpeed: d("device_pcie_link_max_speed_gts", "Highest PCIe link speed the function supports, in GT/s (max_link_speed).", dl),
		maxWidth: d("device_pcie_link_max_width_lanes", "Widest PCIe link the function supports, in lanes (max_link_width).", dl),
		degraded: d("device_pcie_link_degraded", "1 when the PCIe link trained slower or narrower than the function supports (a card in a lesser slot included).", dl),
	}
}

func (c *pciCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	devs, err := pciDevices(ctx, c.sys, c.filter.Keep)
	if err != nil {
		if errors.Is(err, infiniband.ErrNoClass) {
			return nil
		}
		if devs == nil {
			return err
		}
	}
	errs := []error{err}
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
		gauge(ch, c.info, 1, d.Name, f.Address, local)
		optGauge(ch, c.numaNode, f.NUMANode, d.Name)
		if f.LinkSpeed.OK {
			gauge(ch, c.speed, f.LinkSpeed.V, d.Name)
		}
		if f.MaxLinkSpeed.OK {
			gauge(ch, c.maxSpeed, f.MaxLinkSpeed.V, d.Name)
		}
		optGauge(ch, c.width, f.LinkWidth, d.Name)
		optGauge(ch, c.maxWidth, f.MaxLinkWidth, d.Name)
		if deg, ok := f.LinkDegraded(); ok {
			gauge(ch, c.degraded, b2f(deg), d.Name)
		}
	}
	return errors.Join(errs...)
}
