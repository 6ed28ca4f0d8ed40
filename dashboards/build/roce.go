// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

package build

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// roceLossless adds the host dashboard's RoCE lossless row: PFC pause per
// priority (ethtool and DCB), ECN marks and CNPs (the mlx5 hw_counters and
// the optional counters of RDMA netlink), which optional counters are on,
// and the lossless settings with the hosts that differ from the fleet.
// Most of it exists on live RoCE hosts only (DCB and RDMA netlink are not
// asked on a fixture tree).
func roceLossless(s selectors, d *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	const ri = `[$__rate_interval]`
	prioLegend := "{{instance}} {{netdev}} {{direction}} prio {{priority}}"
	return d.
		WithRow(row("RoCE lossless: PFC, ECN, CNPs")).
		WithPanel(graph("PFC pause per priority (ethtool)", "PFC pause frames per second and priority (rdma_netdev_priority_stat_total, mlx5's rx/tx_prioN_pause; negative: sent). A steady stream on one priority is a pause storm (RdmaRocePfcPauseStorm); any on a priority without PFC is a mismatch (RdmaRocePauseOnNonPfcPriority).", units.PacketsPerSecond,
			query(`rate(rdma_netdev_priority_stat_total{`+s.host+`, direction="rx", stat="pause"}`+ri+`)`, prioLegend),
			query(`-rate(rdma_netdev_priority_stat_total{`+s.host+`, direction="tx", stat="pause"}`+ri+`)`, prioLegend))).
		WithPanel(graph("PFC frames per priority (DCB)", "PFC frames per second and priority from DCB netlink (requests sent, indications received; negative: sent): the same pauses as the driver's IEEE PFC counters report them.", units.PacketsPerSecond,
			query(`rate(rdma_roce_pfc_frames_total{`+s.host+`, direction="rx"}`+ri+`)`, prioLegend),
			query(`-rate(rdma_roce_pfc_frames_total{`+s.host+`, direction="tx"}`+ri+`)`, prioLegend))).
		WithPanel(graph("ECN marks and CNPs", "ECN-marked RoCE packets received and CNPs sent by the notification point, CNPs handled by the reaction point, per second (mlx5 hw_counters): congestion that DCQCN answers before PFC has to.", "ops",
			query(`rate(rdma_port_hw_counter_total{`+s.port+`, counter=~"np_ecn_marked_roce_packets|np_cnp_sent|rp_cnp_handled"}`+ri+`)`, "{{instance}} {{device}}/{{port}} {{counter}}"))).
		WithPanel(graph("Optional counters", "Every enabled optional counter per second (rdma_port_optional_counter_total from RDMA netlink: mlx5's cc_rx_ce_pkts, cc_rx_cnp_pkts, cc_tx_cnp_pkts, ...); enable them with tuning.optional_counters and `rdma_doctor remediate --only rdma-optional-counters`.", "ops",
			query(`rate(rdma_port_optional_counter_total{`+s.port+`}`+ri+`)`, "{{instance}} {{device}}/{{port}} {{counter}}"))).
		WithPanel(tableOf("Optional counters enabled", "Each optional counter a port supports: 1 on, 0 off (RDMA_NLDEV_CMD_STAT_GET_STATUS). The kernel forgets them at reboot.", 12,
			instant(`rdma_optional_counter_enabled{`+s.port+`}`))).
		WithPanel(tableOf("Lossless settings", "Per RoCE netdev: priorities with PFC on, trust dscp, global pause (should be off with PFC), ECN per point and priority (MLNX_OFED/DOCA sysfs).", 12,
			instant(`rdma_roce_pfc_enabled{`+s.host+`} == 1`),
			instant(`rdma_roce_trust_dscp{`+s.host+`}`),
			instant(`rdma_roce_global_pause_enabled{`+s.host+`}`),
			instant(`rdma_roce_ecn_enabled{`+s.host+`} == 1`))).
		WithPanel(tableOf("Settings unlike the fleet", "Lossless settings that differ from the majority of the job's RoCE netdevs (the majority recording rules of RdmaRoceLosslessDrift).", 24,
			instant(`rdma_roce_pfc_enabled{`+s.host+`} != on (`+s.cfg.ClusterLabel+`, job, priority) group_left () job_priority:rdma_roce_pfc_enabled:majority`),
			instant(`rdma_roce_ecn_enabled{`+s.host+`} != on (`+s.cfg.ClusterLabel+`, job, point, priority) group_left () job_point_priority:rdma_roce_ecn_enabled:majority`),
			instant(`rdma_roce_trust_dscp{`+s.host+`} != on (`+s.cfg.ClusterLabel+`, job) group_left () job:rdma_roce_trust_dscp:majority`),
			instant(`rdma_roce_global_pause_enabled{`+s.host+`} != on (`+s.cfg.ClusterLabel+`, job, direction) group_left () job_direction:rdma_roce_global_pause_enabled:majority`)))
}
