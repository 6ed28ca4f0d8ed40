// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package routes reads the switches' unicast forwarding tables (dump_fts)
// in the background, against the latest topology scan of package fabric,
// and again only when that topology changes or the tables grow old: the
// route checks and the per-port route counts read its Status.
package routes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
)

// Config configures the background read of the switches'
// unicast forwarding tables.
type Config struct {
	// Loop's Interval is how often the topology is checked for a change
	// that calls for a new read (default 1m: the counter sweep's), its
	// Timeout bounds one dump_fts run.
	fabric.Loop
	// DumpFTS is the executable (default "dump_fts"): one run reads every
	// switch's table, where ibroute reads one switch a process.
	DumpFTS string
	// MaxAge re-reads the tables at least this often even when the
	// topology did not change (default 15m): the SM may reroute on its
	// own (a heavy sweep, a changed routing engine), which no scan sees.
	MaxAge time.Duration
}

// Tables is one read of the forwarding tables of this shard's switches.
type Tables struct {
	Start    time.Time
	Duration time.Duration
	// Topology is the scan the read was made for: its switches are the
	// ones read, and its port states judge the routes.
	Topology *fabric.Fabric
	// Switches holds the whole tables read, by the switch's GUID as
	// iblinkinfo prints it; Unknown the shard's switches of Topology
	// whose table was not read whole (their routes are unknown, never
	// none).
	Switches map[uint64]*SwitchLFT
	Unknown  []uint64
	// Reason and Err say why the read failed or left switches unknown
	// ("" and nil for a whole read).
	Reason fabric.Reason
	Err    error
	// tables identifies the tables read (tablesHash).
	tables uint64
}

// OK reports whether every switch of the shard was read.
func (r *Tables) OK() bool { return r.Err == nil && len(r.Unknown) == 0 }

// Status is the reader's state.
type Status struct {
	// Last is the latest read; nil before one.
	Last *Tables
	// Reads counts dump_fts runs; Failures the runs that failed or left
	// switches unknown, by reason.
	Reads       uint64
	Failures    map[fabric.Reason]uint64
	LastSuccess time.Time
}

// Reader reads the forwarding tables in the background, again only
// when the topology's nodes, LIDs or port states change, or MaxAge has
// passed; Status never waits for a read.
type Reader struct {
	cfg Config
	mu  sync.Mutex
	st  Status
	// readFor is the routing fingerprint of the latest read's topology.
	readFor uint64
	// settled is set once two whole reads in a row for readFor printed
	// the same tables: the SM reroutes some time after the port change
	// that made the read (its next sweep), so the first read after a
	// change may hold the tables from before it.
	settled bool
	lastErr string
}

// NewReader returns a reader; call Run to start it.
func NewReader(cfg Config) *Reader {
	if cfg.DumpFTS == "" {
		cfg.DumpFTS = "dump_fts"
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 15 * time.Minute
	}
	cfg.Defaults()
	return &Reader{cfg: cfg, st: Status{Failures: map[fabric.Reason]uint64{}}}
}

// Run checks the topology now and every Interval until ctx ends, and
// reads the tables when they may have changed.
func (rr *Reader) Run(ctx context.Context) {
	if rr.cfg.Ready != nil {
		select {
		case <-ctx.Done():
			return
		case <-rr.cfg.Ready:
		}
	}
	subprocess.Every(ctx, rr.cfg.Interval, rr.ReadOnce)
}

// Status returns the latest state; the Routes it points to is never
// modified.
func (rr *Reader) Status() Status {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	st := rr.st
	st.Failures = make(map[fabric.Reason]uint64, len(rr.st.Failures))
	for r, n := range rr.st.Failures {
		st.Failures[r] = n
	}
	return st
}

// routingFingerprint identifies what the SM's routes follow: the nodes,
// their LIDs and which ports are up, logically and physically (a port
// going down or up makes the SM route again; a port disabled with
// ibportstate may keep its logical state and lose only the physical one,
// as ibsim's does).
func routingFingerprint(topo *fabric.Fabric) uint64 {
	h := fnv.New64a()
	var b [18]byte
	for _, p := range topo.PortLines {
		binary.LittleEndian.PutUint64(b[:8], p.GUID)
		binary.LittleEndian.PutUint64(b[8:16], uint64(p.LID)<<8|uint64(p.Port))
		b[16], b[17] = byte(p.State), byte(p.PhysState)
		if p.Stale {
			b[16] = 0xff
		}
		h.Write(b[:])
	}
	return h.Sum64() | 1
}

// ReadOnce reads the tables if the topology changed since the latest read,
// that read failed, or it is older than MaxAge.
func (rr *Reader) ReadOnce(ctx context.Context) {
	topo := rr.cfg.Topology()
	if topo == nil {
		return
	}
	fp := routingFingerprint(topo)
	rr.mu.Lock()
	last := rr.st.Last
	fresh := last != nil && last.OK() && rr.readFor == fp && rr.settled && rr.cfg.Now().Sub(last.Start) < rr.cfg.MaxAge
	rr.mu.Unlock()
	if fresh {
		return
	}
	r := rr.read(ctx, topo)
	if ctx.Err() != nil {
		return // shutting down: not a read
	}
	rr.mu.Lock()
	// Settled when this whole read repeats the previous whole one for the
	// same topology; a read past MaxAge of a settled fabric stays settled
	// when nothing changed.
	rr.settled = r.OK() && last != nil && last.OK() && rr.readFor == fp && r.tables == last.tables
	rr.st.Last = r
	rr.st.Reads++
	rr.readFor = fp
	if r.Reason != "" {
		rr.st.Failures[r.Reason]++
	}
	if r.OK() {
		rr.st.LastSuccess = r.Start
	}
	prev := rr.lastErr
	rr.lastErr = ""
	if r.Err != nil {
		rr.lastErr = r.Err.Error()
	}
	rr.mu.Unlock()
	switch {
	case r.Err != nil && r.Err.Error() != prev:
		rr.cfg.Logger.Warn("route read: some switches' forwarding tables could not be read; their routes are unknown",
			"switches_unknown", len(r.Unknown), "switches", len(r.Switches)+len(r.Unknown), "err", r.Err)
	case r.Err == nil && prev != "":
		rr.cfg.Logger.Info("route read reads every switch's forwarding table again", "switches", len(r.Switches))
	default:
		rr.cfg.Logger.Debug("route read", "switches", len(r.Switches), "switches_unknown", len(r.Unknown), "duration", r.Duration)
	}
}

