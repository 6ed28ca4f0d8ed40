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

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/ndcache"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
)

// Loop is what the fabric's background readers (the counter sweep, the
// forwarding-table read) share: where they send from, how often and how
// long they run, how much they read, which shard they cover and the scan
// they read against.
type Loop struct {
	// Local are the arguments that pick the local port the tools send
	// from (-C, -P), as for iblinkinfo.
	Local []string
	// Interval between rounds (default 1m). A round still running when
	// the next is due makes that one skipped, never stacked.
	Interval time.Duration
	// Timeout bounds one round (default 2m): a sweep, its discovery and
	// ibqueryerrors runs together; a dump_fts run. A run still going then
	// is killed and what it should have read is unknown.
	Timeout time.Duration
	// MaxOutput bounds one run's standard output (default
	// DefaultSweepMaxOutput); past it the run is killed and what it
	// should have read is unknown.
	MaxOutput int
	// Shard and Shards split the nodes by GUID among Shards readers; this
	// one covers the nodes with ShardOf(guid, Shards) == Shard. Shards 0
	// or 1 covers everything.
	Shard, Shards int
	// Topology returns the latest topology scan (nil before one): the
	// rounds read against it instead of discovering the fabric again.
	Topology func() *Fabric
	// Ready, when set, is closed once Topology has a scan: Run waits for
	// it before the first round (Runner.Scanned).
	Ready  <-chan struct{}
	Logger *slog.Logger
	Now    func() time.Time
	Reaper *subprocess.Reaper
}

// Defaults fills what was left unset.
func (l *Loop) Defaults() {
	if l.Interval <= 0 {
		l.Interval = time.Minute
	}
	if l.Timeout <= 0 {
		l.Timeout = 2 * time.Minute
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultSweepMaxOutput
	}
	if l.Shards <= 0 {
		l.Shards = 1
	}
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	if l.Topology == nil {
		l.Topology = func() *Fabric { return nil }
	}
}

// SweeperConfig configures the background counter sweep.
type SweeperConfig struct {
	Loop
	// IBQueryErrors and IBNetDiscover are the executables (default
	// "ibqueryerrors" and "ibnetdiscover").
	IBQueryErrors, IBNetDiscover string
	// SMInfo is the sminfo executable (default "sminfo"): the master SM
	// is read before and after each sweep's runs, and a sweep across a
	// change of SM is not trusted (smcheck.go).
	SMInfo string
	// Dir holds the fabric cache and the threshold file (default: a
	// private directory made under the system's temporary directory on
	// the first sweep).
	Dir string
	// CAs sweeps channel-adapter ports too (off: hosts running
	// rdma_doctor export their own side from sysfs).
	CAs bool
	// Done, when set, is called with each sweep before Status returns it
	// (the collector renders its series then, so that no scrape waits for
	// that).
	Done func(*Sweep)
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
	cache     *ndcache.Cache
	cacheFile string
	cacheFor  uint64 // topology fingerprint the cache was discovered for
	// expect is what a run against cacheFile must say it checked.
	expect coverage
	// wide holds the GUIDs of the nodes whose PMA printed a 64-bit error
	// counter (the additional extended counters): their unprinted zeros
	// are 64-bit too, so they have no saturation series.
	wide map[uint64]bool
	// deadline is when the running sweep's time is up (Timeout after it
	// began): every tool run of it gets what is left (timeout).
	deadline time.Time
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
	cfg.Defaults()
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
		s.overrun()
		return
	}
	s.begin()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.running.Store(false)
		defer s.end()
		s.sweepOnce(ctx)
	}()
}

// begin marks a sweep running from now (SweepStatus.Running); end marks
// none running, where the sweep published nothing.
func (s *Sweeper) begin() {
	s.mu.Lock()
	s.st.Running = s.cfg.Now()
	s.mu.Unlock()
}

func (s *Sweeper) end() {
	s.mu.Lock()
	s.st.Running = time.Time{}
	s.mu.Unlock()
}

// overrun counts a tick that found the sweep still running, and replaces
// the published sweep with its ports unknown (overran): the sweep that
// should have read them by now has not, so what the last one read is no
// longer this interval's reading. The alert on skipped sweeps
// (RdmaFabricCounterSweepOverrun) fires on the same tick.
func (s *Sweeper) overrun() {
	s.mu.Lock()
	s.st.Skipped++
	last, since := s.st.Last, s.st.Running
	if last != nil && !last.Overrun && !since.IsZero() {
		s.st.Last = overran(last, since, s.cfg.Now())
	}
	s.mu.Unlock()
	s.cfg.Logger.Debug("counter sweep still running; this one is skipped and the last sweep's ports are unknown",
		"interval", s.cfg.Interval, "running_since", since)
}

