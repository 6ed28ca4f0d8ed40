// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/subprocess"
)

// SweeperConfig configures the background counter sweep.
type SweeperConfig struct {
	// IBQueryErrors and IBNetDiscover are the executables (default
	// "ibqueryerrors" and "ibnetdiscover").
	IBQueryErrors, IBNetDiscover string
	// SMInfo is the sminfo executable (default "sminfo"): the master SM
	// is read before and after each sweep's runs, and a sweep across a
	// change of SM is not trusted (smcheck.go).
	SMInfo string
	// Local are the arguments that pick the local port the tools send
	// from (-C, -P), as for iblinkinfo.
	Local []string
	// Interval between sweeps (default 1m). A sweep still running when
	// the next is due makes that one skipped, never stacked.
	Interval time.Duration
	// Timeout of one tool run (default 2m).
	Timeout time.Duration
	// Dir holds the fabric cache and the threshold file (default: a
	// private directory made under the system's temporary directory on
	// the first sweep).
	Dir string
	// MaxOutput bounds one run's standard output (default
	// DefaultSweepMaxOutput); past it the run is killed and its ports are
	// unknown.
	MaxOutput int
	// CAs sweeps channel-adapter ports too (off: hosts running
	// rdma_doctor export their own side from sysfs).
	CAs bool
	// Shard and Shards split the nodes by GUID among Shards sweepers; this
	// one sweeps the nodes with ShardOf(guid, Shards) == Shard. Shards 0
	// or 1 sweeps everything.
	Shard, Shards int
	// Topology returns the latest topology scan (nil before one); the
	// sweep reuses it instead of discovering the fabric again.
	Topology func() *Fabric
	// Ready, when set, is closed once Topology has a scan: Run waits for
	// it before the first sweep (Runner.Scanned).
	Ready <-chan struct{}
	// Done, when set, is called with each sweep before Status returns it
	// (the collector renders its series then, so that no scrape waits for
	// that).
	Done   func(*Sweep)
	Logger *slog.Logger
	Now    func() time.Time
	Reaper *subprocess.Reaper
}

// DefaultSweepMaxOutput bounds one run's output: a data counter line is
// about 450 bytes, so 256 MiB holds half a million ports.
const DefaultSweepMaxOutput = 256 << 20

// Sweeper reads every port's PMA counters in the background; Status never
// waits for a sweep and never sends a MAD.
type Sweeper struct {
	cfg     SweeperConfig
	running atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	st      SweepStatus
	// lastErr is the latest sweep's first failure, for the log.
	lastErr string

	// The fabric cache the sweeps read against, owned by the running
	// sweep (sweeps never overlap): discovered again when the topology's
	// nodes or LIDs change.
	dir       string
	ownDir    bool // made by the sweeper: removed when Run returns
	cache     *ndCache
	cacheFile string
	cacheFor  uint64 // topology fingerprint the cache was discovered for
	// wide holds the GUIDs of the nodes whose PMA printed a 64-bit error
	// counter (the additional extended counters): their unprinted zeros
	// are 64-bit too, so they have no saturation series.
	wide map[uint64]bool
	// smSeen is the master SM the latest verified sminfo named (nil
	// before one): the LIDs of the cache are trusted while it stays.
	smSeen *sm.Info
}

