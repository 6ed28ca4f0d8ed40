// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
)

// DeviceChecks registers the checks of device.go; checks.All lists every concern's.
func DeviceChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "dev.present",
		Title: "RDMA devices present",
		Reads: nil, // judges the absence of /sys/class/infiniband itself
		Doc: "Every entry of /sys/class/infiniband is a readable device, and the host has at least one " +
			"(or diagnose.expected_devices). When devices are missing, the RDMA-capable functions of the PCI bus say why: " +
			"no driver bound, mlx5_core bound without mlx5_ib, or another driver (vfio-pci) holding the function. " +
			"A host without RDMA hardware (no RDMA device and no RDMA-capable function of any vendor: InfiniBand or fabric class, " +
			"ConnectX/BlueField, EFA) is not a failure: the check skips with the reason, so a DaemonSet on every node of a mixed " +
			"cluster stays quiet; set diagnose.expected_devices where RDMA must be.",
		Remedy: "Load the driver (modprobe mlx5_ib; on MLNX_OFED: systemctl restart openibd), check that the HCA is seen " +
			"(lspci -d 15b3:) and reseat or replace it if not.",
		Run: checkDevPresent,
	})
}

// genericDevRemedy is dev.present's remedy when the PCI bus tells nothing.
const genericDevRemedy = "modprobe mlx5_ib (or the HCA's driver; MLNX_OFED: systemctl restart openibd); check that the HCA is on the bus: lspci -d 15b3:"

// busHint says why RDMA devices are missing from what the PCI bus shows:
// the RDMA-capable functions without an RDMA device and the driver that
// holds each. ok is false when the bus could not be read; none is true
// when the bus read in full shows no RDMA-capable function at all (a
// plain server), with the network functions it has in observed.
func busHint(s *diagnose.Reading) (observed, remedy, evidence string, none, ok bool) {
	bus, err := diagnose.Get(s, diagnose.Host.Bus)
	if err != nil && len(bus) == 0 {
		return "", "", "", false, false
	}
	evidence = "/sys/" + pci.BusDir
	has := map[string]bool{}
	if s.IB() != nil {
		for _, d := range s.IB().Devices {
			has[d.PCIAddress] = true
		}
	}
	var fns, remedies, others []string
	capable := 0
	seen := map[string]bool{}
	for _, f := range bus {
		drv := "driver " + f.Driver
		if f.Driver == "" {
			drv = "no driver"
		}
		if !f.RDMACapable() {
			others = append(others, fmt.Sprintf("%s (%s, %s)", f.Address, f.ID(), drv))
			continue
		}
		capable++
		if has[f.Address] {
			continue
		}
		fns = append(fns, fmt.Sprintf("%s (%s, %s)", f.Address, f.ID(), drv))
		var r string
		switch {
		case f.Driver == "" && f.Vendor == pci.MellanoxVendor:
			r = "no driver is bound: modprobe mlx5_core (mlx4_core for ConnectX-3), or install it (MLNX_OFED/DOCA or the distribution's kernel modules); dmesg | grep -i mlx says why a bind failed"
		case f.Driver == "":
			r = "no driver is bound: load the adapter's RDMA driver (efa, hfi1, ...) and check dmesg for why a bind failed"
		case f.Driver == "mlx5_core", f.Driver == "mlx4_core":
			r = fmt.Sprintf("%s is bound but registered no RDMA device: modprobe %s_ib (MLNX_OFED: systemctl restart openibd) and check dmesg | grep %s",
				f.Driver, strings.TrimSuffix(f.Driver, "_core"), strings.TrimSuffix(f.Driver, "_core"))
		default:
			r = fmt.Sprintf("bound to %s, which registered no RDMA device (passed to a VM, DPDK or another user, or ib_core not loaded): "+
				"unbind it if this host should use it for RDMA; dmesg | grep %s", f.Driver, f.Driver)
		}
		if !seen[r] {
			seen[r] = true
			remedies = append(remedies, r)
		}
	}
	switch {
	case capable == 0 && err == nil:
		obs := "no RDMA-capable function of any vendor on the PCI bus"
		if len(others) > 0 {
			obs += " (network functions: " + kit.CompactList(others, ", ", 4) + ")"
		}
		return obs, "the kernel sees no RDMA adapter: check that the card is seated and enabled in the BIOS, or, in a VM, " +
			"that the HCA or a VF is passed through; lspci -nn | grep -Ei 'infiniband|mellanox|efa'", evidence, true, true
	case capable == 0:
		// Part of the bus was unreadable: RDMA hardware may hide there.
		return "no RDMA-capable function among the PCI functions read", genericDevRemedy, evidence, false, true
	case len(fns) == 0:
		return "every RDMA-capable function on the PCI bus has its RDMA device", genericDevRemedy, evidence, false, true
	}
	return "on the PCI bus without an RDMA device: " + kit.CompactList(fns, ", ", 4), strings.Join(remedies, "; "), evidence, false, true
}

