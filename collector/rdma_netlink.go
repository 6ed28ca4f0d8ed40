// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"sort"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/expo"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/rdmanl"
)

type rdmaNetlinkCollector struct {
	optional, enabled, resources, requests *expo.Desc
}

// NewRDMANetlinkCollector builds the rdma_netlink collector. Its requests
// are the host's options (main sets them only for the live /sys).
func NewRDMANetlinkCollector(Env) Collector {
	return &rdmaNetlinkCollector{
		optional: desc("rdma_port_optional_counter_total",
			"An optional hardware counter of an RDMA port (rdma statistic show: counters sysfs hw_counters does not have, such as mlx5's cc_rx_ce_pkts, cc_rx_cnp_pkts, cc_tx_cnp_pkts), from RDMA netlink; present only while enabled.",
			"device", "port", "counter"),
		enabled: desc("rdma_optional_counter_enabled",
			"1 when an optional hardware counter the port supports is enabled (rdma statistic mode supported; RDMA_NLDEV_CMD_STAT_GET_STATUS, Linux 5.18+), 0 when not; enabling replaces the whole set and a reboot forgets it.",
			"device", "port", "counter"),
		resources: desc("rdma_device_resources",
			"Resources of an RDMA device now allocated, by type (rdma resource show: pd, cq, qp, cm_id, mr, ctx, srq), from RDMA netlink; a total that only grows is a leak.",
			"device", "resource"),
		requests: desc("rdma_netlink_requests",
			"RDMA netlink requests of this scrape by query and outcome (ok, unsupported, no_netlink, denied, no_device, truncated, error): why series are absent.",
			"query", "status"),
	}
}

func (c *rdmaNetlinkCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	s, err := snap.RDMANetlink(ctx)
	if errors.Is(err, host.ErrNotLive) {
		return nil
	}
	if s == nil {
		return err
	}
	// Which counters sysfs has, for kernels without STAT_GET_STATUS:
	// there a counter netlink shows and hw_counters lacks is optional.
	sysfs := map[string]map[string]bool{}
	if class, _ := snap.Class(ctx); class != nil {
		for _, d := range class.Devices {
			for _, p := range d.Ports {
				m := map[string]bool{}
				for _, hc := range p.HWCounters {
					m[hc.Name] = true
				}
				sysfs[d.Name+"/"+strconv.Itoa(p.Num)] = m
			}
		}
	}
	optional := map[string]map[string]bool{}
	for _, st := range s.Status {
		port := strconv.FormatUint(uint64(st.Port), 10)
		m := map[string]bool{}
		for _, cs := range st.Counters {
			if cs.Optional {
				m[cs.Name] = true
				gauge(out, c.enabled, b2f(cs.Enabled), st.Device, port, cs.Name)
			}
		}
		optional[st.Device+"/"+port] = m
	}
	for _, ps := range s.Stats {
		port := strconv.FormatUint(uint64(ps.Port), 10)
		key := ps.Device + "/" + port
		opt, known := optional[key]
		hw, haveSysfs := sysfs[key]
		for _, ct := range ps.Counters {
			// Counters sysfs also has are rdma_port_hw_counter_total:
			// one series per fact.
			if (known && opt[ct.Name]) || (!known && haveSysfs && !hw[ct.Name]) {
				counter(out, c.optional, float64(ct.Value), ps.Device, port, ct.Name)
			}
		}
	}
	for _, r := range s.Resources {
		for name, v := range r.Totals {
			gauge(out, c.resources, float64(v), r.Device, name)
		}
	}
	queries := make([]string, 0, len(s.Outcomes))
	for q := range s.Outcomes {
		queries = append(queries, string(q))
	}
	sort.Strings(queries)
	for _, q := range queries {
		for st, n := range s.Outcomes[rdmanl.Query(q)] {
			gauge(out, c.requests, float64(n), q, string(st))
		}
	}
	return errors.Join(s.Errors...)
}
