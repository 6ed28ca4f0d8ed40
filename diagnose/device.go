// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
)

func init() {
	register(&Check{
		ID:    "dev.present",
		Title: "RDMA devices present",
		Reads: nil, // judges the absence of /sys/class/infiniband itself
		Doc: "Every entry of /sys/class/infiniband is a readable device, and the host has at least one " +
			"(or diagnose.expected_devices). No class directory means the RDMA core and the HCA driver are not loaded.",
		Remedy: "Load the driver (modprobe mlx5_ib; on MLNX_OFED: systemctl restart openibd), check that the HCA is seen " +
			"(lspci -d 15b3:) and reseat or replace it if not.",
		Run: checkDevPresent,
	})
}

func checkDevPresent(s *Snapshot, _ *History, cfg *config.Config) ([]Finding, error) {
	remedy := "modprobe mlx5_ib (or the HCA's driver; MLNX_OFED: systemctl restart openibd); check that the HCA is on the bus: lspci -d 15b3:"
	if s.IB == nil {
		if errors.Is(s.IBErr, infiniband.ErrNoClass) {
			return []Finding{{Severity: Fail, Target: "host", Observed: "no RDMA devices",
				Expected: "at least one device in /sys/class/infiniband",
				Evidence: s.IBErr.Error(), Remedy: remedy}}, nil
		}
		return nil, fmt.Errorf("cannot read /sys/class/infiniband: %v", s.IBErr)
	}
	var out []Finding
	readable := 0
	for i := range s.IB.Devices {
		d := &s.IB.Devices[i]
		if !d.NodeType.OK && len(d.Ports) == 0 && len(d.Errors) > 0 {
			out = append(out, Finding{Severity: Warn, Target: d.Name,
				Observed: "class entry present, device unreadable",
				Expected: "a readable device directory",
				Evidence: errors.Join(d.Errors...).Error(),
				Remedy: fmt.Sprintf("the device behind /sys/class/infiniband/%s is gone or broken: check dmesg for mlx5_core errors and "+
					"`rdma dev show`; reload the driver (modprobe -r mlx5_ib && modprobe mlx5_ib) in a maintenance window", d.Name)})
			continue
		}
		readable++
		desc := []string{}
		if d.HCAType.OK {
			desc = append(desc, d.HCAType.V)
		}
		if d.NodeType.OK {
			desc = append(desc, d.NodeType.V.Name)
		}
		if d.PCIAddress != "" {
			desc = append(desc, "PCI "+d.PCIAddress)
		}
		desc = append(desc, fmt.Sprintf("%d port(s)", len(d.Ports)))
		out = append(out, Finding{Severity: Pass, Target: d.Name, Observed: strings.Join(desc, ", "),
			Evidence: "/sys/class/infiniband/" + d.Name})
	}
	want := cfg.Diagnose.ExpectedDevices
	host := Finding{Target: "host", Observed: fmt.Sprintf("%d readable RDMA device(s)", readable)}
	switch {
	case want > 0 && readable < want:
		host.Severity, host.Expected = Fail, fmt.Sprintf("%d (diagnose.expected_devices)", want)
		host.Remedy = remedy
	case want > 0:
		host.Severity, host.Expected = Pass, fmt.Sprintf("%d (diagnose.expected_devices)", want)
	case readable == 0:
		host.Severity, host.Expected, host.Remedy = Fail, "at least 1", remedy
	default:
		host.Severity, host.Expected = Pass, "at least 1"
	}
	return append([]Finding{host}, out...), nil
}
