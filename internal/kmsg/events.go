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
// device. A record matches when its first word is one of Drivers (the
// prefix dev_printk puts there; "*" is any driver), it contains Needle,
// and, where set, Pattern matches it. The first event that matches wins.
//
// Every event has a recorded real message in testdata/recorded.txt that
// its test matches (testdata/README.md cites where each was found).
type Event struct {
	// Name is the event label value: lower case, stable.
	Name     string
	Severity Severity
	Drivers  []string
	// Needle is a literal every matching message contains: the cheap
	// test that runs before Pattern.
	Needle string
	// Pattern is a regular expression the message must match too;
	// empty when Needle decides. A group named netdev names the
	// subject when the message has no PCI address (the old NETDEV
	// WATCHDOG form).
	Pattern string
	// RDMAOnly events count only when the message names an RDMA
	// device's PCI function: a PCIe error of a GPU or a disk is not
	// ours to report.
	RDMAOnly bool
	// Meaning and Remedy go into /diagnose and docs/runbook.md.
	Meaning, Remedy string
}

// Events is the matcher table, the data of this package. Add a row only
// with a recorded real message in testdata/recorded.txt and its source in
// testdata/README.md.
var Events = []Event{
	{
		Name: "fw_fatal_error", Severity: Fatal, Drivers: []string{"mlx5_core"},
		Needle: "Fatal error", Pattern: `poll_health:\d+:\(pid \d+\): Fatal error \d+ detected`,
		Meaning: "mlx5's health poller read a fatal error from the firmware's health buffer: the device stops serving commands and traffic until the driver's recovery resets it.",
		Remedy:  "Check devlink health show pci/<pci> reporter fw_fatal and keep its dump (devlink health dump show); if the device does not recover, reset it (mlxfwreset -d <pci> reset) or reboot; replace the card when it recurs.",
	},
	{
		Name: "health_compromised", Severity: Fatal, Drivers: []string{"mlx5_core"},
		Needle:  "health compromised - reached miss count",
		Meaning: "The firmware's health counter stopped advancing (mlx5 poll_health missed it several times in a row): the firmware hangs.",
		Remedy:  "Check the card's temperature and cooling (a hot ASIC stops its firmware), then reset the device (mlxfwreset -d <pci> reset) or reboot; collect devlink health dump show for the vendor.",
	},
	{
		Name: "health_recovery_failed", Severity: Fatal, Drivers: []string{"mlx5_core"},
		Needle:  "health recovery flow aborted",
		Meaning: "mlx5 tried to recover the device from a health failure and gave up: the function stays down until a PCI reset or reboot.",
		Remedy:  "Reboot the host (a PCI slot reset may do); if it recurs reseat or replace the card and check the slot (see the PCIe and AER events of the same function).",
	},
	{
		Name: "cmd_timeout", Severity: Fatal, Drivers: []string{"mlx5_core"},
		Needle:  "timeout. Will cause a leak of a command resource",
		Meaning: "A firmware command did not complete: the driver gives up on it and leaks its slot; the control path to the device is broken while the link may still show up.",
		Remedy:  "Check the firmware's health (devlink health show pci/<pci>) and the kernel log around it; reset the device (mlxfwreset -d <pci> reset) or reboot, and update the firmware when it recurs.",
	},
	{
		Name: "access_reg_failed", Severity: Warning, Drivers: []string{"mlx5_core"},
		Needle: "ACCESS_REG(0x805)", Pattern: `ACCESS_REG\(0x805\) op_mod\(0x[0-9a-f]+\) failed`,
		Meaning: "A register access the driver made for a reader (counters, module or link data) was refused by the firmware: typical of functions the firmware restricts (internal ConnectX-7 ports of DGX/HGX systems), which flood the log on every read.",
		Remedy:  "Find which RDMA device sits on that PCI function and stop reading it: --collector.infiniband.device-exclude for rdma_doctor, and the same for node_exporter or other agents that read its counters.",
	},
	{
		Name: "pcie_power_insufficient", Severity: Warning, Drivers: []string{"mlx5_core"},
		Needle:  "Detected insufficient power on the PCIe slot",
		Meaning: "The card reports that the slot advertises less power than it needs; it may throttle its links.",
		Remedy:  "Check the slot's power limit (lspci -vvv: SlotPowerLimit) and the server vendor's slot and riser specification; move the card to a slot that powers it or update the BIOS/BMC.",
	},
	{
		Name: "module_high_temperature", Severity: Warning, Drivers: []string{"mlx5_core"},
		Needle: "High Temperature", Pattern: `Port module event\[error\]: module \d+, Cable error, High Temperature`,
		Meaning: "The transceiver or cable module reports a high temperature alarm; the firmware may shut the port down to protect the optics.",
		Remedy:  "Check airflow and fan speeds around the cage (mlxlink -d <pci> -m shows the module temperature); replace the module or move it to a cooler cage.",
	},
	{
		Name: "module_unplugged", Severity: Warning, Drivers: []string{"mlx5_core"},
		Needle: "Cable unplugged", Pattern: `Port module event: module \d+, Cable unplugged`,
		Meaning: "The port's module or cable was removed (or is no longer detected): the link is down.",
		Remedy:  "Reseat the cable or transceiver; if it is seated, replace it (mlxlink -d <pci> -m shows what the port detects).",
	},
	{
		Name: "netdev_watchdog", Severity: Warning, Drivers: []string{"mlx5_core", "NETDEV"},
		Needle: "NETDEV WATCHDOG", Pattern: `NETDEV WATCHDOG: (?:(?P<netdev>\S+) \(mlx5_core\): transmit queue \d+ timed out|CPU: \d+: transmit queue \d+ timed out)`,
		Meaning: "A transmit queue of the device's netdev made no progress for the watchdog's timeout; the driver resets the queue (mlx5e_tx_timeout).",
		Remedy:  "Check the tx_timeout and health counters (ethtool -S <netdev>, devlink health show pci/<pci> reporter tx); repeated timeouts with soft lockups mean a wedged driver: reload it or reboot.",
	},
	{
		Name: "tx_timeout", Severity: Warning, Drivers: []string{"mlx5_core"},
		Needle:  "TX timeout detected",
		Meaning: "mlx5's own transmit timeout handler ran after a watchdog timeout and is recovering the queue.",
		Remedy:  "As for netdev_watchdog: check devlink health show pci/<pci> reporter tx and the queue's counters; reboot if the queue does not recover.",
	},
	{
		Name: "link_down", Severity: Info, Drivers: []string{"mlx5_core"},
		Needle: ": Link down", Pattern: `: Link down$`,
		Meaning: "The Ethernet (RoCE) link of the device's netdev went down.",
		Remedy:  "Check the cable, the module and the switch port (port.flap and port.drop judge how often and how long).",
	},
	{
		Name: "pcie_aer_fatal", Severity: Fatal, Drivers: []string{"*"}, RDMAOnly: true,
		Needle: "PCIe Bus Error: severity=", Pattern: `PCIe Bus Error: severity=Uncorrect\w* \(Fatal\)`,
		Meaning: "The RDMA device's PCI function reported an uncorrectable fatal PCIe error (AER): the link to the card is reset or lost.",
		Remedy:  "Reseat the card and check the slot and riser; an error that recurs on the same slot with different cards is the slot's. lspci -vvv -s <pci> shows the AER status bits.",
	},
	{
		Name: "pcie_aer_nonfatal", Severity: Warning, Drivers: []string{"*"}, RDMAOnly: true,
		Needle: "PCIe Bus Error: severity=", Pattern: `PCIe Bus Error: severity=Uncorrect\w* \(Non-Fatal\)`,
		Meaning: "The RDMA device's PCI function reported an uncorrectable non-fatal PCIe error (AER): a transaction was lost.",
		Remedy:  "Check the slot, riser and card seating; update the firmware and BIOS; see lspci -vvv -s <pci> for the error bits.",
	},
	{
		Name: "pcie_aer_corrected", Severity: Info, Drivers: []string{"*"}, RDMAOnly: true,
		Needle: "PCIe Bus Error: severity=", Pattern: `PCIe Bus Error: severity=Correct`,
		Meaning: "The RDMA device's PCI function reported a corrected PCIe error (AER): retried and recovered, but many of them mean a marginal link.",
		Remedy:  "A steady stream of them: reseat the card, check the PCIe link speed and width (pci.link) and the slot.",
	},
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