// overran is last with every port unknown (ReasonTimeout, values absent),
// standing for the sweep begun at since that has overrun its interval.
// Its Start is since: LastSuccess stays the last sweep that read.
func overran(last *Sweep, since, now time.Time) *Sweep {
	sw := &Sweep{Start: since, Duration: now.Sub(since), Topology: last.Topology, Failures: map[Reason]int{}, Overrun: true}
	sw.Ports = make([]PortCounters, len(last.Ports))
	for i := range last.Ports {
		sw.Ports[i] = PortCounters{PortLine: last.Ports[i].PortLine, Unknown: true, Reason: ReasonTimeout}
	}
	sw.Unknown = len(sw.Ports)
	return sw
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
	s.begin()
	defer s.end()
	s.sweepOnce(ctx)
}

func (s *Sweeper) sweepOnce(ctx context.Context) {
	topo := s.cfg.Topology()
	if topo == nil {
		s.cfg.Logger.Debug("counter sweep waits for the first topology scan")
		return
	}
	start := s.cfg.Now()
	began := time.Now()
	s.deadline = began.Add(s.cfg.Timeout)
	defer func() { s.deadline = time.Time{} }()
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
	s.st.Running = time.Time{} // with the sweep it ran for: never a gap
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
	if r, msg := s.prepareDir(); r != "" {
		fail(r, msg)
		markAll(sw, r)
		return firstErr
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
	if err := s.checkInputs(); err != nil {
		// Something was planted at a name the tools are handed: they
		// are not run, and the next sweep discovers and writes the files
		// afresh (a rename replaces what was planted).
		s.cacheFor = 0
		fail(ReasonStart, err.Error())
		markAll(sw, ReasonStart)
		return firstErr
	}
	errs := s.runIQE(ctx, false)
	ran := []*iqeRun{errs}
	data := &iqeRun{} // not run: never complete
	if errs.reason != ReasonTimeout {
		// A run that timed out used the whole sweep's deadline: the
		// sweep ends there, not one timeout later.
		data = s.runIQE(ctx, true)
		ran = append(ran, data)
	}
	sw.Queries = len(ran)
	for _, run := range ran {
		if run.reason != "" {
			fail(run.reason, run.msg)
		}
	}
	if msg := s.checkCoverage(errs, data); msg != "" {
		fail(ReasonUnparsable, msg)
		errs.complete, errs.reason = false, ReasonUnparsable // every port unknown
	}
	if errs.cacheFailed || data.cacheFailed {
		// The cache would not load (removed, or written by another
		// version): discover again next time.
		s.cacheFor = 0
	}
	// A sweep none of whose ports can be read (a run failed or timed
	// out: its deadline is spent) has no LIDs left to verify.
	if errs.complete && data.complete {
		if r, msg := s.smAfter(ctx, before); r != "" {
			// Not one value of these runs is trusted: the LIDs they
			// queried may have named other nodes.
			fail(r, msg)
			markAll(sw, r)
			return firstErr
		}
	}
	u := s.apply(sw, errs, data)
	if u.malformed > 0 {
		fail(ReasonUnparsable, fmt.Sprintf("ibqueryerrors: %d port lines with a field not in its format", u.malformed))
	}
	if u.twice > 0 {
		fail(ReasonUnparsable, fmt.Sprintf("ibqueryerrors: %d ports printed on more than one line (unknown: the lines cannot be told apart)", u.twice))
	}
	if u.outOfWidth > 0 {
		fail(ReasonUnparsable, fmt.Sprintf("ibqueryerrors: %d ports with a value wider than its counter's field", u.outOfWidth))
	}
	if u.undiscovered > 0 {
		fail(ReasonMAD, fmt.Sprintf("ibnetdiscover: %d ports of the scan are on nodes its discovery did not reach", u.undiscovered))
	}
	return firstErr
}

// checkInputs checks the files the tools are handed by name (the
// shard's cache and the threshold file) before they run.
func (s *Sweeper) checkInputs() error {
	if err := checkRegular(s.cacheFile); err != nil {
		return fmt.Errorf("fabric cache directory: %w", err)
	}
	// The threshold file is written before each errors run (a rename
	// replaces whatever is there); before the first it need not exist.
	// Something else planted there is refused for this sweep (it says the
	// directory was tampered with) and removed, never followed.
	th := filepath.Join(s.dir, "thresholds")
	if err := checkRegular(th); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(th)
		return fmt.Errorf("fabric cache directory: %w", err)
	}
	return nil
}

