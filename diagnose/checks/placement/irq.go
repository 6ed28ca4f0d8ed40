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
)

// IRQChecks registers the checks of irq.go; checks.All lists every concern's.
func IRQChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "irq.local",
		Title: "Completion IRQs on the HCA's NUMA node",
		Reads: []diagnose.Source{diagnose.SourcePCI, diagnose.SourceIRQ},
		Doc: "Every completion IRQ of the device (/proc/interrupts, keyed by PCI address or msi_irqs) is allowed only on CPUs of the " +
			"device's local_cpulist (smp_affinity_list); an IRQ on the remote node costs a cross-socket hop per completion.",
		Remedy: "Spread the device's completion IRQs over its local_cpulist (rdma_doctor remediate, action irq-affinity; or mlnx-tools' " +
			"set_irq_affinity_bynode.sh), and keep irqbalance from undoing it.",
		Run: checkIRQLocal,
	})
	l.Register(&diagnose.Check{
		ID:    "irq.spread",
		Title: "Completion IRQs spread over CPUs",
		Reads: []diagnose.Source{diagnose.SourcePCI, diagnose.SourceIRQ},
		Doc: "A device's completion IRQs are delivered to more than one CPU (effective_affinity_list, else smp_affinity_list); " +
			"all on one CPU (the guide's own pinning loop) serialises every completion of the HCA on that core.",
		Remedy: "Spread the IRQs round-robin over the local CPUs (action irq-affinity).",
		Run:    checkIRQSpread,
	})
	l.Register(&diagnose.Check{
		ID:    "irq.balance",
		Title: "irqbalance does not undo placement",
		Reads: []diagnose.Source{diagnose.SourcePCI, diagnose.SourceIRQ},
		Doc: "irqbalance rewrites smp_affinity periodically, so it undoes manual pinning. Running while completion IRQs sit off the " +
			"HCA's node warns (it put them there, or will undo a fix); running with every IRQ local passes with a note. " +
			"The process table is that of the procfs at --path.procfs: the host's /proc mounted at /host/proc shows the host's processes " +
			"without hostPID (a procfs lists the PID namespace it was mounted in); a container's own /proc shows only its own.",
		Remedy: "Ban the HCA's IRQs in irqbalance (IRQBALANCE_BANNED_CPULIST or --banirq) or stop it (systemctl disable --now irqbalance) before pinning.",
		Run:    checkIRQBalance,
	})
}

// irqDevices returns the devices with keyed completion IRQs, and a skip
// finding for each device without.
func irqDevices(s *diagnose.Reading) (devs []*irq.Device, skips []diagnose.Finding) {
	for _, d := range pciDevices(s) {
		switch {
		case d.Unclassified > 0:
			skips = append(skips, unclassifiedSkip(d))
		case !d.Keyed():
			skips = append(skips, diagnose.Finding{Severity: diagnose.Skip, Target: d.Name,
				Evidence: fmt.Sprintf("no line of /proc/interrupts belongs to %s (%s): no IRQs, or a naming rdma_doctor does not know", d.Name, d.PCI.Address)})
		case len(d.Completion()) == 0:
			skips = append(skips, diagnose.Finding{Severity: diagnose.Skip, Target: d.Name,
				Evidence: fmt.Sprintf("%d IRQ(s) of %s, none a completion vector", len(d.IRQs), d.Name)})
		default:
			devs = append(devs, d)
		}
	}
	return devs, skips
}

func irqRemedy(d *irq.Device) string {
	local := "<local_cpulist>"
	if d.PCI.LocalCPUs.OK {
		local = d.PCI.LocalCPUs.V.String()
	}
	return fmt.Sprintf("spread the completion IRQs of %s round-robin over its local CPUs %s: rdma_doctor remediate --only irq-affinity, "+
		"or echo <cpu> > /proc/irq/<n>/smp_affinity_list for each; ban them in irqbalance (or stop it) so it does not undo this", d.Name, local)
}

func irqList(qs []*irq.DeviceIRQ, max int) string {
	var parts []string
	for i, q := range qs {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(qs)-max))
			break
		}
		cpus := "?"
		if q.Affinity.OK {
			cpus = q.Affinity.V.String()
		}
		parts = append(parts, fmt.Sprintf("irq %d (%s) allowed on %s", q.Number, q.Name, cpus))
	}
	return strings.Join(parts, ", ")
}

// unclassifiedSkip is the finding for a device with IRQs whose names are in
// no naming form rdma_doctor knows: it has IRQs, so it is not "0 IRQs",
// but which of them carry completions is unknown, and a count or a
// placement judged over a guess would be made up.
func unclassifiedSkip(d *irq.Device) diagnose.Finding {
	example := ""
	for i := range d.IRQs {
		if q := &d.IRQs[i]; q.Vector.Kind == irq.Other {
			example = fmt.Sprintf(" (such as irq %d %q)", q.Number, q.Name)
			break
		}
	}
	local := "its local_cpulist"
	if d.PCI.LocalCPUs.OK {
		local = "its local CPUs " + d.PCI.LocalCPUs.V.String()
	}
	return diagnose.Finding{Severity: diagnose.Skip, Target: d.Name,
		Observed: fmt.Sprintf("%d of the %d IRQs of %s cannot be classified", d.Unclassified, len(d.IRQs), d.Name),
		Expected: "IRQ names in a form that tells completion vectors from control vectors",
		Evidence: fmt.Sprintf("%d IRQ(s) keyed to %s (%s) in /proc/interrupts have names in no naming form rdma_doctor knows%s: "+
			"the device has IRQs, but which are completion vectors is unknown, so their placement is not judged and "+
			"rdma_device_irqs, rdma_device_irq_cpus and rdma_device_irqs_off_node are left out (not 0)",
			d.Unclassified, d.Name, d.PCI.Address, example),
		Remedy: fmt.Sprintf("look at the names (grep %s /proc/interrupts) and check their smp_affinity_list by hand against %s; "+
			"report the driver, kernel and those lines so the naming can be recognised", d.PCI.Address, local)}
}

