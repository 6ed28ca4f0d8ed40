// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

package build

import "github.com/grafana/grafana-foundation-sdk/go/dashboard"

// fabric shows the subnet manager as each port sees it and the fabric link
// view (iblinkinfo).
func fabric(s selectors) *dashboard.DashboardBuilder {
	legend := "{{instance}} {{device}}/{{port}}"
	return newDashboard(s, "rdma-doctor-fabric", "RDMA / Subnet manager and fabric",
		"Subnet manager presence, state and activity per port; fabric links and degraded links; switch-port errors, down ports, XmitWait hot spots and the counter sweep's health.").
		WithRow(row("Subnet manager")).
		WithPanel(single("Ports without SM", "InfiniBand ports no subnet manager has configured (RdmaPortNoSubnetManager).", "none", 1,
			query(`count(rdma_sm_port_has_sm{`+s.port+`} == 0) or vector(0)`, "ports"))).
		WithPanel(single("SMs not MASTER", "Ports whose SM is not MASTER (RdmaSubnetManagerNotMaster).", "none", 1,
			query(`count(rdma_sm_state{`+s.port+`} != 3) or vector(0)`, "ports"))).
		WithPanel(timeline("SM present", "1: an SM configured the port (ACTIVE with a non-zero SM LID).", okFail,
			query(`rdma_sm_port_has_sm{`+s.port+`}`, legend))).
		WithPanel(timeline("SM state", "State of the SM the port reaches (sminfo).", smStates,
			query(`rdma_sm_state{`+s.port+`}`, legend))).
		WithPanel(graph("SM activity count", "Rises with every sweep of a MASTER SM; a flat line is a hung SM.", "none",
			query(`rdma_sm_activity_count{`+s.port+`}`, legend))).
		WithPanel(graph("SM priority", "Priority of the SM the port reaches (0-15, highest wins).", "none",
			query(`rdma_sm_priority{`+s.port+`}`, legend))).
		WithPanel(tableOf("SM LID and SL", "The SM's LID and service level as each port sees them.", 12,
			instant(`rdma_port_sm_lid{`+s.port+`}`),
			instant(`rdma_port_sm_sl{`+s.port+`}`),
			instant(`rdma_port_lid{`+s.port+`}`))).
		// The fabric collector is opt-in (--collector.fabric, on the SM
		// host or one with umad access): its rows are collapsed.
		WithRow(optIn("Fabric links (opt-in: --collector.fabric)")).
		WithPanel(single("Degraded fabric links", "Fabric links running below what both ends support (iblinkinfo \"Could be\").", "none", 1,
			query(`max(rdma_fabric_links_degraded{`+s.host+`}) or vector(0)`, "links"))).
		WithPanel(graph("Degraded fabric links", "Links below what both ends support, as seen from each host.", "none",
			query(`rdma_fabric_links_degraded{`+s.host+`}`, "{{instance}}")).Span(24)).
		WithPanel(tableOf("Fabric links", "Every rdma_fabric_link_* series: both ends, width, speed and the \"Could be\" hint.", 24,
			instant(`{__name__=~"rdma_fabric_link_.+", `+s.host+`}`))).
		WithRow(optIn("Fabric ports: the switch-port counter sweep (opt-in: --collector.fabric)")).
		WithPanel(single("Switch ports down", "Switch ports DOWN that were ACTIVE in the last day (RdmaFabricPortDown).", "none", 1,
			query(`count(rdma_fabric_port_state{`+s.host+`} == 1 and max_over_time(rdma_fabric_port_state{`+s.host+`}[1d]) >= 4) or vector(0)`, "ports"))).
		WithPanel(single("Saturated counters", "Switch-port counters pinned at their maximum: their errors are invisible (RdmaFabricPortCounterSaturated).", "none", 1,
			query(`count(rdma_fabric_port_counter_saturated{`+s.host+`} == 1) or vector(0)`, "counters"))).
		WithPanel(single("Ports unknown", "Ports the latest counter sweep could not read: their counters are absent, not clean (RdmaFabricCounterSweepFailing).", "none", 1,
			query(`sum(rdma_fabric_counter_sweep_ports_unknown{`+s.host+`}) or vector(0)`, "ports"))).
		WithPanel(graph("Top switch ports by physical errors", "Symbol errors, link error recovery, link integrity and receive errors per second: the ten worst switch ports (guid/port; rdma_fabric_link_info names the cable's ends).", "cps",
			query(`topk(10, `+s.fabricRecord("physical_errors")+`{`+s.host+`} > 0)`, "{{guid}}/{{port}}"))).
		WithPanel(graph("XmitWait hot spots", "Share of the link rate lost waiting for credits (XmitWait × 8 bytes): the ten most congested switch ports, usually uplinks (RdmaFabricPortTransmitWait).", "percentunit",
			query(`topk(10, instance_guid_port:rdma_fabric_port_transmit_wait:ratio_`+s.rate+`{`+s.host+`} > 0)`, "{{guid}}/{{port}}"))).
		WithPanel(graph("Top switch ports by traffic", "Transmitted plus received bits per second: the ten busiest switch ports.", "bps",
			query(`topk(10, 8 * (`+s.fabricRecord("transmit_bytes")+`{`+s.host+`} + `+s.fabricRecord("receive_bytes")+`{`+s.host+`}))`, "{{guid}}/{{port}}"))).
		WithPanel(graph("Counter sweep health", "Duration of the latest sweep; ports it covered and left unknown.", "none",
			query(`rdma_fabric_counter_sweep_duration_seconds{`+s.host+`}`, "{{instance}} duration (s)"),
			query(`rdma_fabric_counter_sweep_ports{`+s.host+`}`, "{{instance}} ports"),
			query(`rdma_fabric_counter_sweep_ports_unknown{`+s.host+`}`, "{{instance}} unknown"))).
		WithPanel(graph("Counter sweep failures", "Failed perfquery runs per second by reason (timeout, mad_failed, unparsable, output_too_large, start_failed) and skipped sweeps.", "none",
			query(`rate(rdma_fabric_counter_sweep_failures_total{`+s.host+`}[`+s.cfg.RateWindow.String()+`]) > 0`, "{{instance}} {{reason}}"),
			query(`increase(rdma_fabric_counter_sweep_skipped_total{`+s.host+`}[1h]) > 0`, "{{instance}} skipped in 1h"))).
		WithPanel(tableOf("Switch ports down or unknown", "Switch ports DOWN now (1) with their physical state, and ports the latest sweep left unknown.", 24,
			instant(`rdma_fabric_port_state{`+s.host+`} == 1`),
			instant(`rdma_fabric_port_counters_unknown{`+s.host+`} == 1`)))
}

// fabricRecord names a per-switch-port recording rule of alerts/:
// instance_guid_port:rdma_fabric_port_NAME:rate5m.
func (s selectors) fabricRecord(name string) string {
	return "instance_guid_port:rdma_fabric_port_" + name + ":" + s.rate
}