// timeout is what is left of the running sweep's deadline, the timeout of
// its next tool run: one deadline for the whole sweep, so a hung tool
// holds the published sweep for one Timeout, not one per run. Never 0
// (which would leave a run unbounded).
func (s *Sweeper) timeout() time.Duration {
	if s.deadline.IsZero() {
		return s.cfg.Timeout
	}
	return max(time.Until(s.deadline), time.Millisecond)
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
		if judged(CounterID(id)) {
			b.WriteString(c.Field + "=0\n")
		}
	}
	return b.String()
}()

// prepareDir makes the private cache directory when none was given and
// refuses one that anyone but the exporter's user can write: they could
// replace the threshold file (errors then read as real zeros) or the
// fabric cache.
func (s *Sweeper) prepareDir() (Reason, string) {
	if s.dir == "" {
		d, err := os.MkdirTemp("", "rdma_doctor-fabric-")
		if err != nil {
			return ReasonStart, fmt.Sprintf("no directory for the fabric cache (%v): set --collector.fabric.cache-dir to a writable directory", err)
		}
		s.dir, s.ownDir = d, true
	}
	if err := safeDir(s.dir); err != nil {
		return ReasonStart, err.Error()
	}
	return "", ""
}

// writeThresholds writes the threshold file anew before each errors run,
// in a directory checked again: a file changed since the last run is
// never read.
func (s *Sweeper) writeThresholds() (string, error) {
	if err := safeDir(s.dir); err != nil {
		return "", err
	}
	file := filepath.Join(s.dir, "thresholds")
	if err := writeFileAtomic(file, []byte(thresholds)); err != nil {
		return "", fmt.Errorf("writing the threshold file: %w (set --collector.fabric.cache-dir to a writable directory)", err)
	}
	return file, nil
}

// ensureCache discovers the fabric into the cache when there is none or
// the topology's nodes or LIDs changed, and writes this shard's part. ok
// says whether there is a cache to read against; a reason with ok is a
// discovery that reported errors but wrote a cache (part of the fabric).
func (s *Sweeper) ensureCache(ctx context.Context, topo *Fabric) (ok bool, r Reason, msg string) {
	fp := fingerprint(topo)
	if s.cache != nil && s.cacheFor == fp {
		return true, "", ""
	}
	// ibnetdiscover refuses to overwrite a cache: a new name each time.
	disc := filepath.Join(s.dir, fmt.Sprintf("discovered-%d", time.Now().UnixNano()))
	defer os.Remove(disc)
	args := append(append([]string{}, s.cfg.Local...), "--cache", disc)
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path: s.cfg.IBNetDiscover, Args: args, Timeout: s.timeout(),
		MaxOutput: s.cfg.MaxOutput, MaxStderr: 64 << 10, Reaper: s.cfg.Reaper,
		// Its topology text is not needed (the scan has one): read and
		// dropped, so it costs no memory.
		Stdout: func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err },
	})
	if err != nil {
		return false, Classify(err), "ibnetdiscover --cache: " + err.Error()
	}
	f, err := openRegular(disc)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		msg := "ibnetdiscover --cache wrote no cache"
		if line := ErrorLine(res.Stderr); line != "" {
			msg += ": " + line
		}
		return false, ReasonMAD, msg
	case err != nil:
		return false, ReasonStart, "ibnetdiscover --cache: " + err.Error()
	}
	c, err := ndcache.Parse(f, ndcache.MaxBytes)
	f.Close()
	if err != nil {
		return false, ReasonUnparsable, "ibnetdiscover --cache: " + err.Error()
	}
	var buf bytes.Buffer
	written, err := c.Filter(&buf, func(n *ndcache.Node) bool {
		g, ok := n.LineGUID(1)
		return ok && (n.Type == ndcache.TypeSwitch || s.cfg.CAs) && s.InShard(g)
	})
	if err != nil {
		return false, ReasonStart, "writing the fabric cache: " + err.Error()
	}
	expect := s.coverageOf(written)
	file := filepath.Join(s.dir, "fabric.cache")
	if err := writeFileAtomic(file, buf.Bytes()); err != nil {
		return false, ReasonStart, fmt.Sprintf("writing the fabric cache: %v (set --collector.fabric.cache-dir to a writable directory)", err)
	}
	s.cache, s.cacheFile, s.cacheFor, s.expect = c, file, fp, expect
	// What is remembered of nodes stays bounded by the fabric's.
	for g := range s.wide {
		if c.ByGUID(g) == nil {
			delete(s.wide, g)
		}
	}
	if line := ErrorLine(res.Stderr); line != "" {
		return true, ReasonMAD, "ibnetdiscover --cache: " + line
	}
	return true, "", ""
}

