// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

package build

import "github.com/grafana/grafana-foundation-sdk/go/dashboard"

// diagnose shows the troubleshooting checklist: which checks fail or warn
// where, and since when. The evidence and remedy are on /diagnose.
func diagnose(s selectors) *dashboard.DashboardBuilder {
	return newDashboard(s, "rdma-doctor-diagnose", "RDMA / Diagnose",
		"The diagnose checklist across hosts: failing and warning checks per target. curl HOST:9873/diagnose for evidence and remedies.").
		WithRow(row("Checks")).
		WithPanel(single("Failing", "Checks failing now (RdmaDiagnoseCheckFailing after 15m).", "none", 1,
			query(`count(rdma_diagnose_status{`+s.host+`} == 2) or vector(0)`, "fail"))).
		WithPanel(single("Warning", "Checks warning now.", "none", 1,
			query(`count(rdma_diagnose_status{`+s.host+`} == 1) or vector(0)`, "warn"))).
		WithPanel(single("Passing", "Checks passing now (skipped checks are absent).", "none", 0,
			query(`count(rdma_diagnose_status{`+s.host+`} == 0) or vector(0)`, "pass"))).
		WithPanel(tableOf("Failing checks", "Check, target and host of every failing check.", 12,
			instant(`rdma_diagnose_status{`+s.host+`} == 2`))).
		WithPanel(tableOf("Warning checks", "Check, target and host of every warning.", 12,
			instant(`rdma_diagnose_status{`+s.host+`} == 1`))).
		WithPanel(timeline("Check status", "Worst status of each check on the selected hosts over time.", checkStates,
			query(`max by (instance, check) (rdma_diagnose_status{`+s.host+`})`, "{{instance}} {{check}}"))).
		WithPanel(tableOf("Fleet: hosts failing each check", "How many hosts fail each check: one host or all of them tells a local fault from a fleet-wide one.", 24,
			instant(`count by (check) (count by (check, instance) (rdma_diagnose_status{`+s.host+`} == 2))`)))
}