// NewSweeper returns a sweeper; call Run to start it.
func NewSweeper(cfg SweeperConfig) *Sweeper {
	if cfg.IBQueryErrors == "" {
		cfg.IBQueryErrors = "ibqueryerrors"
	}
	if cfg.IBNetDiscover == "" {
		cfg.IBNetDiscover = "ibnetdiscover"
	}
	if cfg.SMInfo == "" {
		cfg.SMInfo = "sminfo"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultSweepMaxOutput
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Topology == nil {
		cfg.Topology = func() *Fabric { return nil }
	}
	return &Sweeper{cfg: cfg, st: SweepStatus{Failures: map[Reason]uint64{}}, dir: cfg.Dir, wide: map[uint64]bool{}}
}

// Run sweeps now and then every Interval until ctx ends. Each tick starts
// a sweep unless one is still running: then the tick is counted as
// skipped. Run returns once the running sweep has ended.
func (s *Sweeper) Run(ctx context.Context) {
	if s.cfg.Ready != nil {
		select {
		case <-ctx.Done():
			return
		case <-s.cfg.Ready:
		}
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	defer func() {
		s.wg.Wait()
		if s.ownDir {
			_ = os.RemoveAll(s.dir) // no sweep runs any more
		}
	}()
	for {
		s.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sweeper) tick(ctx context.Context) {
	if !s.running.CompareAndSwap(false, true) {
		s.mu.Lock()
		s.st.Skipped++
		s.mu.Unlock()
		s.cfg.Logger.Debug("counter sweep still running; this one is skipped", "interval", s.cfg.Interval)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.running.Store(false)
		s.SweepOnce(ctx)
	}()
}

// Status returns the latest state. The Sweep it points to is never
// modified after the sweep that made it.
func (s *Sweeper) Status() SweepStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Failures = make(map[Reason]uint64, len(s.st.Failures))
	for r, n := range s.st.Failures {
		st.Failures[r] = n
	}
	return st
}

// ShardOf returns the shard (0 to shards-1) a node's GUID falls in. GUIDs
// are often sequential, so they are mixed first (SplitMix64's finalizer):
// consecutive switches land on different shards and the split is even.
func ShardOf(guid uint64, shards int) int {
	if shards <= 1 {
		return 0
	}
	z := guid + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(shards))
}

// InShard reports whether this sweeper covers the node guid.
func (s *Sweeper) InShard(guid uint64) bool { return ShardOf(guid, s.cfg.Shards) == s.cfg.Shard }

// SweepOnce runs one sweep synchronously over the latest topology. With
// no topology yet it does nothing: the next tick tries again.
//
// A sweep is two ibqueryerrors runs against a fabric cache (errors with
// zero thresholds, then the data counters) between two sminfo runs that
// check the LIDs still are the cache's (smcheck.go), so it costs four
// processes whatever the fabric's size; the cache is discovered with ibnetdiscover
// when the topology's nodes or LIDs change, and a shard's holds only its
// nodes.
func (s *Sweeper) SweepOnce(ctx context.Context) {
	topo := s.cfg.Topology()
	if topo == nil {
		s.cfg.Logger.Debug("counter sweep waits for the first topology scan")
		return
	}
	start := s.cfg.Now()
	began := time.Now()
	sw := &Sweep{Start: start, Topology: topo, Failures: map[Reason]int{}}
	s.plan(topo, sw)
	firstErr := s.sweep(ctx, topo, sw)
	if ctx.Err() != nil {
		return // shutting down: not a sweep
	}
	for i := range sw.Ports {
		if sw.Ports[i].Unknown {
			sw.Unknown++
		}
	}
	sw.Duration = time.Since(began)
	// Before the sweep is published: a scrape that sees it finds its
	// series rendered, and the rendering counts as the sweep's cost.
	if s.cfg.Done != nil {
		s.cfg.Done(sw)
	}

	s.mu.Lock()
	s.st.Last = sw
	s.st.Sweeps++
	for r, n := range sw.Failures {
		s.st.Failures[r] += uint64(n)
	}
	if sw.OK() {
		s.st.LastSuccess = start
	}
	prev := s.lastErr
	s.lastErr = firstErr
	s.mu.Unlock()

	switch {
	case firstErr != "" && firstErr != prev:
		s.cfg.Logger.Warn("counter sweep: some ports could not be read; they are exported as unknown",
			"ports_unknown", sw.Unknown, "ports", len(sw.Ports), "failures", sw.Failures, "first_error", firstErr)
	case firstErr == "" && prev != "":
		s.cfg.Logger.Info("counter sweep reads every port again", "ports", len(sw.Ports))
	default:
		s.cfg.Logger.Debug("counter sweep", "ports", len(sw.Ports), "ports_unknown", sw.Unknown, "queries", sw.Queries, "duration", sw.Duration)
	}
}

// plan fills sw.Ports with every port of this shard's nodes (switch ports
// other than port 0; CA ports only with CAs), sorted as the topology's
// port lines are (by GUID, then port).
func (s *Sweeper) plan(topo *Fabric, sw *Sweep) {
	for _, p := range topo.PortLines {
		if p.Port == 0 || !p.Switch && !s.cfg.CAs || !s.InShard(p.GUID) {
			continue
		}
		sw.Ports = append(sw.Ports, PortCounters{PortLine: p})
	}
}

// markAll marks every port not yet unknown as unknown for r.
func markAll(sw *Sweep, r Reason) {
	for i := range sw.Ports {
		if !sw.Ports[i].Unknown {
			sw.Ports[i].Unknown, sw.Ports[i].Reason = true, r
		}
	}
}

// sweep reads sw's ports and returns the first failure's message.
func (s *Sweeper) sweep(ctx context.Context, topo *Fabric, sw *Sweep) string {
	if len(sw.Ports) == 0 {
		return ""
	}
	var firstErr string
	fail := func(r Reason, msg string) {
		sw.Failures[r]++
		if firstErr == "" {
			firstErr = msg
		}
	}
	before, r, msg := s.smBefore(ctx)
	if r != "" {
		fail(r, msg)
		markAll(sw, r)
		return firstErr
	}
	cached, r, msg := s.ensureCache(ctx, topo)
	if r != "" && !cached {
		fail(r, msg)
		markAll(sw, r)
		return firstErr
	}
	if r != "" {
		fail(r, msg) // a partial discovery: its nodes are read below
	}
	errs := s.runIQE(ctx, false)
	data := s.runIQE(ctx, true)
	sw.Queries = 2
	for _, run := range []*iqeRun{errs, data} {
		if run.reason != "" {
			fail(run.reason, run.msg)
		}
	}
	if errs.cacheFailed || data.cacheFailed {
		// The cache would not load (removed, or written by another
		// version): discover again next time.
		s.cacheFor = 0
	}
	if r, msg := s.smAfter(ctx, before); r != "" {
		// Not one value of these runs is trusted: the LIDs they queried
		// may have named other nodes.
		fail(r, msg)
		markAll(sw, r)
		return firstErr
	}
	malformed, undiscovered := s.apply(sw, errs, data)
	if malformed > 0 {
		fail(ReasonUnparsable, fmt.Sprintf("ibqueryerrors: %d port lines with a field not in its format", malformed))
	}
	if undiscovered > 0 {
		fail(ReasonMAD, fmt.Sprintf("ibnetdiscover: %d ports of the scan are on nodes its discovery did not reach", undiscovered))
	}
	return firstErr
}

func orReason(r, def Reason) Reason {
	if r != "" {
		return r
	}
	return def
}

// fingerprint identifies a topology's nodes and their LIDs: what the
// fabric cache depends on (port states do not matter to it).
func fingerprint(topo *Fabric) uint64 {
	h := fnv.New64a()
	var b [16]byte
	for _, p := range topo.PortLines {
		if p.Stale {
			continue
		}
		binary.LittleEndian.PutUint64(b[:8], p.GUID)
		binary.LittleEndian.PutUint64(b[8:], uint64(p.LID)<<8|uint64(p.Port))
		h.Write(b[:])
	}
	return h.Sum64() | 1 // never 0, the "no cache" value
}

// thresholds is ibqueryerrors' threshold file: every counter it judges
// is printed once above zero, so an unprinted counter of a port it read is
// a real zero.
var thresholds = func() string {
	var b strings.Builder
	for id, c := range Counters {
		if c.Error || CounterID(id) == TransmitWait {
			b.WriteString(c.Field + "=0\n")
		}
	}
	return b.String()
}()

// ensureCache discovers the fabric into the cache when there is none or
// the topology's nodes or LIDs changed, and writes this shard's part. ok
// says whether there is a cache to read against; a reason with ok is a
// discovery that reported errors but wrote a cache (part of the fabric).
func (s *Sweeper) ensureCache(ctx context.Context, topo *Fabric) (ok bool, r Reason, msg string) {
	fp := fingerprint(topo)
	if s.cache != nil && s.cacheFor == fp {
		return true, "", ""
	}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "rdma_doctor-fabric-")
		if err != nil {
			return false, ReasonStart, fmt.Sprintf("no directory for the fabric cache (%v): set --collector.fabric.cache-dir to a writable directory", err)
		}
		s.dir, s.ownDir = d, true
	}
	if err := writeFileAtomic(filepath.Join(s.dir, "thresholds"), []byte(thresholds)); err != nil {
		return false, ReasonStart, fmt.Sprintf("writing the threshold file: %v (set --collector.fabric.cache-dir to a writable directory)", err)
	}
	// ibnetdiscover refuses to overwrite a cache: a new name each time.
	disc := filepath.Join(s.dir, fmt.Sprintf("discovered-%d", time.Now().UnixNano()))
	defer os.Remove(disc)
	args := append(append([]string{}, s.cfg.Local...), "--cache", disc)
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path: s.cfg.IBNetDiscover, Args: args, Timeout: s.cfg.Timeout,
		MaxOutput: s.cfg.MaxOutput, MaxStderr: 64 << 10, Reaper: s.cfg.Reaper,
		// Its topology text is not needed (the scan has one): read and
		// dropped, so it costs no memory.
		Stdout: func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err },
	})
	if err != nil {
		return false, classify(err), "ibnetdiscover --cache: " + err.Error()
	}
	f, err := os.Open(disc)
	if err != nil {
		msg := "ibnetdiscover --cache wrote no cache"
		if line := errorLine(res.Stderr); line != "" {
			msg += ": " + line
		}
		return false, ReasonMAD, msg
	}
	c, err := parseNDCache(f, MaxNDCache)
	f.Close()
	if err != nil {
		return false, ReasonUnparsable, "ibnetdiscover --cache: " + err.Error()
	}
	var buf bytes.Buffer
	if err := c.filter(&buf, func(n *ndNode) bool {
		g, ok := n.lineGUID(1)
		return ok && (n.typ == ndTypeSwitch || s.cfg.CAs) && s.InShard(g)
	}); err != nil {
		return false, ReasonStart, "writing the fabric cache: " + err.Error()
	}
	file := filepath.Join(s.dir, "fabric.cache")
	if err := writeFileAtomic(file, buf.Bytes()); err != nil {
		return false, ReasonStart, fmt.Sprintf("writing the fabric cache: %v (set --collector.fabric.cache-dir to a writable directory)", err)
	}
	s.cache, s.cacheFile, s.cacheFor = c, file, fp
	// What is remembered of nodes stays bounded by the fabric's.
	for g := range s.wide {
		if c.byGUID[g] == nil {
			delete(s.wide, g)
		}
	}
	if line := errorLine(res.Stderr); line != "" {
		return true, ReasonMAD, "ibnetdiscover --cache: " + line
	}
	return true, "", ""
}