// coverage is what an ibqueryerrors run reads of a fabric cache: the
// nodes of the types it is asked for, and their ports other than port 0.
type coverage struct{ nodes, ports int }

// coverageOf returns the coverage of the cache file holding nodes (what
// filter wrote) handed to ibqueryerrors: the summary of a run that read it must say at least as
// much. ibqueryerrors counts every node of the asked types, read or not,
// and for each its ports 1 to N (the node's port count when one
// all-port query answers, the cached ports otherwise, port 0 too for an
// enhanced switch port 0), so the cached ports other than port 0 are a
// floor for both runs, but the two runs' port counts may differ.
func (s *Sweeper) coverageOf(nodes []*ndcache.Node) coverage {
	var cv coverage
	for _, nd := range nodes {
		if nd.Type != ndcache.TypeSwitch && (nd.Type != ndcache.TypeCA || !s.cfg.CAs) {
			continue // not asked for (--switch, --ca)
		}
		cv.nodes++
		for _, p := range nd.Ports {
			if p.Num > 0 {
				cv.ports++
			}
		}
	}
	return cv
}

// checkCoverage reports, as a failure message, a run whose summary says
// it checked fewer nodes or ports than the cache it read holds (it cannot
// say which it left out, so none of its answers are trusted), or two runs
// that disagree on the nodes they checked (both count every node of the
// cache, whatever its answers).
func (s *Sweeper) checkCoverage(errs, data *iqeRun) string {
	for _, run := range []*iqeRun{errs, data} {
		if run.complete && (run.sum.nodes < s.expect.nodes || run.sum.ports < s.expect.ports) {
			return fmt.Sprintf("%s: its summary says %d nodes and %d ports checked, but the fabric cache it read holds %d nodes and %d ports", run.what, run.sum.nodes, run.sum.ports, s.expect.nodes, s.expect.ports)
		}
	}
	if errs.complete && data.complete && errs.sum.nodes != data.sum.nodes {
		return fmt.Sprintf("ibqueryerrors: the errors run checked %d nodes, the data run %d, of the same fabric cache", errs.sum.nodes, data.sum.nodes)
	}
	return ""
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
	// twice holds the ports printed on more than one line: ibqueryerrors
	// prints one line a port, so a second is output it did not write
	// alone, or two nodes sharing a GUID (apply makes them unknown).
	twice map[PortKey]bool
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
	what        string // the command, for messages
}

