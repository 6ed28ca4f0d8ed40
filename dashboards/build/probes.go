// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

package build

import (
	"strconv"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// probes shows the scheduled verbs probe against the guide's criteria:
// bandwidth at least 90 % of the port rate, latency under 2 µs in loopback
// and 5 µs through a switch.
func probes(s selectors) *dashboard.DashboardBuilder {
	legend := "{{instance}} → {{peer}} {{test}} {{memory}}"
	r := s.cfg.Thresholds.ProbeBandwidthRatio
	ratio := strconv.FormatFloat(r, 'g', -1, 64)
	pct := strconv.FormatFloat(r*100, 'g', 4, 64) + " %"
	return newDashboard(s, "rdma-doctor-probes", "RDMA / Probes",
		"The scheduled perftest probe: success, bandwidth against the port rate, latency against the guide's limits.").
		WithRow(optIn("Results (opt-in: probe: in the config file)")).
		WithPanel(single("Failing probes", "Probes whose last run failed (RdmaProbeFailing).", "none", 1,
			query(`count(rdma_probe_success{`+s.host+`} == 0) or vector(0)`, "failing"))).
		WithPanel(single("Below "+pct+" of port rate", "Probes whose bandwidth is below "+pct+" of the port rate (RdmaProbeBandwidthLow).", "none", 1,
			query(`count(rdma_probe_bandwidth_ratio{`+s.host+`} < `+ratio+`) or vector(0)`, "low"))).
		WithPanel(single("Oldest result", "Age of the oldest probe result: the scheduler should keep it below a few intervals.", "s", 0,
			query(`max(time() - rdma_probe_last_run_timestamp_seconds{`+s.host+`})`, "age"))).
		WithPanel(timeline("Probe success", "1 ok, 0 failed; the last run of each probe.", okFail,
			query(`rdma_probe_success{`+s.host+`}`, legend))).
		WithPanel(graph("Bandwidth ratio", "Measured bandwidth divided by the port rate; the guide asks for 0.9 or more.", "percentunit",
			query(`rdma_probe_bandwidth_ratio{`+s.host+`}`, legend))).
		WithPanel(graph("Bandwidth", "Measured bandwidth per statistic (peak, average), in bits per second like the port rate.", units.BitsPerSecondSI,
			query(`8 * rdma_probe_bandwidth_bytes_per_second{`+s.host+`}`, legend+" {{stat}}"))).
		WithPanel(graph("Latency", "Measured latency per statistic; the guide's limits are 2 µs in loopback and 5 µs through a switch.", "s",
			query(`rdma_probe_latency_seconds{`+s.host+`}`, legend+" {{stat}}")))
}