func checkDevPresent(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	remedy := genericDevRemedy
	want := cfg.Diagnose.ExpectedDevices
	// explain adds what the PCI bus shows to a finding of missing devices.
	// A host without RDMA hardware that expects none is not judged: the
	// finding becomes a skip with the reason.
	explain := func(f *diagnose.Finding) {
		obs, r, ev, none, ok := busHint(s)
		if !ok {
			return
		}
		if none && want == 0 {
			// The reason a skip shows is its evidence.
			*f = diagnose.Finding{Severity: diagnose.Skip, Target: f.Target, Observed: "no RDMA hardware",
				Evidence: fmt.Sprintf("no RDMA hardware to judge: no readable RDMA device and %s (%s); "+
					"a host that should have an RDMA card does not see it on the bus (seated, enabled in the BIOS, passed through to the VM?), "+
					"and diagnose.expected_devices makes that a failure", obs, ev)}
			return
		}
		f.Observed += "; " + obs
		f.Evidence = strings.TrimPrefix(f.Evidence+"; "+ev, "; ")
		f.Remedy = r
	}
	if ib, err := diagnose.Get(s, diagnose.Host.Class); ib == nil {
		if errors.Is(err, infiniband.ErrNoClass) {
			f := diagnose.Finding{Severity: diagnose.Fail, Target: "host", Observed: "no RDMA devices",
				Expected: "at least one device in /sys/class/infiniband",
				Evidence: err.Error(), Remedy: remedy}
			if want > 0 {
				f.Expected = fmt.Sprintf("%d (diagnose.expected_devices)", want)
			}
			explain(&f)
			return []diagnose.Finding{f}, nil
		}
		return nil, fmt.Errorf("cannot read /sys/class/infiniband: %v", err)
	}
	var out []diagnose.Finding
	readable := 0
	for i := range s.IB().Devices {
		d := &s.IB().Devices[i]
		if !d.NodeType.OK && len(d.Ports) == 0 && len(d.Errors) > 0 {
			out = append(out, diagnose.Finding{Severity: diagnose.Warn, Target: d.Name,
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
		out = append(out, diagnose.Finding{Severity: diagnose.Pass, Target: d.Name, Observed: strings.Join(desc, ", "),
			Evidence: "/sys/class/infiniband/" + d.Name})
	}
	host := diagnose.Finding{Target: "host", Observed: fmt.Sprintf("%d readable RDMA device(s)", readable)}
	switch {
	case want > 0 && readable < want:
		host.Severity, host.Expected = diagnose.Fail, fmt.Sprintf("%d (diagnose.expected_devices)", want)
		host.Remedy = remedy
		explain(&host)
	case want > 0:
		host.Severity, host.Expected = diagnose.Pass, fmt.Sprintf("%d (diagnose.expected_devices)", want)
	case readable == 0:
		host.Severity, host.Expected, host.Remedy = diagnose.Fail, "at least 1", remedy
		explain(&host)
	default:
		host.Severity, host.Expected = diagnose.Pass, "at least 1"
	}
	return append([]diagnose.Finding{host}, out...), nil
}