// runIQE runs ibqueryerrors against the cache: errors (zero thresholds)
// or, with data, the data counters.
func (s *Sweeper) runIQE(ctx context.Context, data bool) *iqeRun {
	run := &iqeRun{lines: map[PortKey]*iqeLine{}, twice: map[PortKey]bool{}}
	args := append(append([]string{}, s.cfg.Local...), "--load-cache", s.cacheFile, "--switch")
	if s.cfg.CAs {
		args = append(args, "--ca")
	}
	what := "ibqueryerrors"
	if data {
		args = append(args, "--counters")
		what += " --counters"
	} else {
		file, err := s.writeThresholds()
		if err != nil {
			run.reason, run.msg = ReasonStart, what+": "+err.Error()
			return run
		}
		args = append(args, "--threshold-file", file)
	}
	run.what = what
	var junk int
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path: s.cfg.IBQueryErrors, Args: args, Timeout: s.timeout(),
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
				if run.lines[k] != nil {
					run.twice[k] = true
					return
				}
				run.lines[k] = l
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
		run.reason, run.msg = Classify(err), what+": "+err.Error()
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
	case !data && zeroThresholds(run.sum.thresholds) != nil:
		// A counter below a non-zero threshold is not printed and would
		// read as a real zero.
		run.reason, run.msg = ReasonUnparsable, what+": the zero thresholds did not take: "+zeroThresholds(run.sum.thresholds).Error()
		return run
	case unattributed > 0 || run.sum.pmaFailures > len(fails):
		run.reason, run.msg = ReasonMAD, fmt.Sprintf("%s: %d failed PMA queries it did not name a port for", what, max(unattributed, run.sum.pmaFailures-len(fails)))
		return run
	}
	if lid, ok := s.unplaced(fails); ok {
		// The query of some node failed and which ports it leaves
		// unread cannot be told: none of the run is trusted.
		run.reason, run.msg = ReasonMAD, fmt.Sprintf("%s: a failed PMA query names LID %d, which no node of the fabric cache answers on", what, lid)
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

// unplaced returns the LID of the first failed query that names no
// node of the cache.
func (s *Sweeper) unplaced(fails []iqeFailure) (lid int, ok bool) {
	for _, f := range fails {
		if s.cache.ByLID(f.lid) == nil {
			return f.lid, true
		}
	}
	return 0, false
}

// failures indexes the queries a run named as failed by node and port
// (one map lookup a port, whatever the number of failures).
type failures struct {
	nodes map[*ndcache.Node]bool
	ports map[*ndcache.Node]map[int]bool
}

func (run *iqeRun) failures(c *ndcache.Cache) failures {
	f := failures{nodes: map[*ndcache.Node]bool{}, ports: map[*ndcache.Node]map[int]bool{}}
	for _, x := range run.fails {
		nd := c.ByLID(x.lid)
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
func (f failures) failed(nd *ndcache.Node, num int) bool { return f.nodes[nd] || f.ports[nd][num] }

// unread counts the ports apply left unknown because of what the runs
// printed for them (each cause is one failure of the sweep).
type unread struct {
	// malformed: a line with a field not in its format; twice: a port
	// printed on two lines; outOfWidth: a fixed-width value wider than
	// its field; undiscovered: a node the discovery did not reach.
	malformed, twice, outOfWidth, undiscovered int
}

// apply fills the swept ports from the two runs. A port is read when both
// runs completed, neither named a failed query for it or its node, the
// data run printed its line, and neither run printed a line for it that
// cannot be trusted (malformed, twice, a value out of its field's
// width); otherwise it is unknown and its values absent.
func (s *Sweeper) apply(sw *Sweep, errs, data *iqeRun) (u unread) {
	c := s.cache
	for _, l := range errs.lines {
		for id := range NumCounters {
			if l.seen[id] && l.wide[id] && Counters[id].Error {
				if nd := c.ByPortGUID(l.guid); nd != nil {
					s.wide[nd.GUID] = true
				}
			}
		}
	}
	errFails, dataFails := errs.failures(c), data.failures(c)
	for i := range sw.Ports {
		p := &sw.Ports[i]
		nd := c.ByPortGUID(p.GUID)
		reason := Reason("")
		var dl *iqeLine
		ek := PortKey{GUID: p.GUID, Port: p.Port}
		var dk PortKey
		switch {
		case !errs.complete:
			reason = orReason(errs.reason, ReasonUnparsable)
		case !data.complete:
			reason = orReason(data.reason, ReasonUnparsable)
		case nd == nil:
			// Not in the cache: the discovery did not reach it.
			reason = ReasonMAD
			u.undiscovered++
		case errFails.failed(nd, p.Port) || dataFails.failed(nd, p.Port):
			reason = ReasonMAD
		default:
			dk = PortKey{GUID: nd.GUID, Port: p.Port}
			dl = data.lines[dk]
			if dl == nil {
				reason = ReasonUnparsable
			}
		}
		el := errs.lines[ek]
		if reason == "" {
			// Two lines for one port are not merged: which one is the
			// port's (or whether they are two ports sharing a GUID)
			// cannot be told, and either may hide the other's errors.
			switch {
			case el != nil && el.malformed || dl.malformed:
				reason = ReasonUnparsable
				u.malformed++
			case errs.twice[ek] || data.twice[dk]:
				reason = ReasonUnparsable
				u.twice++
			case el != nil && el.outOfWidth():
				reason = ReasonUnparsable
				u.outOfWidth++
			}
		}
		if reason != "" {
			p.Unknown, p.Reason = true, reason
			continue
		}
		for id := range NumCounters {
			switch {
			case judged(CounterID(id)):
				// A printed value says its width; an unprinted zero has
				// the width the node's PMA prints its errors in.
				fixed := fixedBits(CounterID(id))
				v := Value{Bits: fixed, Present: true}
				if s.wide[nd.GUID] {
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
	return u
}

// Classify maps a fabric tool's run error to a Reason.
func Classify(err error) Reason {
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
	case errors.Is(err, ErrUnparsable):
		return ReasonUnparsable
	}
	return ReasonMAD
}

// ErrorLine returns the first line of standard error that reports a
// failure: libibmad prints its warnings and errors as "ibwarn: ",
// "iberror: " and "ibpanic: "; umad2sim's "sim_connect: attached as
// client" notice is not one.
func ErrorLine(stderr []byte) string {
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