func affinityUnknown(d *irq.Device) diagnose.Finding {
	why := "the affinity of a completion IRQ cannot be read (/proc/irq/N is hidden, e.g. in a container without the host's /proc)"
	switch {
	case d.Incomplete:
		why = "a line of /proc/interrupts that belongs to " + d.Name + " was torn or unexpected: its IRQ list is incomplete, so no count over it is judged"
	case !d.PCI.LocalCPUs.OK:
		why = "local_cpulist of " + d.PCI.Address + " cannot be read"
	}
	return diagnose.Finding{Severity: diagnose.Skip, Target: d.Name, Evidence: why}
}

func checkIRQLocal(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	devs, out := irqDevices(s)
	for _, d := range devs {
		comp := d.Completion()
		n, ok := d.OffNode()
		if !ok {
			out = append(out, affinityUnknown(d))
			continue
		}
		local := d.PCI.LocalCPUs.V
		f := diagnose.Finding{Target: d.Name, Expected: "every completion IRQ within local_cpulist " + local.String(),
			Evidence: fmt.Sprintf("%d completion IRQ(s) in /proc/interrupts, /proc/irq/N/smp_affinity_list", len(comp)), Severity: diagnose.Pass}
		if d.PCI.NUMANode.OK {
			f.Expected += " (node " + strconv.Itoa(d.PCI.NUMANode.V) + ")"
		}
		if n == 0 {
			f.Observed = fmt.Sprintf("all %d completion IRQs local", len(comp))
		} else {
			var off []*irq.DeviceIRQ
			for _, q := range comp {
				if o, _ := d.IRQOffNode(q); o {
					off = append(off, q)
				}
			}
			f.Severity = diagnose.Warn
			f.Observed = fmt.Sprintf("%d of %d completion IRQs allowed off the device's node", n, len(comp))
			f.Evidence = irqList(off, 4)
			f.Remedy, f.Action = irqRemedy(d), "irq-affinity"
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no RDMA device sits on a PCI function"), nil
	}
	return out, nil
}

func checkIRQSpread(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	devs, out := irqDevices(s)
	for _, d := range devs {
		comp := d.Completion()
		used, ok := d.CPUsUsed()
		if !ok {
			out = append(out, affinityUnknown(d))
			continue
		}
		f := diagnose.Finding{Target: d.Name, Observed: fmt.Sprintf("%d completion IRQ(s) on %d CPU(s): %s", len(comp), used.Len(), used.String()),
			Expected: "more than one CPU when there is more than one completion IRQ",
			Evidence: "/proc/irq/N/effective_affinity_list (else smp_affinity_list) of each completion IRQ", Severity: diagnose.Pass}
		if len(comp) > 1 && used.Len() == 1 {
			f.Severity = diagnose.Warn
			f.Remedy, f.Action = irqRemedy(d), "irq-affinity"
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no RDMA device sits on a PCI function"), nil
	}
	return out, nil
}

func checkIRQBalance(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	ib := s.Placement().Irqbalance
	if !ib.OK {
		return kit.NoTargets("the process table cannot be read, so whether irqbalance runs is unknown"), nil
	}
	f := diagnose.Finding{Target: "host", Expected: "irqbalance stopped, or not moving the HCA's IRQs off their node",
		Evidence: "/proc/<pid>/comm", Severity: diagnose.Pass}
	if len(ib.V) == 0 {
		f.Observed = "irqbalance not running"
		return []diagnose.Finding{f}, nil
	}
	pids := make([]string, len(ib.V))
	for i, p := range ib.V {
		pids[i] = strconv.Itoa(p)
	}
	f.Observed = "irqbalance running (pid " + strings.Join(pids, ", ") + ")"
	var off []string
	for _, d := range pciDevices(s) {
		if n, ok := d.OffNode(); ok && n > 0 {
			off = append(off, fmt.Sprintf("%s: %d off node", d.Name, n))
		}
	}
	if len(off) > 0 {
		f.Severity = diagnose.Warn
		f.Evidence += "; completion IRQs off their device's node: " + strings.Join(off, ", ")
		f.Remedy = "irqbalance places (or will move back) the HCA's completion IRQs off their NUMA node: ban them " +
			"(IRQBALANCE_BANNED_CPULIST / --banirq in /etc/sysconfig/irqbalance or /etc/default/irqbalance) or " +
			"systemctl disable --now irqbalance, then pin them (action irq-affinity)"
		f.Action = "irq-affinity"
	} else {
		f.Evidence += "; every completion IRQ is on its device's node now. If you pin IRQs by hand, ban them in irqbalance first: it rewrites smp_affinity periodically"
	}
	return []diagnose.Finding{f}, nil
}
