// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

package build

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// fleet is the overview an operator opens first: how many hosts and ports,
// which links are degraded, where errors and retransmits concentrate, which
// firmware runs where.
func fleet(s selectors) *dashboard.DashboardBuilder {
	return newDashboard(s, "rdma-doctor-fleet", "RDMA / Fleet overview",
		"Every rdma_doctor host: ports by state, degraded links, error hot spots, firmware versions.").
		WithRow(row("Summary")).
		WithPanel(single("Hosts", "Hosts whose rdma_doctor reports at least one RDMA device.", "none", 0,
			query(`count(count by (instance) (rdma_device_info{`+s.host+`}))`, "hosts"))).
		WithPanel(single("Exporters down", "Scrape targets of the job that do not answer (RdmaDoctorDown).", "none", 1,
			query(`count(up{`+s.host+`} == 0) or vector(0)`, "down"))).
		WithPanel(single("Ports not ACTIVE", "Ports in state DOWN, INIT or ARMED (unused ports included).", "none", 1,
			query(`count(rdma_port_state{`+s.port+`} < 4) or vector(0)`, "not active"))).
		WithPanel(single("Degraded links", "Ports running below their expected rate (RdmaPortLinkDegraded).", "none", 1,
			query(`sum(rdma_port_link_degraded{`+s.port+`}) or vector(0)`, "degraded"))).
		WithPanel(single("Saturated counters", "PMA counters pinned at their maximum: they no longer count.", "none", 1,
			query(`sum(rdma_port_counter_saturated{`+s.port+`}) or vector(0)`, "saturated"))).
		WithPanel(single("Firing alerts", "rdma_doctor alerts firing now.", "none", 1,
			query(`count(ALERTS{alertstate="firing", alertname=~"Rdma.+"}) or vector(0)`, "alerts"))).
		WithRow(row("Ports and links")).
		WithPanel(tableOf("Ports by state", "Number of ports per state (4 ACTIVE) and link layer.", 8,
			instant(`count_values by (link_layer) ("state", rdma_port_state{`+s.port+`} * on (job, instance, device, port) group_left (link_layer) rdma_port_info{`+s.port+`})`))).
		WithPanel(tableOf("Degraded links", "Ports below their expected rate, with the active and the expected rate in bits per second.", 16,
			instant(`8 * rdma_port_rate_bytes_per_second{`+s.port+`} and on (job, instance, device, port) (rdma_port_link_degraded{`+s.port+`} == 1)`),
			instant(`8 * rdma_port_expected_rate_bytes_per_second{`+s.port+`} and on (job, instance, device, port) (rdma_port_link_degraded{`+s.port+`} == 1)`)).
			Unit(units.BitsPerSecondSI)).
		WithPanel(graph("Fastest active rate per board", "The fastest ACTIVE port of each board (PSID) and link layer in the fleet: what RdmaPortRateBelowFleet compares with.", units.BitsPerSecondSI,
			query(`8 * board_id_link_layer:rdma_port_active_rate_bytes_per_second:max{`+s.job+`}`, "{{board_id}} {{link_layer}}"))).
		WithPanel(graph("Fleet traffic", "Bits per second received and transmitted by all selected ports.", units.BitsPerSecondSI,
			query(`8 * sum(`+s.record("receive_bytes")+`{`+s.port+`})`, "received"),
			query(`8 * sum(`+s.record("transmit_bytes")+`{`+s.port+`})`, "transmitted"))).
		WithPanel(graph("Top 10 ports by throughput", "The ten busiest ports, received plus transmitted bits per second: where the traffic of a job goes.", units.BitsPerSecondSI,
			query(`topk(10, 8 * (`+s.record("receive_bytes")+`{`+s.port+`} + `+s.record("transmit_bytes")+`{`+s.port+`}))`, "{{instance}} {{device}}/{{port}}")).
			Span(24)).
		WithRow(row("Error hot spots")).
		WithPanel(tableOf("Physical errors", "Ports with the most symbol errors, link error recoveries, integrity and receive errors per second (5m rate).", 12,
			instant(`topk(20, `+s.record("physical_errors")+`{`+s.port+`} > 0)`))).
		WithPanel(tableOf("Retransmits", "Ports with the most retransmissions per second (5m rate).", 12,
			instant(`topk(20, `+s.record("retransmits")+`{`+s.port+`} > 0)`))).
		WithPanel(tableOf("Link downs in the last day", "Ports whose link went down during the last day.", 12,
			instant(`increase(rdma_port_link_downed_total{`+s.port+`}[1d]) > 0`))).
		WithPanel(tableOf("Failing collectors", "Collectors that met an error in the last scrape; their series are incomplete.", 12,
			instant(`rdma_scrape_collector_success{`+s.host+`} == 0`))).
		WithRow(row("Firmware and versions")).
		WithPanel(tableOf("Firmware versions", "HCAs per model, board and firmware version: more than one version per model is drift (RdmaFirmwareDrift).", 16,
			instant(`count by (hca_type, board_id, fw_ver) (rdma_device_info{`+s.dev+`})`))).
		WithPanel(tableOf("rdma_doctor versions", "Exporter builds running in the fleet.", 8,
			instant(`count by (version, revision) (rdma_doctor_build_info{`+s.host+`})`)))
}
