// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kmsg

// Severity of a kernel event: the severity label of
// rdma_kernel_events_total and how diagnose's kernel.events judges it.
type Severity string

// Severities.
const (
	// Fatal: the device or its firmware stopped working (a health
	// failure, a command that never completes); RDMA traffic over it is
	// dead until a reset.
	Fatal Severity = "fatal"
	// Warning: a fault the device may survive or that degrades it
	// (temperature, power, a transmit queue stall, a pulled module).
	Warning Severity = "warning"
	// Info: worth counting, not a fault by itself (a link going down,
	// a corrected PCIe error).
	Info Severity = "info"
)

// Event is one kind of kernel message that means trouble for an RDMA
// device, whatever the driver: the event label. Rules say which messages
// of which driver family mean it.
type Event struct {
	// Name is the event label value: lower case, stable.
	Name     string
	Severity Severity
	// RDMAOnly events count only when the message names an RDMA
	// device's PCI function: a PCIe error of a GPU or a disk is not
	// ours to report.
	RDMAOnly bool
	// Meaning and Remedy go into /diagnose and docs/runbook.md. Remedy
	// names no vendor tool; Remedies holds the driver families' own
	// (RemedyFor picks).
	Meaning, Remedy string
	Remedies        map[Family]string
}

// Family is a driver family: the drivers of one vendor's devices that
// share tools and remedies. A bounded set, kept with each count.
type Family string

// Families of the rules.
const (
	FamilyMLX5  Family = "mlx5"  // NVIDIA ConnectX-4 and later: mlx5_core, mlx5_ib
	FamilyMLX4  Family = "mlx4"  // ConnectX-3: mlx4_core, mlx4_ib
	FamilyBNXT  Family = "bnxt"  // Broadcom NetXtreme-C/E: bnxt_en, bnxt_re
	FamilyIntel Family = "intel" // Intel E810: ice, irdma
	FamilyHNS   Family = "hns"   // HiSilicon: hns3, hns_roce
	FamilyCXGB4 Family = "cxgb4" // Chelsio T5/T6: cxgb4, iw_cxgb4
	FamilyEFA   Family = "efa"   // AWS Elastic Fabric Adapter
	FamilyPCIe  Family = "pcie"  // the PCIe core (AER), any device
)

// Rule is one driver family's message that means an Event. A record
// matches when its first word is one of Drivers (the prefix dev_printk
// puts there; "*" is any driver), it contains Needle, and, where set,
// Pattern matches it. The first rule that matches wins.
//
// Every rule has a recorded real message in testdata/recorded.txt that
// its test matches (testdata/README.md cites where each was found).
type Rule struct {
	// Event is the Name of the event in Events.
	Event string
	// Family is the rule's driver family; empty for a rule whose message
	// the kernel prints the same for every driver (DriverFamilies says
	// each driver's).
	Family  Family
	Drivers []string
	// Needle is a literal every matching message contains: the cheap
	// test that runs before Pattern.
	Needle string
	// Pattern is a regular expression the message must match too;
	// empty when Needle decides. A group named netdev names the
	// subject when the message has no PCI address (the old NETDEV
	// WATCHDOG form).
	Pattern string
}

// DriverFamilies is the family of each driver a rule without a family
// names.
var DriverFamilies = map[string]Family{
	"mlx5_core": FamilyMLX5, "mlx4_core": FamilyMLX4, "bnxt_en": FamilyBNXT,
	"ice": FamilyIntel, "hns3": FamilyHNS, "cxgb4": FamilyCXGB4,
}

// RemedyFor is ev's remedy for a message of family f: the family's own
// where it has one, else the vendor-neutral one.
func RemedyFor(ev Event, f Family) string {
	if r, ok := ev.Remedies[f]; ok {
		return r
	}
	return ev.Remedy
}

