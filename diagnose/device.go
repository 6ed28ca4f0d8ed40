// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/pci"
)

func deviceChecks(l *checkList) {
	l.register(&Check{
		ID:    "dev.present",
		Title: "RDMA devices present",
		Reads: nil, // judges the absence of /sys/class/infiniband itself
		Doc: "Every entry of /sys/class/infiniband is a readable device, and the host has at least one " +
			"(or diagnose.expected_devices). No class directory means the RDMA core and the HCA driver are not loaded. " +
			"When devices are missing, the Mellanox/NVIDIA (15b3) network functions of the PCI bus say why: none on the bus " +
			"(card not seen, not passed through to the VM), no driver bound, mlx5_core bound without mlx5_ib, or another driver " +
			"(vfio-pci) holding the function.",
		Remedy: "Load the driver (modprobe mlx5_ib; on MLNX_OFED: systemctl restart openibd), check that the HCA is seen " +
			"(lspci -d 15b3:) and reseat or replace it if not.",
		Run: checkDevPresent,
	})
}

// genericDevRemedy is dev.present's remedy when the PCI bus tells nothing.
const genericDevRemedy = "modprobe mlx5_ib (or the HCA's driver; MLNX_OFED: systemctl restart openibd); check that the HCA is on the bus: lspci -d 15b3:"

// busHint says why RDMA devices are missing from what the PCI bus shows:
// no ConnectX/BlueField at all, or functions without an RDMA device and the
// driver that holds each. ok is false when the bus could not be read.
func busHint(s *Reading) (observed, remedy, evidence string, ok bool) {
	bus, err := get(s, Host.Bus)
	if err != nil && len(bus) == 0 {
		return "", "", "", false
	}
	if len(bus) == 0 {
		return "no Mellanox/NVIDIA (15b3) network function on the PCI bus",
			"the kernel sees no ConnectX or BlueField: check that the card is seated and enabled in the BIOS, or, in a VM, that the HCA or a VF is passed through; " +
				"another vendor's RDMA NIC needs its own RDMA driver (irdma, bnxt_re, efa)", "/sys/" + pci.BusDir, true
	}
	has := map[string]bool{}
	if s.ib() != nil {
		for _, d := range s.ib().Devices {
			has[d.PCIAddress] = true
		}
	}
	var fns, remedies []string
	seen := map[string]bool{}
	for _, f := range bus {
		if has[f.Address] {
			continue
		}
		drv := "driver " + f.Driver
		if f.Driver == "" {
			drv = "no driver"
		}
		fns = append(fns, fmt.Sprintf("%s (%s, %s)", f.Address, f.ID(), drv))
		var r string
		switch f.Driver {
		case "":
			r = "no driver is bound: modprobe mlx5_core (mlx4_core for ConnectX-3), or install it (MLNX_OFED/DOCA or the distribution's kernel modules); dmesg | grep -i mlx says why a bind failed"
		case "mlx5_core", "mlx4_core":
			r = fmt.Sprintf("%s is bound but registered no RDMA device: modprobe %s_ib (MLNX_OFED: systemctl restart openibd) and check dmesg | grep %s",
				f.Driver, strings.TrimSuffix(f.Driver, "_core"), strings.TrimSuffix(f.Driver, "_core"))
		default:
			r = fmt.Sprintf("bound to %s, not to mlx5_core (passed to a VM, DPDK or another user): this host cannot use it for RDMA; unbind it if it should", f.Driver)
		}
		if !seen[r] {
			seen[r] = true
			remedies = append(remedies, r)
		}
	}
	if len(fns) == 0 {
		return "every Mellanox/NVIDIA network function on the PCI bus has its RDMA device", genericDevRemedy, "/sys/" + pci.BusDir, true
	}
	return "on the PCI bus without an RDMA device: " + compactList(fns, ", ", 4), strings.Join(remedies, "; "), "/sys/" + pci.BusDir, true
}

func checkDevPresent(s *Reading, _ *History, cfg *config.Config) ([]Finding, error) {
	remedy := genericDevRemedy
	// explain adds what the PCI bus shows to a finding of missing devices.
	explain := func(f *Finding) {
		if obs, r, ev, ok := busHint(s); ok {
			f.Observed += "; " + obs
			f.Remedy = r
			f.Evidence = strings.TrimPrefix(f.Evidence+"; "+ev, "; ")
		}
	}
	if ib, err := get(s, Host.Class); ib == nil {
		if errors.Is(err, infiniband.ErrNoClass) {
			f := Finding{Severity: Fail, Target: "host", Observed: "no RDMA devices",
				Expected: "at least one device in /sys/class/infiniband",
				Evidence: err.Error(), Remedy: remedy}
			explain(&f)
			return []Finding{f}, nil
		}
		return nil, fmt.Errorf("cannot read /sys/class/infiniband: %v", err)
	}
	var out []Finding
	readable := 0
	for i := range s.ib().Devices {
		d := &s.ib().Devices[i]
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
		explain(&host)
	case want > 0:
		host.Severity, host.Expected = Pass, fmt.Sprintf("%d (diagnose.expected_devices)", want)
	case readable == 0:
		host.Severity, host.Expected, host.Remedy = Fail, "at least 1", remedy
		explain(&host)
	default:
		host.Severity, host.Expected = Pass, "at least 1"
	}
	return append([]Finding{host}, out...), nil
}