// writeFileAtomic writes b to a new file beside path and renames it over
// path: a tool never reads a half-written file.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// iqeRun is one ibqueryerrors run's result.
type iqeRun struct {
	lines map[PortKey]*iqeLine // by the line's GUID and port
	sum   iqeSummary
	fails []iqeFailure
	// reason and msg say why the run failed or left ports unknown;
	// complete is false when nothing it printed can be trusted as a
	// whole-fabric answer (no summary: it stopped early).
	reason   Reason
	msg      string
	complete bool
	// cacheFailed: the fabric cache did not load.
	cacheFailed bool
}

// runIQE runs ibqueryerrors against the cache: errors (zero thresholds)
// or, with data, the data counters.
func (s *Sweeper) runIQE(ctx context.Context, data bool) *iqeRun {
	run := &iqeRun{lines: map[PortKey]*iqeLine{}}
	args := append(append([]string{}, s.cfg.Local...), "--load-cache", s.cacheFile, "--switch")
	if s.cfg.CAs {
		args = append(args, "--ca")
	}
	what := "ibqueryerrors"
	if data {
		args = append(args, "--counters")
		what += " --counters"
	} else {
		args = append(args, "--threshold-file", filepath.Join(s.dir, "thresholds"))
	}
	var junk int
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path: s.cfg.IBQueryErrors, Args: args, Timeout: s.cfg.Timeout,
		MaxOutput: s.cfg.MaxOutput, Reaper: s.cfg.Reaper,
		// Two lines per failed query, each naming its port: all kept,
		// up to a dead fabric's worth.
		MaxStderr: 8 << 20, StderrKeep: 8 << 20,
		Stdout: func(r io.Reader) error {
			var perr error
			run.sum, junk, perr = parseIBQueryErrors(r, func(l *iqeLine) {
				if l.all {
					return
				}
				k := PortKey{GUID: l.guid, Port: l.port}
				if run.lines[k] == nil {
					run.lines[k] = l
				}
			})
			return perr
		},
	})
	fails, unattributed, other, cacheFailed := parseIQEStderr(res.Stderr)
	run.cacheFailed = cacheFailed
	var exit *subprocess.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		// ibqueryerrors exits 1 when it found errors or failed MADs:
		// that run still reached its summary.
		run.reason, run.msg = classify(err), what+": "+err.Error()
		return run
	}
	run.fails = fails
	switch {
	case !run.sum.seen:
		run.reason, run.msg = ReasonUnparsable, what+": no summary: it stopped before reading every node"
		if other != "" {
			run.reason, run.msg = ReasonMAD, what+": "+other
		}
		return run
	case !data && !strings.Contains(run.sum.thresholds, "SymbolErrorCounter = 0"):
		run.reason, run.msg = ReasonUnparsable, what+": the zero thresholds did not take: "+run.sum.thresholds
		return run
	case unattributed > 0 || run.sum.pmaFailures > len(fails):
		run.reason, run.msg = ReasonMAD, fmt.Sprintf("%s: %d failed PMA queries it did not name a port for", what, max(unattributed, run.sum.pmaFailures-len(fails)))
		return run
	}
	run.complete = true
	switch {
	case len(fails) > 0:
		run.reason, run.msg = ReasonMAD, fmt.Sprintf("%s: %d failed PMA queries (first: LID %d port %d)", what, len(fails), fails[0].lid, fails[0].port)
	case other != "":
		run.reason, run.msg = ReasonMAD, what+": "+other
	case junk > 0:
		run.reason, run.msg = ReasonUnparsable, fmt.Sprintf("%s: %d lines not in its format", what, junk)
	}
	return run
}