// shardSwitches returns this shard's switches of topo (by the GUID
// iblinkinfo prints) and whether each was reached by the scan.
func (rr *Reader) shardSwitches(topo *fabric.Fabric) []uint64 {
	var out []uint64
	seen := map[uint64]bool{}
	for _, p := range topo.PortLines {
		if !p.Switch || seen[p.GUID] || fabric.ShardOf(p.GUID, rr.cfg.Shards) != rr.cfg.Shard {
			continue
		}
		seen[p.GUID] = true
		out = append(out, p.GUID)
	}
	return out
}

// read runs dump_fts once and keeps this shard's whole tables. Every
// shard's reader runs dump_fts over the whole fabric (it has no switch
// filter, and one process is cheaper than an ibroute per switch); a
// switch whose block is missing or cut short is unknown.
func (rr *Reader) read(ctx context.Context, topo *fabric.Fabric) *Tables {
	r := &Tables{Start: rr.cfg.Now(), Topology: topo, Switches: map[uint64]*SwitchLFT{}}
	began := time.Now()
	defer func() { r.Duration = time.Since(began) }()
	want := rr.shardSwitches(topo)
	var d *lftDump
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path: rr.cfg.DumpFTS, Args: append([]string{}, rr.cfg.Local...), Timeout: rr.cfg.Timeout,
		MaxOutput: rr.cfg.MaxOutput, MaxStderr: 64 << 10, Reaper: rr.cfg.Reaper,
		Stdout: func(out io.Reader) error {
			var perr error
			d, perr = parseLFTs(out)
			return perr
		},
	})
	fail := func(reason fabric.Reason, e error) {
		if r.Err == nil {
			r.Reason, r.Err = reason, e
		}
	}
	switch {
	case err != nil:
		fail(fabric.Classify(err), fmt.Errorf("dump_fts: %w", err))
	case fabric.ErrorLine(res.Stderr) != "":
		fail(fabric.ReasonMAD, errors.New("dump_fts: "+fabric.ErrorLine(res.Stderr)))
	}
	if d != nil && r.Reason != fabric.ReasonTimeout && r.Reason != fabric.ReasonOutputTooLarge {
		// Whole blocks of a run that failed later are whole tables; a run
		// killed mid-way may have printed a block the switch's own count
		// line ends, but nothing past it is trusted.
		for _, s := range d.Switches {
			if fabric.ShardOf(s.GUID, rr.cfg.Shards) == rr.cfg.Shard {
				if r.Switches[s.GUID] != nil {
					// Two tables for one GUID: which is the switch's
					// cannot be told.
					delete(r.Switches, s.GUID)
					fail(fabric.ReasonUnparsable, fmt.Errorf("dump_fts: two tables for switch 0x%016x", s.GUID))
					continue
				}
				r.Switches[s.GUID] = s
			}
		}
		if d.Broken > 0 {
			fail(fabric.ReasonUnparsable, fmt.Errorf("dump_fts: %d tables cut short or with lines not in its format", d.Broken))
		}
	}
	for _, g := range want {
		if r.Switches[g] == nil {
			r.Unknown = append(r.Unknown, g)
		}
	}
	if len(r.Unknown) > 0 && r.Err == nil {
		fail(fabric.ReasonMAD, fmt.Errorf("dump_fts: no forwarding table printed for %d switches of the scan (first 0x%016x)", len(r.Unknown), r.Unknown[0]))
	}
	r.tables = tablesHash(r.Switches)
	return r
}

// tablesHash identifies a read's tables: every switch's entries, in GUID
// order.
func tablesHash(sw map[uint64]*SwitchLFT) uint64 {
	guids := make([]uint64, 0, len(sw))
	for g := range sw {
		guids = append(guids, g)
	}
	slices.Sort(guids)
	h := fnv.New64a()
	var b [8]byte
	for _, g := range guids {
		binary.LittleEndian.PutUint64(b[:], g)
		h.Write(b[:])
		for _, e := range sw[g].Entries {
			binary.LittleEndian.PutUint64(b[:], uint64(e.LID)<<16|uint64(e.Port)<<8|uint64(e.Kind))
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

// PortRoutes returns how many channel-adapter LIDs each read switch port
// forwards, by port; switches of Unknown are absent.
func (r *Tables) PortRoutes() map[fabric.PortKey]int {
	out := map[fabric.PortKey]int{}
	for g, s := range r.Switches {
		for port, n := range s.CARoutes() {
			out[fabric.PortKey{GUID: g, Port: port}] = n
		}
	}
	return out
}
