// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/routes"
)

// fabricRoutesSource reads the switches' forwarding tables (dump_fts) over
// the latest scan, checked every CountersInterval and read again when the
// scan's nodes, LIDs or port states change or RoutesMaxAge passes; run
// only by a loop, as the sweep.
var fabricRoutesSource = register(&Background[*routes.Status]{name: "fabric_routes",
	failing: func(st *routes.Status) bool { return st.Last != nil && !st.Last.OK() },
	open: func(h *Host, env runEnv, published func()) *task[*routes.Status] {
		o := h.opts.Fabric
		if o == nil || !o.Routes {
			return nil
		}
		scan := feedOf(h, fabricScanSource).opened(h, env)
		rr := routes.NewReader(routes.Config{
			Loop: fabricLoop(o, scan, env), DumpFTS: o.DumpFTSPath, MaxAge: o.RoutesMaxAge,
		})
		return &task[*routes.Status]{run: rr.Run, round: rr.ReadOnce, latest: func() *routes.Status {
			st := rr.Status()
			return &st
		}}
	}})

// FabricRoutes is the forwarding-table reader's state (background): nil
// where none runs (as FabricScan, or --no-collector.fabric.routes).
func (s *Snapshot) FabricRoutes(ctx context.Context) *routes.Status {
	return published(ctx, s, fabricRoutesSource)
}

// fabricLoop is what the counter sweep and the route read share: the
// local port (iblinkinfo's arguments without --line), the counters
// interval and timeout, the shard, and the latest scan they read against.
func fabricLoop(o *FabricOptions, scan *task[*fabric.Status], env runEnv) fabric.Loop {
	return fabric.Loop{
		Local:    fabric.Args(o.CA, o.Port)[1:],
		Interval: o.CountersInterval, Timeout: o.CountersTimeout,
		Shard: o.Shard, Shards: o.Shards,
		Topology: func() *fabric.Fabric { return scan.latest().Fabric },
		Ready:    scan.ready,
		Logger:   env.logger, Reaper: env.reaper,
	}
}
