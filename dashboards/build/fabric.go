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
		"Subnet manager presence, state and activity per port; fabric links and degraded links.").
		WithRow(row("Subnet manager")).
		WithPanel(single("Ports without SM", "InfiniBand ports no subnet manager has configured (RdmaPortNoSubnetManager).", "none", 1,
			query(`count(rdma_sm_port_has_sm{`+s.port+`} == 0) or vector(0)`, "ports"))).
		WithPanel(single("SMs not MASTER", "Ports whose SM is not MASTER (RdmaSubnetManagerNotMaster).", "none", 1,
			query(`count(rdma_sm_state{`+s.port+`} != 3) or vector(0)`, "ports"))).
		WithPanel(single("Degraded fabric links", "Fabric links running below what both ends support (iblinkinfo \"Could be\").", "none", 1,
			query(`max(rdma_fabric_links_degraded{`+s.host+`}) or vector(0)`, "links"))).
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
		WithRow(row("Fabric links")).
		WithPanel(graph("Degraded fabric links", "Links below what both ends support, as seen from each host.", "none",
			query(`rdma_fabric_links_degraded{`+s.host+`}`, "{{instance}}")).Span(24)).
		WithPanel(tableOf("Fabric links", "Every rdma_fabric_link_* series: both ends, width, speed and the \"Could be\" hint.", 24,
			instant(`{__name__=~"rdma_fabric_link_.+", `+s.host+`}`)))
}