// failures indexes the queries a run named as failed by node and port
// (one map lookup a port, whatever the number of failures).
type failures struct {
	nodes map[*ndNode]bool
	ports map[*ndNode]map[int]bool
}

func (run *iqeRun) failures(c *ndCache) failures {
	f := failures{nodes: map[*ndNode]bool{}, ports: map[*ndNode]map[int]bool{}}
	for _, x := range run.fails {
		nd := c.byLID[x.lid]
		switch {
		case nd == nil:
		case x.node:
			f.nodes[nd] = true
		default:
			if f.ports[nd] == nil {
				f.ports[nd] = map[int]bool{}
			}
			f.ports[nd][x.port] = true
		}
	}
	return f
}

// failed reports whether a query for port num of node failed.
func (f failures) failed(nd *ndNode, num int) bool { return f.nodes[nd] || f.ports[nd][num] }

// apply fills the swept ports from the two runs. A port is read when both
// runs completed, neither named a failed query for it or its node, and the
// data run printed its line; otherwise it is unknown and its values
// absent. It returns the number of ports left unknown by a malformed
// line, and by a node the discovery did not reach.
func (s *Sweeper) apply(sw *Sweep, errs, data *iqeRun) (malformed, undiscovered int) {
	c := s.cache
	for _, l := range errs.lines {
		for id := range NumCounters {
			if l.seen[id] && l.wide[id] && Counters[id].Error {
				if nd := c.byPortGUID(l.guid); nd != nil {
					s.wide[nd.guid] = true
				}
			}
		}
	}
	errFails, dataFails := errs.failures(c), data.failures(c)
	for i := range sw.Ports {
		p := &sw.Ports[i]
		nd := c.byPortGUID(p.GUID)
		reason := Reason("")
		var dl *iqeLine
		switch {
		case !errs.complete:
			reason = orReason(errs.reason, ReasonUnparsable)
		case !data.complete:
			reason = orReason(data.reason, ReasonUnparsable)
		case nd == nil:
			// Not in the cache: the discovery did not reach it.
			reason = ReasonMAD
			undiscovered++
		case errFails.failed(nd, p.Port) || dataFails.failed(nd, p.Port):
			reason = ReasonMAD
		default:
			dl = data.lines[PortKey{GUID: nd.guid, Port: p.Port}]
			if dl == nil {
				reason = ReasonUnparsable
			}
		}
		el := errs.lines[PortKey{GUID: p.GUID, Port: p.Port}]
		if reason == "" && (el != nil && el.malformed || dl.malformed) {
			reason = ReasonUnparsable
			malformed++
		}
		if reason != "" {
			p.Unknown, p.Reason = true, reason
			continue
		}
		for id := range NumCounters {
			ctr := Counters[id]
			switch {
			case ctr.Error || id == TransmitWait:
				// A printed value says its width; an unprinted zero has
				// the width the node's PMA prints its errors in.
				fixed := uint8(ctr.Spec.Bits)
				if id == TransmitWait {
					fixed = 32 // PortCounters.PortXmitWait
				}
				v := Value{Bits: fixed, Present: true}
				if s.wide[nd.guid] {
					v.Bits = 64
				}
				if el != nil && el.seen[id] {
					v.V, v.Bits = el.values[id], fixed
					if el.wide[id] {
						v.Bits = 64
					}
				}
				p.Values[id] = v
			case dl.seen[id]:
				// The full PortCountersExtended prints eight fields; four
				// are PortCounters' 32-bit ones or the IETF-less
				// extended ones, which only a value past 32 bits tells
				// apart.
				bits := uint8(32)
				if dl.fields >= 8 || dl.values[id] > math.MaxUint32 {
					bits = 64
				}
				p.Values[id] = Value{V: dl.values[id], Bits: bits, Present: true}
			}
		}
	}
	return malformed, undiscovered
}

