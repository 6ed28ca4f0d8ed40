// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

package build

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// host is the per-host detail: per device and port, the link against what
// it should be, traffic, error counters, driver hw_counters, NUMA and IRQ
// placement, tuning and netdevs.
func host(s selectors) *dashboard.DashboardBuilder {
	const ri = `[$__rate_interval]`
	legend := "{{instance}} {{device}}/{{port}}"
	ethLegend := "{{instance}} {{netdev}} {{stat}}"
	d := newDashboard(s, "rdma-doctor-host", "RDMA / Host detail",
		"One host (or a few): per device and port, link rate against expected, traffic, errors, hw_counters, NUMA and IRQ placement, tuning.").
		WithRow(row("Devices and ports")).
		WithPanel(tableOf("Devices", "One row per RDMA device: model, board (PSID), firmware.", 24,
			instant(`rdma_device_info{`+s.dev+`}`))).
		WithPanel(tableOf("Ports", "Link layer, netdev, speed and width of each port, and an InfiniBand port's GUID (the fabric's name for this end of its cable).", 24,
			instant(`rdma_port_info{`+s.port+`}`))).
		WithPanel(timeline("Port state", "1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.", portStates,
			query(`rdma_port_state{`+s.port+`}`, legend))).
		WithPanel(timeline("Physical state", "5 LinkUp; 2 Polling means no link partner; 6 LinkErrorRecovery means an unstable link.", physStates,
			query(`rdma_port_physical_state{`+s.port+`}`, legend))).
		WithRow(row("Link rate")).
		WithPanel(graph("Rate vs expected", "Active rate against the expected rate (config or board table), in bits per second; the gap is the guide's FDR case.", units.BitsPerSecondSI,
			query(`8 * rdma_port_rate_bytes_per_second{`+s.port+`}`, "active "+legend),
			query(`8 * rdma_port_expected_rate_bytes_per_second{`+s.port+`}`, "expected "+legend))).
		WithPanel(graph("Link width", "Active lanes (1, 2, 4, 8, 12). 2X alone is no fault: HDR100 and 200G NDR cards run 2X.", "none",
			query(`rdma_port_link_width_lanes{`+s.port+`}`, legend))).
		WithRow(row("Traffic")).
		WithPanel(graph("Data", "Bits per second received (negative: transmitted).", units.BitsPerSecondSI,
			query(`8 * `+s.record("receive_bytes")+`{`+s.port+`}`, "rx "+legend),
			query(`-8 * `+s.record("transmit_bytes")+`{`+s.port+`}`, "tx "+legend))).
		WithPanel(graph("Packets", "Packets per second received (negative: transmitted).", "pps",
			query(`rate(rdma_port_packets_received_total{`+s.port+`}`+ri+`)`, "rx "+legend),
			query(`-rate(rdma_port_packets_transmitted_total{`+s.port+`}`+ri+`)`, "tx "+legend))).
		WithPanel(graph("Utilisation", "The busier direction against the active rate.", "percentunit",
			query("instance_device_port:rdma_port_utilization:ratio_"+s.rate+`{`+s.port+`}`, legend))).
		WithPanel(graph("Multicast", "Multicast packets per second (IPoIB ARP and SA traffic).", "pps",
			query(`rate(rdma_port_multicast_packets_received_total{`+s.port+`}`+ri+`)`, "rx "+legend),
			query(`rate(rdma_port_multicast_packets_transmitted_total{`+s.port+`}`+ri+`)`, "tx "+legend))).
		WithRow(row("Errors")).
		WithPanel(graph("Physical errors", "Symbol errors, link error recovery and link integrity errors per second.", "ops",
			query(`rate(rdma_port_symbol_errors_total{`+s.port+`}`+ri+`)`, "symbol "+legend),
			query(`rate(rdma_port_link_error_recovery_total{`+s.port+`}`+ri+`)`, "recovery "+legend),
			query(`rate(rdma_port_local_link_integrity_errors_total{`+s.port+`}`+ri+`)`, "integrity "+legend),
			query(`rate(rdma_port_excessive_buffer_overrun_errors_total{`+s.port+`}`+ri+`)`, "overrun "+legend))).
		WithPanel(graph("Link downs", "Link down events in each interval.", "none",
			query(`increase(rdma_port_link_downed_total{`+s.port+`}`+ri+`)`, legend))).
		WithPanel(graph("Receive errors", "Malformed packets received, remote physical errors, switch relay and constraint errors per second.", "ops",
			query(`rate(rdma_port_receive_errors_total{`+s.port+`}`+ri+`)`, "rcv "+legend),
			query(`rate(rdma_port_receive_remote_physical_errors_total{`+s.port+`}`+ri+`)`, "remote phys "+legend),
			query(`rate(rdma_port_receive_switch_relay_errors_total{`+s.port+`}`+ri+`)`, "switch relay "+legend),
			query(`rate(rdma_port_receive_constraint_errors_total{`+s.port+`}`+ri+`)`, "rcv constraint "+legend),
			query(`rate(rdma_port_transmit_constraint_errors_total{`+s.port+`}`+ri+`)`, "xmit constraint "+legend))).
		WithPanel(graph("Congestion", "Transmit wait ticks and discards per second.", "ops",
			query(`rate(rdma_port_transmit_wait_total{`+s.port+`}`+ri+`)`, "xmit wait "+legend),
			query(`rate(rdma_port_transmit_discards_total{`+s.port+`}`+ri+`)`, "discards "+legend),
			query(`rate(rdma_port_vl15_dropped_total{`+s.port+`}`+ri+`)`, "VL15 dropped "+legend))).
		WithPanel(tableOf("Saturated counters", "Counters pinned at their maximum: clear them with perfquery -R.", 24,
			instant(`rdma_port_counter_saturated{`+s.port+`} == 1`))).
		WithRow(row("Link health over time: state changes, kernel log, temperatures, devlink")).
		WithPanel(graph("Port state changes", "States entered per interval, from the port sampler (every 1s by default): a flap between two scrapes shows here even when rdma_port_state reads ACTIVE at both (RdmaPortFlapping).", "none",
			query(`increase(rdma_port_state_transitions_total{`+s.port+`}`+ri+`) > 0`, legend+" to {{to}}"))).
		WithPanel(graph("Port time down", "Share of time the port was not ACTIVE after it had been ACTIVE once, from the port sampler.", units.PercentUnit,
			query(`rate(rdma_port_down_seconds_total{`+s.port+`}`+ri+`)`, legend))).
		WithPanel(tableOf("Kernel events", "RDMA driver messages that mean trouble, counted since rdma_doctor started, by device, event and severity (the last message is in /diagnose, kernel.events); device empty: a function that is no RDMA device (RdmaKernelFatalEvent).", 24,
			instant(`rdma_kernel_events_total{`+s.host+`} > 0`))).
		WithPanel(graph("Temperatures", "Adapter sensors (mlx5 hwmon: asic, Module0) and their critical thresholds in °C (RdmaDeviceTemperatureNearCritical fires within 5 °C).", units.Celsius,
			query(`rdma_device_temperature_celsius{`+s.dev+`}`, "{{instance}} {{device}} {{sensor}}"),
			query(`rdma_device_temperature_crit_celsius{`+s.dev+`}`, "crit {{instance}} {{device}} {{sensor}}"))).
		WithPanel(timeline("devlink health reporters", "1 healthy, 0 in error (devlink health show: mlx5 fw, fw_fatal, tx, rx, vnic; RdmaDevlinkHealthReporterError).", okFail,
			query(`rdma_devlink_health_reporter_state{`+s.dev+`}`, "{{instance}} {{device}} {{reporter}}"))).
		WithPanel(tableOf("Firmware running and stored", "devlink dev info per component: a stored version that differs from the running one is burned and not activated (RdmaFirmwarePending, fw.pending).", 24,
			instant(`rdma_device_firmware_version_info{`+s.dev+`}`))).
		// The module series carry the netdev only (the module belongs to
		// the RoCE netdev's port; rdma_port_info maps it to device/port).
		WithRow(optIn("Transceiver modules (RoCE; opt-in: --collector.netdev.module-eeprom)")).
		WithPanel(graph("Module temperature", "Each RoCE port's transceiver temperature from its own memory, against the module's own high warning and high alarm thresholds in °C (RdmaModuleTemperatureNearAlarm fires at the high warning; port.module judges both).", units.Celsius,
			query(`rdma_netdev_module_temperature_celsius{`+s.host+`}`, "{{instance}} {{netdev}}"),
			query(`rdma_netdev_module_temperature_threshold_celsius{`+s.host+`, threshold=~"high_warning|high_alarm"}`, "{{threshold}} {{instance}} {{netdev}}"))).
		WithPanel(graph("Module Rx power per lane", "Received optical power of each media lane, against the module's own low warning and low alarm thresholds (RdmaModuleRxPowerLow fires at the low alarm). Copper cables and AECs have no lane monitors.", units.Watt,
			query(`rdma_netdev_module_rx_power_watts{`+s.host+`}`, "{{instance}} {{netdev}} lane {{lane}}"),
			query(`rdma_netdev_module_rx_power_threshold_watts{`+s.host+`, threshold=~"low_warning|low_alarm"}`, "{{threshold}} {{instance}} {{netdev}}"))).
		WithPanel(tableOf("Modules", "Each RoCE netdev's transceiver: type, memory map, vendor, part number, why it has no monitors; and whether its memory was read (reason permission: no CAP_NET_ADMIN, unsupported, io_error: empty cage).", 24,
			instant(`rdma_netdev_module_info{`+s.host+`}`),
			instant(`rdma_netdev_module_eeprom_readable{`+s.host+`}`))).
		WithRow(row("Driver hw_counters")).
		WithPanel(graph("Retransmits", "Retransmissions per second (out_of_sequence, packet_seq_err, implied_nak_seq_err, local_ack_timeout_err, duplicate_request, roce_adp_retrans*, hfi1 Rc*).", "ops",
			query(s.record("retransmits")+`{`+s.port+`}`, legend))).
		WithPanel(graph("Port hw_counters", "Every port hw_counter that moved, per second.", "ops",
			query(`rate(rdma_port_hw_counter_total{`+s.port+`}`+ri+`) > 0`, legend+" {{counter}}"))).
		WithPanel(graph("RoCE congestion control", "CNPs sent, handled and ignored, ECN-marked packets per second.", "ops",
			query(`rate(rdma_port_hw_counter_total{`+s.port+`, counter=~"np_cnp_sent|np_ecn_marked_roce_packets|rp_cnp_handled|rp_cnp_ignored"}`+ri+`)`, legend+" {{counter}}"))).
		WithPanel(graph("Device hw_counters", "Every device-level hw_counter that moved, per second.", "ops",
			query(`rate(rdma_device_hw_counter_total{`+s.dev+`}`+ri+`) > 0`, "{{instance}} {{device}} {{counter}}"))).
		WithRow(row("RDMA resources (RDMA netlink)")).
		WithPanel(graph("Resources per device", "Objects each RDMA device has allocated now, by type (rdma resource show: pd, cq, qp, cm_id, mr, ctx, srq); a total that only grows is a leak.", "none",
			query(`rdma_device_resources{`+s.dev+`}`, "{{instance}} {{device}} {{resource}}"))).
		// Per-process totals and QP counters are opt-in: their row is
		// collapsed, so a default install shows no empty panels there.
		WithRow(optIn("Per-process resources and QP counters (opt-in: --collector.rdma_netlink.process-resources, .qp-counters)")).
		WithPanel(graph("Objects per process", "Objects by owning process name and type (opt-in --collector.rdma_netlink.process-resources; process other: past --collector.rdma_netlink.max-processes): which job holds the QPs and MRs.", "none",
			query(`rdma_resource_process_objects{`+s.dev+`}`, "{{instance}} {{device}} {{process}} {{type}}"))).
		WithPanel(tableOf("QP counter mode", "Each port's QP counter mode (opt-in --collector.rdma_netlink.qp-counters): none, auto by criteria (type, pid) or manual, and the counters and QPs bound now.", 12,
			instant(`rdma_port_qp_counter_mode{`+s.port+`} == 1`),
			instant(`rdma_port_qp_counters{`+s.port+`}`),
			instant(`rdma_port_qp_counter_qps{`+s.port+`}`))).
		WithPanel(tableOf("Resource dump caps", "1 where a cap was hit: more owning processes than --collector.rdma_netlink.max-processes (summed as other), or a dump cut at --collector.rdma_netlink.max-objects (its counts undercount).", 12,
			instant(`rdma_resource_process_capped{`+s.dev+`} == 1`),
			instant(`rdma_resource_dump_truncated{`+s.dev+`} == 1`),
			instant(`rdma_port_qp_counter_dump_truncated{`+s.port+`} == 1`))).
		WithRow(row("NUMA and IRQs")).
		WithPanel(tableOf("Placement", "NUMA node (-1: the platform does not say), completion IRQs, IRQs allowed off the node, distinct CPUs used, PCIe link degraded.", 24,
			instant(`rdma_device_numa_node{`+s.dev+`}`),
			instant(`rdma_device_irqs{`+s.dev+`}`),
			instant(`rdma_device_irqs_off_node{`+s.dev+`}`),
			instant(`rdma_device_irq_cpus{`+s.dev+`}`),
			instant(`rdma_device_pcie_link_degraded{`+s.dev+`}`))).
		WithPanel(graph("IRQs off node", "Completion IRQs allowed on CPUs outside the device's NUMA node (RdmaIrqsOffNumaNode).", "none",
			query(`rdma_device_irqs_off_node{`+s.dev+`}`, "{{instance}} {{device}}"))).
		WithPanel(graph("IRQ CPUs", "Distinct CPUs the completion IRQs use; 1 means all on one CPU.", "none",
			query(`rdma_device_irq_cpus{`+s.dev+`}`, "{{instance}} {{device}}"))).
		WithRow(row("Ethernet PHY (RoCE): pause, PFC, FEC")).
		WithPanel(graph("Pause frames", "Global (802.3x) pause frames per second, received and sent: the link partner or this port ran out of buffer.", units.PacketsPerSecond,
			query(`rate(rdma_netdev_ethtool_stat_total{`+s.host+`, stat=~"(rx|tx)_pause_ctrl_phy"}`+ri+`)`, ethLegend))).
		// The per-priority statistics are rdma_netdev_priority_stat_total
		// (direction and priority as labels): the PFC frame panels are in
		// the RoCE lossless row (roce.go).
		WithPanel(graph("Time paused per priority", "Share of time each priority was paused (pause_duration counts microseconds).", units.PercentUnit,
			query(`rate(rdma_netdev_priority_stat_total{`+s.host+`, stat="pause_duration"}`+ri+`) / 1e6`, "{{instance}} {{netdev}} {{direction}} prio {{priority}}"))).
		WithPanel(graph("Pre-FEC bit error rate", "Bits the FEC corrected per bit received (rx_corrected_bits_phy / rx_bits_phy): a rising rate is a cable or optic degrading before packets are lost.", units.ScientificNotation,
			query(`rate(rdma_netdev_ethtool_stat_total{`+s.host+`, stat="rx_corrected_bits_phy"}`+ri+`) / ignoring (stat) rate(rdma_netdev_ethtool_stat_total{`+s.host+`, stat="rx_bits_phy"}`+ri+`)`, "{{instance}} {{netdev}}"))).
		WithPanel(graph("PHY errors", "Symbol, PCS, CRC and per-lane errors and link down events per second (uncorrectable by the FEC).", "ops",
			query(`rate(rdma_netdev_ethtool_stat_total{`+s.host+`, stat=~"rx_(pcs_)?symbol_err_phy|rx_crc_errors_phy|rx_err_lane_[0-9]+_phy|link_down_events_phy"}`+ri+`)`, ethLegend))).
		WithPanel(graph("Discards and pause storms", "Packets discarded for lack of buffer and pause storm events per second.", "ops",
			query(`rate(rdma_netdev_ethtool_stat_total{`+s.host+`, stat=~"(rx|tx)_discards_phy|rx_out_of_buffer|rx_buffer_passed_thres_phy|tx_pause_storm_(warning|error)_events"}`+ri+`)`, ethLegend)))
	return withGPUs(roceLossless(s, d).
		WithRow(row("Exporter")).
		WithPanel(graph("Collector duration", "Seconds each collector took in the last scrape: a slow one points at a slow host file or tool (sminfo, iblinkinfo).", units.Seconds,
			query(`rdma_scrape_collector_duration_seconds{`+s.host+`}`, "{{instance}} {{collector}}"))).
		WithPanel(timeline("Collector success", "1 ok, 0 the collector met an error or its deadline (RdmaDoctorCollectorFailing).", okFail,
			query(`rdma_scrape_collector_success{`+s.host+`}`, "{{instance}} {{collector}}"))).
		WithRow(row("Tuning and netdevs")).
		WithPanel(tableOf("Host tuning", "Every rdma_host_* series: hugepages, sysctls, governor, memlock, kernel.", 24,
			instant(`{__name__=~"rdma_host_.+", `+s.host+`}`))).
		WithPanel(tableOf("Netdevs", "Every rdma_netdev_* series: IPoIB and RoCE netdevs, mode, MTU, driver.", 24,
			instant(`{__name__=~"rdma_netdev_.+", `+s.host+`}`))), s)
}
