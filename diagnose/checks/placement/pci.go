// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
)

// PCIChecks registers the checks of pci.go; checks.All lists every concern's.
func PCIChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "pci.link",
		Title: "PCIe link at full speed and width",
		Reads: []diagnose.Source{diagnose.SourcePCI},
		Doc: "The HCA's PCIe link (current_link_speed, current_link_width) equals its capability (max_link_speed, max_link_width); " +
			"a degraded slot caps the port's bandwidth below its link rate (mlnx_tune and sysinfo-snapshot warn the same). Every " +
			"other link up to the root port (a PCIe switch's uplink) trained to the lesser of its two ends' maximum: a switch " +
			"uplink at half speed caps every device below it.",
		Remedy: "Reseat the card, check the slot's bifurcation and PCIe generation setting in the BIOS; lspci -vv shows LnkCap and LnkSta.",
		Run:    checkPCILink,
	})
	l.Register(&diagnose.Check{
		ID:    "pci.numa",
		Title: "NUMA node known",
		Reads: []diagnose.Source{diagnose.SourcePCI},
		Doc: "On a host with more than one NUMA node the HCA's numa_node is not -1; -1 means the platform does not describe " +
			"the topology, so nothing can place work or IRQs next to the HCA. Single-node hosts pass with -1.",
		Remedy: "Enable NUMA (and SLIT/_PXM reporting, SNC settings) in the BIOS.",
		Run:    checkPCINUMA,
	})
}

// pciDevices returns the RDMA devices that sit on a PCI function.
func pciDevices(s *diagnose.Reading) []*irq.Device {
	var out []*irq.Device
	for i := range s.Placement().Devices {
		if s.Placement().Devices[i].PCI.Address != "" {
			out = append(out, &s.Placement().Devices[i])
		}
	}
	return out
}

// pciErr finds the read error of one attribute of a PCI function.
func pciErr(f *pci.Function, name string) error {
	if errs := f.ErrorsFor(name); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func speedText(gts float64) string { return strconv.FormatFloat(gts, 'f', -1, 64) + " GT/s" }

func checkPCILink(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	devs := pciDevices(s)
	if len(devs) == 0 {
		return kit.NoTargets("no RDMA device sits on a PCI function (software devices only)"), nil
	}
	var out []diagnose.Finding
	for _, d := range devs {
		f := &d.PCI
		deg, ok := f.LinkDegraded()
		if !ok {
			why := "the PCIe link files are absent (not a PCIe function, or the kernel prints Unknown)"
			for _, n := range []string{"current_link_speed", "max_link_speed", "current_link_width", "max_link_width"} {
				if err := pciErr(f, n); err != nil {
					why = "cannot read " + n + ": " + err.Error()
					break
				}
			}
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: d.Name, Evidence: why})
			continue
		}
		fd := diagnose.Finding{Target: d.Name,
			Observed: fmt.Sprintf("%s x%d", speedText(f.LinkSpeed.V), f.LinkWidth.V),
			Expected: fmt.Sprintf("%s x%d (max_link_speed, max_link_width)", speedText(f.MaxLinkSpeed.V), f.MaxLinkWidth.V),
			Evidence: "/sys/bus/pci/devices/" + f.Address + "/{current,max}_link_{speed,width}", Severity: diagnose.Pass}
		if deg {
			fd.Severity = diagnose.Warn
			fd.Remedy = fmt.Sprintf("the PCIe link of %s (%s) trained below its capability: reseat the card or move it to a full x%d slot, "+
				"check the slot's bifurcation and PCIe generation in the BIOS; lspci -s %s -vv | grep -E 'LnkCap|LnkSta' shows both",
				d.Name, f.Address, f.MaxLinkWidth.V, f.Address)
		}
		pathLinks(&fd, &f.Path, d.Name)
		out = append(out, fd)
	}
	return out, nil
}

func checkPCINUMA(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	devs := pciDevices(s)
	if len(devs) == 0 {
		return kit.NoTargets("no RDMA device sits on a PCI function (software devices only)"), nil
	}
	nodes := -1
	if s.Topology() != nil && len(s.Topology().Nodes) > 0 {
		nodes = len(s.Topology().Nodes)
	}
	var out []diagnose.Finding
	for _, d := range devs {
		f := &d.PCI
		if !f.NUMANode.OK {
			why := "numa_node is not provided"
			if err := pciErr(f, "numa_node"); err != nil {
				why = "cannot read numa_node: " + err.Error()
			}
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: d.Name, Evidence: why})
			continue
		}
		fd := diagnose.Finding{Target: d.Name, Observed: fmt.Sprintf("numa_node %d", f.NUMANode.V),
			Evidence: "/sys/bus/pci/devices/" + f.Address + "/numa_node", Severity: diagnose.Pass}
		if f.LocalCPUs.OK {
			fd.Observed += ", local CPUs " + f.LocalCPUs.V.String()
		}
		switch {
		case f.NUMANode.V >= 0:
			fd.Expected = "a NUMA node (not -1)"
		case nodes == -1:
			fd.Severity, fd.Evidence = diagnose.Skip, "numa_node is -1 and the host's NUMA nodes cannot be read (devices/system/node)"
		case nodes == 1:
			fd.Expected = "-1 is fine on a single-node host"
		default:
			fd.Severity = diagnose.Warn
			fd.Expected = fmt.Sprintf("a NUMA node: the host has %d", nodes)
			fd.Remedy = fmt.Sprintf("the platform does not say which node %s (%s) is attached to: enable NUMA and ACPI SLIT/_PXM "+
				"reporting in the BIOS (and check SNC/NPS settings); until then place work by hand (lstopo shows the slot)", d.Name, f.Address)
		}
		out = append(out, fd)
	}
	return out, nil
}

// pathLinks warns on a finding when a link between the function and its
// root port, other than its own, trained below what both its ends support
// (the function's own link is the finding's subject already).
func pathLinks(fd *diagnose.Finding, p *pci.Path, name string) {
	hops, _ := p.Degraded()
	var bad []string
	for _, h := range hops {
		if h.Lower == p.Hops[0].Lower {
			continue // its own link: pci.link's own rule judged it
		}
		bad = append(bad, fmt.Sprintf("%s below %s at %s x%d (both ends do %s x%d)", h.Lower, h.Upper,
			speedText(h.LowerAt.Speed.V), h.LowerAt.Width.V,
			speedText(min(h.UpperMax.MaxSpeed.V, h.LowerAt.MaxSpeed.V)), min(h.UpperMax.MaxWidth.V, h.LowerAt.MaxWidth.V)))
	}
	if len(p.Hops) > 1 {
		fd.Evidence += "; the links up to root port " + p.RootPort + ": /sys/bus/pci/devices/{" + hopNames(p) + "}/{current,max}_link_{speed,width}"
	}
	if len(bad) == 0 {
		return
	}
	if fd.Severity == diagnose.Pass {
		fd.Severity = diagnose.Warn
	}
	fd.Observed += "; on the way to the root port: " + strings.Join(bad, ", ")
	fix := fmt.Sprintf("a PCIe switch uplink between %s and its root port %s trained down, capping every device below it: reseat "+
		"the switch board or riser, check the root port's bifurcation and PCIe generation in the BIOS; lspci -s <bdf> -vv shows LnkCap and LnkSta", name, p.RootPort)
	if fd.Remedy == "" {
		fd.Remedy = fix
	} else {
		fd.Remedy += "; " + fix
	}
}

func hopNames(p *pci.Path) string {
	var n []string
	for _, h := range p.Hops {
		n = append(n, h.Lower)
	}
	return strings.Join(n, ",")
}