// classify maps a subprocess error to a Reason.
func classify(err error) Reason {
	var exit *subprocess.ExitError
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, subprocess.ErrTimeout):
		return ReasonTimeout
	case errors.Is(err, subprocess.ErrOutputTooLarge):
		return ReasonOutputTooLarge
	case errors.As(err, &exit):
		return ReasonMAD
	case errors.Is(err, subprocess.ErrNotFound), errors.As(err, &pathErr):
		return ReasonStart
	case errors.Is(err, errUnparsable):
		return ReasonUnparsable
	}
	return ReasonMAD
}

// errorLine returns the first line of standard error that reports a
// failure: libibmad prints its warnings and errors as "ibwarn: ",
// "iberror: " and "ibpanic: "; umad2sim's "sim_connect: attached as
// client" notice is not one.
func errorLine(stderr []byte) string {
	for line := range bytes.SplitSeq(stderr, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) == 0 || bytes.Contains(l, []byte("sim_connect: attached")) {
			continue
		}
		low := bytes.ToLower(l)
		for _, marker := range [][]byte{[]byte("ibwarn"), []byte("iberror"), []byte("ibpanic"), []byte("bad status"), []byte("failed"), []byte("timeout")} {
			if bytes.Contains(low, marker) {
				s := subprocess.WithoutPID(string(l))
				if len(s) > 300 {
					s = s[:300] + "..."
				}
				return s
			}
		}
	}
	return ""
}
