// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// FabricOptions are the fabric scan and counter sweep
// (--collector.fabric.*). Options.Fabric nil runs neither (the fabric
// collector is off by default).
type FabricOptions struct {
	// Path is the iblinkinfo executable; CA and Port pick the local port
	// every tool sends from (empty, 0: the tools' default).
	Path              string
	Interval, Timeout time.Duration
	CA                string
	Port              int

	// Counters sweeps every switch port's PMA counters (ibqueryerrors);
	// off (--no-collector.fabric.counters), no sweep runs.
	Counters                             bool
	IBQueryErrorsPath, IBNetDiscoverPath string
	// SMInfoPath is the sminfo the sweep checks the master SM with
	// (default "sminfo"): its LIDs are trusted only while it stays.
	SMInfoPath                        string
	CountersInterval, CountersTimeout time.Duration
	// CacheDir holds the fabric cache and threshold file the sweep
	// writes (empty: a private temporary directory).
	CacheDir string
	// CACounters sweeps channel-adapter ports too.
	CACounters bool
	// Shard and Shards split the swept nodes among Shards exporters
	// (fabric.ShardOf); 0 or 1 Shards sweeps them all.
	Shard, Shards int
	// Routes reads the switches' unicast forwarding tables with
	// DumpFTSPath (--collector.fabric.routes), at least every
	// RoutesMaxAge.
	Routes       bool
	DumpFTSPath  string
	RoutesMaxAge time.Duration
	// Names is the node name map (--collector.fabric.node-name-map), read
	// once at start-up; nil: node descriptions as the fabric reports them.
	Names fabric.NameMap
}

// The fabric's background sources, run only by a loop (the server): the
// iblinkinfo scan every Interval, and the counter sweep over the latest
// scan every CountersInterval, from the first scan that gave a fabric.
// No snapshot runs them on demand: the CLI reads neither.
var (
	fabricScanSource = register(&Background[*fabric.Status]{name: "fabric_scan",
		failing: func(st *fabric.Status) bool { return !st.OK },
		open: func(h *Host, env runEnv, published func()) *task[*fabric.Status] {
			o := h.opts.Fabric
			if o == nil {
				return nil
			}
			r := fabric.NewRunner(fabric.RunnerConfig{
				Path: o.Path, Args: fabric.Args(o.CA, o.Port), Interval: o.Interval, Timeout: o.Timeout,
				Logger: env.logger, Reaper: env.reaper, Done: published, Names: o.Names,
			})
			return &task[*fabric.Status]{run: r.Run, round: r.RunOnce, ready: r.Scanned(), latest: func() *fabric.Status {
				st := r.Status()
				return &st
			}}
		}})
	fabricSweepSource = register(&Background[*fabric.SweepStatus]{name: "fabric_sweep",
		failing: func(st *fabric.SweepStatus) bool { return st.Last != nil && !st.Last.OK() },
		open: func(h *Host, env runEnv, published func()) *task[*fabric.SweepStatus] {
			o := h.opts.Fabric
			if o == nil || !o.Counters {
				return nil
			}
			// Opened before this one (the table's order).
			scan := feedOf(h, fabricScanSource).opened(h, env)
			sw := fabric.NewSweeper(fabric.SweeperConfig{
				Loop:          fabricLoop(o, scan, env),
				IBQueryErrors: o.IBQueryErrorsPath, IBNetDiscover: o.IBNetDiscoverPath, SMInfo: o.SMInfoPath,
				Dir: o.CacheDir, CAs: o.CACounters,
				Done: func(s *fabric.Sweep) {
					h.fabricSwept.call(s)
					published()
				},
			})
			return &task[*fabric.SweepStatus]{run: sw.Run, round: sw.SweepOnce, latest: func() *fabric.SweepStatus {
				st := sw.Status()
				return &st
			}}
		}})
)

// FabricScan is the latest iblinkinfo scan (background): nil where no
// scan runs (the fabric collector off, or no loop: the CLI).
func (s *Snapshot) FabricScan(ctx context.Context) *fabric.Status {
	return published(ctx, s, fabricScanSource)
}

// FabricSweep is the counter sweep's state (background): nil where no
// sweep runs (as FabricScan, or --no-collector.fabric.counters).
func (s *Snapshot) FabricSweep(ctx context.Context) *fabric.SweepStatus {
	return published(ctx, s, fabricSweepSource)
}

// NeedFabricSweep judges a FabricSweep reading, nil where no sweep runs.
var NeedFabricSweep = &Need[*fabric.SweepStatus]{name: "fabric", why: func(st *fabric.SweepStatus, _ error) string {
	switch {
	case st == nil:
		return "the fabric checks read the fabric collector's counter sweep: they run in rdma_doctor serve on the host " +
			"that scans the fabric, with --collector.fabric on (and not --no-collector.fabric.counters)"
	case st.Last == nil:
		return "no fabric counter sweep has completed yet (the first starts after the first iblinkinfo scan)"
	}
	return ""
}}

// OnFabricSweep adds fn to what each counter sweep calls before it is
// published: the fabric collector renders the sweep's series then, so
// that no scrape waits for that. Call it before Workers.
func (h *Host) OnFabricSweep(fn func(*fabric.Sweep)) { h.fabricSwept.add(fn) }
