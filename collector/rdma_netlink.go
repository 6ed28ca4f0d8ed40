// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type rdmaNetlinkCollector struct {
	optional, enabled, resources, requests *expo.Desc
	// Opt-in: per-process totals, QP counters.
	procObjects, procUnnamed, procCapped, dumpTruncated *expo.Desc
	qpMode, qpCounters, qpCounterQPs, qpTypeCounter     *expo.Desc
	qpTruncated                                         *expo.Desc
}

func rdmaNetlinkSpec() Spec {
	return Spec{Name: "rdma_netlink", Default: true,
		Help: "RDMA netlink (live /sys only; no privileges): optional hardware counters and whether each is enabled, resource totals per device (one request per port and two dumps per scrape; excluded devices are never asked); opt-in per-process totals and QP counters (docs/rdma-netlink.md)",
		Flags: func(app *kingpin.Application, f *Flags) {
			o := &f.RDMANetlink
			app.Flag("collector.rdma_netlink.process-resources",
				"Also export rdma_resource_process_objects: each device's qp, cq, mr, pd and ctx objects by owning process name (/proc/PID/comm; kernel owners as [module]), never by PID. Five dumps per device per scrape; on mlx5 each QP dumped costs the kernel one firmware command.").
				BoolVar(&o.ProcessResources)
			app.Flag("collector.rdma_netlink.max-processes",
				"Process names per device in rdma_resource_process_objects (those with the most objects); the rest are summed as process=\"other\" and rdma_resource_process_capped says so.").
				Default(strconv.Itoa(rdmanl.DefaultMaxProcesses)).IntVar(&o.MaxProcesses)
			app.Flag("collector.rdma_netlink.max-objects",
				"Objects (resource objects and QP counters) read per scrape; reaching it abandons the dump under way and skips the rest, and rdma_resource_dump_truncated says which.").
				Default(strconv.Itoa(rdmanl.DefaultMaxObjects)).IntVar(&o.MaxObjects)
			app.Flag("collector.rdma_netlink.qp-counters",
				"Also export each port's QP counter mode (rdma statistic qp mode) and its bound QP counters; their values only per QP type, in auto mode by type alone (never per process). Two requests per port per scrape.").
				BoolVar(&o.QPCounters)
		},
		New: func(env Env, _ *Flags) (Collector, error) { return NewRDMANetlinkCollector(env), nil }}
}

// RDMANetlinkOptions are the rdma_netlink collector's opt-in reads.
type RDMANetlinkOptions struct {
	// ProcessResources dumps every qp, cq, mr, pd and ctx object and
	// counts them by process name, at most MaxProcesses a device, at most
	// MaxObjects objects a scrape.
	ProcessResources bool
	MaxProcesses     int
	MaxObjects       int
	// QPCounters reads each port's QP counter mode and bound counters.
	QPCounters bool
}

// Query is the RDMA netlink query the flags ask for.
func (o RDMANetlinkOptions) Query() (rdmanl.Options, error) {
	if o.MaxProcesses < 1 {
		return rdmanl.Options{}, fmt.Errorf("--collector.rdma_netlink.max-processes must be at least 1, not %d", o.MaxProcesses)
	}
	if o.MaxObjects < 1 {
		return rdmanl.Options{}, fmt.Errorf("--collector.rdma_netlink.max-objects must be at least 1, not %d", o.MaxObjects)
	}
	return rdmanl.Options{Stats: true, Status: true, Resources: true,
		ProcessResources: o.ProcessResources, MaxProcesses: o.MaxProcesses, MaxObjects: o.MaxObjects,
		QPCounters: o.QPCounters}, nil
}

