// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

package build

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// The texts a panel shows instead of Grafana's bare "No data", saying
// what empty means: clean (a filter for trouble kept nothing) or no data
// (a collector that is off, opt-in, or needs a live host). Unknown is
// never clean, so a text that says clean names the other cause too where
// a filtered panel cannot tell them apart.
const (
	fabricOff  = "No data: the fabric collector is off (--collector.fabric, on the SM host or one with umad access)"
	probeOff   = "No data: no probe scheduled (probe: in the config file)"
	moduleOff  = "No data: opt-in --collector.netdev.module-eeprom, on a live RoCE netdev with a module in its cage"
	ethtoolOff = "No data: ethtool statistics come from a live RoCE netdev (never a fixture tree)"
	dcbOff     = "No data: DCB netlink answers for a live RoCE netdev only"
	devlinkOff = "No data: devlink answers for a live host's RDMA functions only"
	netlinkOff = "No data: RDMA netlink answers for a live host's devices only"
	noGPUs     = "No data: no GPUs on the selected hosts"
)

// noValue is each panel's text by dashboard file and panel title; a title
// ending in * matches titles with that prefix (a title built from the
// mixin config).
var noValue = map[string]map[string]string{
	"fleet.json": {
		"Degraded links":             "No degraded link: every port runs at its expected rate",
		"Physical errors":            "No physical errors: clean (or the recording rules are not loaded)",
		"Retransmits":                "No retransmits: clean (or the recording rules are not loaded)",
		"Link downs in the last day": "No link went down in the last day",
		"Failing collectors":         "Every collector succeeded in the last scrape",
	},
	"host.json": {
		"Saturated counters":               "No saturated counter: every PMA counter still counts",
		"Port state changes":               "No port changed state",
		"Kernel events":                    "No RDMA driver trouble in the kernel log since rdma_doctor started",
		"Temperatures":                     "No data: no adapter temperature sensors (mlx5 hwmon, Linux 6.6+)",
		"devlink health reporters":         devlinkOff,
		"Firmware running and stored":      devlinkOff,
		"Module temperature":               moduleOff,
		"Module Rx power per lane":         moduleOff,
		"Modules":                          moduleOff,
		"Port hw_counters":                 "No hw_counter moved: the drivers counted no retransmits, drops or errors",
		"RoCE congestion control":          "No data: no mlx5 RoCE congestion counters (np_*, rp_*) on these ports",
		"Device hw_counters":               "No device hw_counter moved (mlx5 has them in switchdev mode only)",
		"Resources per device":             netlinkOff,
		"Objects per process":              "No data: opt-in --collector.rdma_netlink.process-resources, live host only",
		"QP counter mode":                  "No data: opt-in --collector.rdma_netlink.qp-counters, live host only",
		"Resource dump caps":               "No cap hit: every resource dump complete (or the opt-in dumps are off)",
		"Pause frames":                     ethtoolOff,
		"Time paused per priority":         ethtoolOff,
		"Pre-FEC bit error rate":           ethtoolOff,
		"PHY errors":                       ethtoolOff,
		"Discards and pause storms":        ethtoolOff,
		"PFC pause per priority (ethtool)": ethtoolOff,
		"PFC frames per priority (DCB)":    dcbOff,
		"ECN marks and CNPs":               "No data: no mlx5 RoCE congestion counters (np_*, rp_*) on these ports",
		"Optional counters":                netlinkOff + " (tuning.optional_counters enables them)",
		"Optional counters enabled":        netlinkOff,
		"Lossless settings":                "No data: no RoCE netdev with PFC or ECN on (DCB netlink: live host only)",
		"Settings unlike the fleet":        "Every RoCE netdev agrees with the fleet's majority",
		"GPU ↔ HCA affinity":               noGPUs,
		"GPUDirect ready":                  noGPUs,
		"Rail check":                       noGPUs,
	},
	"fabric.json": {
		"SM state":                            "No data: sminfo did not answer (it needs umad access: /dev/infiniband/umad*)",
		"SM priority":                         "No data: sminfo did not answer (it needs umad access: /dev/infiniband/umad*)",
		"SM activity count":                   "No data: sminfo did not answer (it needs umad access: /dev/infiniband/umad*)",
		"Degraded fabric links":               fabricOff,
		"Fabric links":                        fabricOff,
		"Switch ports down":                   fabricOff,
		"Saturated counters":                  fabricOff,
		"Ports unknown":                       fabricOff,
		"Top switch ports by physical errors": "No switch port errors: clean (or the fabric collector is off)",
		"XmitWait hot spots":                  "No switch port waited for credits (or the fabric collector is off)",
		"Top switch ports by traffic":         fabricOff,
		"Counter sweep health":                fabricOff,
		"Counter sweep failures":              "No sweep failed or was skipped (or the fabric collector is off)",
		"Switch ports down or unknown":        "No switch port down or unknown (or the fabric collector is off)",
	},
	"probes.json": {
		"Failing probes":  probeOff,
		"Below *":         probeOff,
		"Oldest result":   probeOff,
		"Probe success":   probeOff,
		"Bandwidth ratio": probeOff,
		"Bandwidth":       probeOff,
		"Latency":         probeOff,
	},
	"diagnose.json": {
		"Failing checks":                  "No check failing",
		"Warning checks":                  "No check warning",
		"Fleet: hosts failing each check": "No host fails a check",
	},
}

// setNoValue sets each panel's noValue text from noValue; an entry that
// matches no panel is an error, so the table cannot go stale.
func setNoValue(file string, panels []dashboard.PanelOrRowPanel) error {
	texts := noValue[file]
	used := map[string]bool{}
	for _, p := range panels {
		if p.Panel == nil || p.Panel.Title == nil {
			continue
		}
		for key, text := range texts {
			prefix, wild := strings.CutSuffix(key, "*")
			if *p.Panel.Title != key && !(wild && strings.HasPrefix(*p.Panel.Title, prefix)) {
				continue
			}
			if p.Panel.FieldConfig == nil {
				p.Panel.FieldConfig = dashboard.NewFieldConfigSource()
			}
			p.Panel.FieldConfig.Defaults.NoValue = &text
			used[key] = true
		}
	}
	for key := range texts {
		if !used[key] {
			return fmt.Errorf("%s: no panel %q for its noValue text", file, key)
		}
	}
	return nil
}