// Events is the table of event kinds. Add a kind only for a meaning no
// row has; add a Rule for another driver's message of a known kind.
var Events = []Event{
	{
		Name: "fw_fatal_error", Severity: Fatal,
		Meaning: "The driver read a fatal error from the device's firmware (its health or catastrophic-error buffer): the device stops serving commands and traffic until it is reset.",
		Remedy:  "Keep the kernel log around the message and the driver's dump (devlink health show pci/<pci>, devlink health dump show where the driver has a reporter); if the device does not recover, reload the driver or reboot; replace the card when it recurs.",
		Remedies: map[Family]string{
			FamilyMLX5: "Check devlink health show pci/<pci> reporter fw_fatal and keep its dump (devlink health dump show); if the device does not recover, reset it (mlxfwreset -d <pci> reset) or reboot; replace the card when it recurs.",
			FamilyMLX4: "The driver resets the device itself (module parameter internal_err_reset, default on) and keeps a crash snapshot (devlink region show pci/<pci>, or /proc/driver/mlx4_core/crdump/<pci> with MLNX_OFED): keep it; update the firmware (mstflint) and replace the card when it recurs.",
		},
	},
	{
		Name: "health_compromised", Severity: Fatal,
		Meaning: "The firmware's health counter stopped advancing (the driver's health poller missed it several times in a row): the firmware hangs.",
		Remedy:  "Check the card's temperature and cooling (a hot ASIC stops its firmware), then reset the device or reboot; collect the driver's health dump for the vendor.",
		Remedies: map[Family]string{
			FamilyMLX5: "Check the card's temperature and cooling (a hot ASIC stops its firmware), then reset the device (mlxfwreset -d <pci> reset) or reboot; collect devlink health dump show for the vendor.",
		},
	},
	{
		Name: "health_recovery_failed", Severity: Fatal,
		Meaning: "The driver tried to recover the device from a health failure and gave up: the function stays down until a PCI reset or reboot.",
		Remedy:  "Reboot the host (a PCI slot reset may do); if it recurs reseat or replace the card and check the slot (see the PCIe and AER events of the same function).",
	},
	{
		Name: "device_reset", Severity: Fatal,
		Meaning: "The driver detected an internal error and is resetting the whole device: every queue pair and every RDMA connection over it is torn down.",
		Remedy:  "See the fatal event logged just before it for the cause; if the device does not come back, reload the driver or reboot; replace the card when it recurs.",
		Remedies: map[Family]string{
			FamilyMLX4: "See the Internal error detected lines before it (buf[..] dump) and the crash snapshot (devlink region show pci/<pci>); if the device is not reset successfully, reboot; update the firmware (mstflint) and replace the card when it recurs.",
		},
	},
	{
		Name: "cmd_timeout", Severity: Fatal,
		Meaning: "A firmware command did not complete: the control path to the device is broken (no queue pair, memory region or port state can change) while the link may still show up.",
		Remedy:  "Check the firmware's health and the kernel log around it; reset the device or reboot, and update the firmware when it recurs.",
		Remedies: map[Family]string{
			FamilyMLX5: "Check the firmware's health (devlink health show pci/<pci>) and the kernel log around it; reset the device (mlxfwreset -d <pci> reset) or reboot, and update the firmware when it recurs.",
			FamilyBNXT: "The RoCE function (bnxt_re) lost its firmware channel: reload bnxt_re or reboot; check that the firmware matches the driver (ethtool -i <netdev>, Broadcom's niccli or bnxtnvm to update it); unload bnxt_re where RoCE is not used.",
			FamilyEFA:  "The EFA device's admin queue stopped answering: the instance's EFA is unusable until it is stopped and started again (a reboot may not do); report the instance to AWS support when it recurs.",
		},
	},
	{
		// A command that never completed is cmd_timeout (fatal); one that
		// completed late, or waited for a slot, is this: the control path
		// works, slowly.
		Name: "cmd_degraded", Severity: Warning,
		Meaning: "The device's firmware command interface stalled and recovered: a command completed only after the driver's timeout (the driver found its completion by polling the command event queue: a lost interrupt), or every command slot was busy. Queue pair, memory region and port changes are slow or fail with EAGAIN meanwhile; traffic on existing queue pairs goes on.",
		Remedy:  "Look for lost interrupts (IOMMU interrupt-remapping faults, \"No irq handler for vector\" in a VM) and a flood of commands (an application creating and destroying queue pairs or registering memory in a loop) around the message; update the driver and the firmware when it recurs. A cmd_timeout after it means the control path broke.",
		Remedies: map[Family]string{
			FamilyMLX5: "Look for lost interrupts (DMAR or AMD-Vi interrupt-remapping faults, \"No irq handler for vector\" in a VM with an SR-IOV VF) and a flood of commands (an application creating queue pairs or registering memory in a loop) around the message; check devlink health show pci/<pci>; update the driver and the firmware when it recurs. A cmd_timeout (\"Will cause a leak\") after it means the control path broke.",
		},
	},
	{
		Name: "access_reg_failed", Severity: Warning,
		Meaning: "A register access the driver made for a reader (counters, module or link data) was refused by the firmware: typical of functions the firmware restricts (internal ConnectX-7 ports of DGX/HGX systems), which flood the log on every read.",
		Remedy:  "Find which RDMA device sits on that PCI function and stop reading it: --collector.infiniband.device-exclude for rdma_doctor, and the same for node_exporter or other agents that read its counters.",
	},
	{
		Name: "pcie_power_insufficient", Severity: Warning,
		Meaning: "The card reports that the slot advertises less power than it needs; it may throttle its links.",
		Remedy:  "Check the slot's power limit (lspci -vvv: SlotPowerLimit) and the server vendor's slot and riser specification; move the card to a slot that powers it or update the BIOS/BMC.",
	},
	{
		Name: "asic_high_temperature", Severity: Warning,
		Meaning: "The device's own (ASIC) temperature sensors crossed their warning threshold: the firmware stops the device if it keeps heating (a firmware health failure follows, as in the recorded case 80 s later).",
		Remedy:  "Check the server's fans and airflow over the card now (the card's hwmon temperature in /sys/class/infiniband/<device>/device/hwmon, the BMC's sensors); move load off the host until it cools.",
	},
	{
		Name: "module_high_temperature", Severity: Warning,
		Meaning: "The transceiver or cable module reports a high temperature alarm; the firmware may shut the port down to protect the optics.",
		Remedy:  "Check airflow and fan speeds around the cage (ethtool -m <netdev> shows the module temperature); replace the module or move it to a cooler cage.",
		Remedies: map[Family]string{
			FamilyMLX5: "Check airflow and fan speeds around the cage (mlxlink -d <pci> -m shows the module temperature); replace the module or move it to a cooler cage.",
		},
	},
	{
		Name: "module_unplugged", Severity: Warning,
		Meaning: "The port's module or cable was removed (or is no longer detected): the link is down.",
		Remedy:  "Reseat the cable or transceiver; if it is seated, replace it (ethtool -m <netdev> shows what the port detects).",
		Remedies: map[Family]string{
			FamilyMLX5: "Reseat the cable or transceiver; if it is seated, replace it (mlxlink -d <pci> -m shows what the port detects).",
		},
	},
	{
		Name: "netdev_watchdog", Severity: Warning,
		Meaning: "A transmit queue of the device's netdev made no progress for the watchdog's timeout; the driver resets the queue or the device.",
		Remedy:  "Check the netdev's counters (ethtool -S <netdev>) and the driver's messages after it; repeated timeouts with soft lockups mean a wedged driver: reload it or reboot.",
		Remedies: map[Family]string{
			FamilyMLX5: "Check the tx_timeout and health counters (ethtool -S <netdev>, devlink health show pci/<pci> reporter tx); repeated timeouts with soft lockups mean a wedged driver: reload it or reboot.",
		},
	},
	{
		Name: "tx_timeout", Severity: Warning,
		Meaning: "The driver's own transmit timeout handler ran after a watchdog timeout and is recovering the queue (bnxt_en resets the whole function).",
		Remedy:  "As for netdev_watchdog: check the queue's counters (ethtool -S <netdev>); reboot if the queue does not recover.",
		Remedies: map[Family]string{
			FamilyMLX5: "As for netdev_watchdog: check devlink health show pci/<pci> reporter tx and the queue's counters; reboot if the queue does not recover.",
		},
	},
	{
		Name: "link_down", Severity: Info,
		Meaning: "The Ethernet (RoCE or iWARP) link of the device's netdev went down.",
		Remedy:  "Check the cable, the module and the switch port (port.flap and port.drop judge how often and how long).",
	},
	{
		Name: "pcie_aer_fatal", Severity: Fatal, RDMAOnly: true,
		Meaning: "The RDMA device's PCI function reported an uncorrectable fatal PCIe error (AER): the link to the card is reset or lost.",
		Remedy:  "Reseat the card and check the slot and riser; an error that recurs on the same slot with different cards is the slot's. lspci -vvv -s <pci> shows the AER status bits.",
	},
	{
		Name: "pcie_aer_nonfatal", Severity: Warning, RDMAOnly: true,
		Meaning: "The RDMA device's PCI function reported an uncorrectable non-fatal PCIe error (AER): a transaction was lost.",
		Remedy:  "Check the slot, riser and card seating; update the firmware and BIOS; see lspci -vvv -s <pci> for the error bits.",
	},
	{
		Name: "pcie_aer_corrected", Severity: Info, RDMAOnly: true,
		Meaning: "The RDMA device's PCI function reported a corrected PCIe error (AER): retried and recovered, but many of them mean a marginal link.",
		Remedy:  "A steady stream of them: reseat the card, check the PCIe link speed and width (pci.link) and the slot.",
	},
}