// NewRDMANetlinkCollector builds the rdma_netlink collector. Its requests
// are the host's options (main sets them only for the live /sys).
func NewRDMANetlinkCollector(Env) Collector {
	return &rdmaNetlinkCollector{
		optional: desc("rdma_port_optional_counter_total",
			"An optional hardware counter of an RDMA port from RDMA netlink (such as mlx5's cc_rx_ce_pkts), while enabled.",
			"device", "port", "counter"),
		enabled: desc("rdma_optional_counter_enabled",
			"1 when an optional hardware counter the port supports is enabled, 0 when not.",
			"device", "port", "counter"),
		resources: desc("rdma_device_resources",
			"Resources of an RDMA device now allocated, by type (pd, cq, qp, cm_id, mr, ctx, srq).",
			"device", "resource"),
		procObjects: desc("rdma_resource_process_objects",
			"Objects of an RDMA device by type and owning process name (never a PID).",
			"device", "type", "process"),
		procUnnamed: desc("rdma_resource_process_unnamed_objects",
			"Objects of an RDMA device by type whose owning process could not be named.",
			"device", "type"),
		procCapped: desc("rdma_resource_process_capped",
			"1 when an RDMA device had more owning processes than --collector.rdma_netlink.max-processes.",
			"device"),
		dumpTruncated: desc("rdma_resource_dump_truncated",
			"1 when --collector.rdma_netlink.max-objects cut a device's dump of that type short, 0 when read whole.",
			"device", "type"),
		qpMode: desc("rdma_port_qp_counter_mode",
			"1 for an RDMA port's QP counter mode (none, auto or manual) and its criteria.",
			"device", "port", "mode", "criteria"),
		qpCounters: desc("rdma_port_qp_counters",
			"QP counters bound on an RDMA port now (rdma statistic qp show), in auto or manual mode.",
			"device", "port"),
		qpCounterQPs: desc("rdma_port_qp_counter_qps",
			"QPs bound to a QP counter on an RDMA port now.",
			"device", "port"),
		qpTruncated: desc("rdma_port_qp_counter_dump_truncated",
			"1 when --collector.rdma_netlink.max-objects cut a port's QP counter dump short, 0 when read whole.",
			"device", "port"),
		qpTypeCounter: desc("rdma_port_qp_type_counter_total",
			"A hardware counter of an RDMA port's QPs of one type (RC, UD, ...), in auto mode by QP type.",
			"device", "port", "qp_type", "counter"),
		requests: desc("rdma_netlink_requests",
			"RDMA netlink requests of this scrape by query and outcome (ok, unsupported, denied, error, ...).",
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
	c.optIn(out, s)
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

// optIn writes the opt-in series: per-process totals and QP counters.
func (c *rdmaNetlinkCollector) optIn(out *sink, s *rdmanl.Snapshot) {
	for _, r := range s.ProcessResources {
		for p, n := range r.Objects {
			gauge(out, c.procObjects, float64(n), r.Device, r.Type, p)
		}
		gauge(out, c.procUnnamed, float64(r.Unnamed), r.Device, r.Type)
		gauge(out, c.dumpTruncated, b2f(r.Truncated), r.Device, r.Type)
	}
	capped := map[string]bool{}
	for _, r := range s.ProcessResources {
		if _, seen := capped[r.Device]; !seen || r.Capped {
			capped[r.Device] = r.Capped
		}
	}
	for d, v := range capped {
		gauge(out, c.procCapped, b2f(v), d)
	}
	for _, m := range s.QPCounterModes {
		gauge(out, c.qpMode, 1, m.Device, strconv.FormatUint(uint64(m.Port), 10), m.ModeName(), m.Criteria())
	}
	for _, pc := range s.QPCounters {
		port := strconv.FormatUint(uint64(pc.Port), 10)
		gauge(out, c.qpTruncated, b2f(pc.Truncated), pc.Device, port)
		if pc.Truncated {
			// A partial count is no count: absent, and said.
			continue
		}
		gauge(out, c.qpCounters, float64(pc.Counters), pc.Device, port)
		gauge(out, c.qpCounterQPs, float64(pc.QPs), pc.Device, port)
		for _, t := range pc.ByType {
			for _, v := range t.Counters {
				counter(out, c.qpTypeCounter, float64(v.Value), pc.Device, port, t.QPType, v.Name)
			}
		}
	}
}
