// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/routes"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// fabricRoutes exports the forwarding-table reader's state
// (host.Snapshot.FabricRoutes) for the fabric collector.
type fabricRoutes struct {
	mu        sync.Mutex
	blockFor  *routes.Tables
	block     *expo.Block
	portRoute *expo.Desc

	success, duration, lastSuccess, switches, unknown, reads, failures *expo.Desc
}

func newFabricRoutes() *fabricRoutes {
	return &fabricRoutes{
		portRoute:   desc("rdma_fabric_port_routes", "Channel-adapter LIDs the switch's unicast forwarding table sends out of this port (dump_fts).", "guid", "port"),
		success:     desc("rdma_fabric_routes_read_success", "1 when the latest forwarding-table read (dump_fts) read every switch of this shard whole."),
		duration:    desc("rdma_fabric_routes_read_duration_seconds", "Duration of the latest forwarding-table read."),
		lastSuccess: desc("rdma_fabric_routes_read_last_success_timestamp_seconds", "Start of the latest forwarding-table read that read every switch; with time() its age."),
		switches:    desc("rdma_fabric_routes_switches", "Switches of this shard whose forwarding table the latest read read whole."),
		unknown:     desc("rdma_fabric_routes_switches_unknown", "Switches of this shard whose forwarding table the latest read could not read: their route series are absent."),
		reads:       desc("rdma_fabric_routes_reads_total", "Forwarding-table reads run (after a change in the scan, or every --collector.fabric.routes-max-age)."),
		failures:    desc("rdma_fabric_routes_read_failures_total", "Forwarding-table reads that failed or left switches unknown, by reason.", "reason"),
	}
}

// update exports the latest read; a read that read no switch at all is an
// error of the collector, as a sweep that read no port.
func (c *fabricRoutes) update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	st := snap.FabricRoutes(ctx)
	if st == nil {
		return nil
	}
	counter(out, c.reads, float64(st.Reads))
	for _, r := range fabric.Reasons {
		counter(out, c.failures, float64(st.Failures[r]), string(r))
	}
	r := st.Last
	if r == nil {
		return nil
	}
	gauge(out, c.success, b2f(r.OK()))
	gauge(out, c.duration, r.Duration.Seconds())
	gauge(out, c.switches, float64(len(r.Switches)))
	gauge(out, c.unknown, float64(len(r.Unknown)))
	if !st.LastSuccess.IsZero() {
		gauge(out, c.lastSuccess, float64(st.LastSuccess.UnixNano())/1e9)
	}
	out.add(c.portBlock(r))
	if len(r.Switches) == 0 && len(r.Unknown) > 0 {
		return fmt.Errorf("route read read none of %d switches: %w", len(r.Unknown), r.Err)
	}
	return nil
}

// portBlock renders rdma_fabric_port_routes once per read: every port of
// each read switch (0 where no channel adapter is routed out of it), as
// the scan lists them, and any port the table names that the scan did not.
func (c *fabricRoutes) portBlock(r *routes.Tables) *expo.Block {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.block == nil || c.blockFor != r {
		c.blockFor = r
		c.block = expo.NewBlock(func() []prometheus.Metric { return c.portMetrics(r) })
	}
	return c.block
}

func (c *fabricRoutes) portMetrics(r *routes.Tables) []prometheus.Metric {
	counts := r.PortRoutes()
	var out []prometheus.Metric
	done := map[fabric.PortKey]bool{}
	emit := func(k fabric.PortKey, n int) {
		done[k] = true
		out = append(out, expo.Gauge(c.portRoute, float64(n), fmt.Sprintf("0x%016x", k.GUID), strconv.Itoa(k.Port)))
	}
	if r.Topology != nil {
		for _, p := range r.Topology.PortLines {
			k := fabric.PortKey{GUID: p.GUID, Port: p.Port}
			if p.Port == 0 || r.Switches[p.GUID] == nil || done[k] {
				continue
			}
			emit(k, counts[k])
		}
	}
	for k, n := range counts {
		if !done[k] && k.Port != 0 {
			emit(k, n)
		}
	}
	return out
}