// watchdog68 is the NETDEV WATCHDOG line of Linux 6.8 and later, printed
// with netdev_crit: "<driver> <pci> <netdev>: NETDEV WATCHDOG: CPU: N:
// transmit queue N timed out N ms" (net/sched/sch_generic.c).
const watchdog68 = `: NETDEV WATCHDOG: CPU: \d+: transmit queue \d+ timed out`

// Rules map each driver family's messages to Events, the data of this
// package. Add a row only with a recorded real message in
// testdata/recorded.txt and its source in testdata/README.md. Rules are
// tried by the message's first word, so a line of another driver costs a
// map lookup and the needles of the any-driver rules.
var Rules = []Rule{
	// NVIDIA ConnectX-4 and later (mlx5_core: drivers/net/ethernet/mellanox/mlx5/core).
	{Event: "fw_fatal_error", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "Fatal error", Pattern: `poll_health:\d+:\(pid \d+\): Fatal error \d+ detected`},
	{Event: "health_compromised", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "health compromised - reached miss count"},
	{Event: "health_recovery_failed", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "health recovery flow aborted"},
	{Event: "cmd_timeout", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "timeout. Will cause a leak of a command resource"},
	// cmd.c wait_func_handle_exec_timeout() after mlx5_cmd_eq_recover()
	// (eq.c) found the lost completion; cmd_work_handler() with no free
	// command slot.
	{Event: "cmd_degraded", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "EQEs on cmd_eq", Pattern: `Recovered \d+ EQEs on cmd_eq`},
	{Event: "cmd_degraded", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "recovered after timeout", Pattern: `\(0x[0-9a-f]+\) recovered after timeout$`},
	{Event: "cmd_degraded", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "failed to allocate command entry", Pattern: `cmd_work_handler:\d+:\(pid \d+\): failed to allocate command entry$`},
	{Event: "access_reg_failed", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "ACCESS_REG(0x805)", Pattern: `ACCESS_REG\(0x805\) op_mod\(0x[0-9a-f]+\) failed`},
	{Event: "pcie_power_insufficient", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "Detected insufficient power on the PCIe slot"},
	// events.c temp_warn(): "%llx %llx" until 6.14, "%#llx %#llx." since.
	{Event: "asic_high_temperature", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "High temperature on sensors with bit set"},
	{Event: "module_high_temperature", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "High Temperature", Pattern: `Port module event\[error\]: module \d+, Cable error, High Temperature`},
	{Event: "module_unplugged", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "Cable unplugged", Pattern: `Port module event: module \d+, Cable unplugged`},
	{Event: "netdev_watchdog", Family: FamilyMLX5, Drivers: []string{"NETDEV"},
		Needle: "NETDEV WATCHDOG", Pattern: `^NETDEV WATCHDOG: (?P<netdev>\S+) \(mlx5_core\): transmit queue \d+ timed out`},
	{Event: "tx_timeout", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: "TX timeout detected"},
	{Event: "link_down", Family: FamilyMLX5, Drivers: []string{"mlx5_core"},
		Needle: ": Link down", Pattern: `: Link down$`},

	// ConnectX-3 (mlx4_core: drivers/net/ethernet/mellanox/mlx4/catas.c).
	{Event: "fw_fatal_error", Family: FamilyMLX4, Drivers: []string{"mlx4_core"},
		Needle: "Internal error detected"},
	{Event: "device_reset", Family: FamilyMLX4, Drivers: []string{"mlx4_core"},
		Needle: "device is going to be reset"},

	// Broadcom NetXtreme-C/E (bnxt_en, and bnxt_re's QPLIB messages,
	// which it prints on the bnxt_en PCI function).
	{Event: "netdev_watchdog", Family: FamilyBNXT, Drivers: []string{"NETDEV"},
		Needle: "NETDEV WATCHDOG", Pattern: `^NETDEV WATCHDOG: (?P<netdev>\S+) \(bnxt_en\): transmit queue \d+ timed out`},
	{Event: "tx_timeout", Family: FamilyBNXT, Drivers: []string{"bnxt_en"},
		Needle: "TX timeout detected"},
	{Event: "cmd_timeout", Family: FamilyBNXT, Drivers: []string{"bnxt_en"},
		Needle: "QPLIB: cmdq[", Pattern: `QPLIB: cmdq\[0x[0-9a-f]+\]=0x[0-9a-f]+ timedout`},

	// Linux 6.8 and later: the watchdog's own line, under the netdev's
	// driver, the same for every driver (recorded on ice).
	{Event: "netdev_watchdog", Drivers: []string{"mlx5_core", "mlx4_core", "bnxt_en", "ice", "hns3", "cxgb4"},
		Needle: "NETDEV WATCHDOG", Pattern: watchdog68},

	// HiSilicon (hns3: drivers/net/ethernet/hisilicon/hns3, netdev_info "link down").
	{Event: "link_down", Family: FamilyHNS, Drivers: []string{"hns3"},
		Needle: ": link down", Pattern: `: link down$`},

	// Chelsio T5/T6 (cxgb4: t4_hw.c "Port %d link down, reason: %s").
	{Event: "link_down", Family: FamilyCXGB4, Drivers: []string{"cxgb4"},
		Needle: "link down, reason:", Pattern: `: Port \d+ link down, reason: `},

	// The PCIe core's AER report, printed under the device's own driver
	// or pcieport: any first word.
	{Event: "pcie_aer_fatal", Family: FamilyPCIe, Drivers: []string{"*"},
		Needle: "PCIe Bus Error: severity=", Pattern: `PCIe Bus Error: severity=Uncorrect\w* \(Fatal\)`},
	{Event: "pcie_aer_nonfatal", Family: FamilyPCIe, Drivers: []string{"*"},
		Needle: "PCIe Bus Error: severity=", Pattern: `PCIe Bus Error: severity=Uncorrect\w* \(Non-Fatal\)`},
	{Event: "pcie_aer_corrected", Family: FamilyPCIe, Drivers: []string{"*"},
		Needle: "PCIe Bus Error: severity=", Pattern: `PCIe Bus Error: severity=Correct`},
}

// EventIndex is the index of the event named name in Events, or -1.
func EventIndex(name string) int {
	for i := range Events {
		if Events[i].Name == name {
			return i
		}
	}
	return -1
}
