// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/subprocess"
)

// SweeperConfig configures the background counter sweep.
type SweeperConfig struct {
	// Path is the perfquery executable (default "perfquery").
	Path string
	// Local are the arguments that pick the local port perfquery sends
	// from (-C, -P), as for iblinkinfo.
	Local []string
	// Interval between sweeps (default 1m). A sweep still running when
	// the next is due makes that one skipped, never stacked.
	Interval time.Duration
	// Timeout of one perfquery run, i.e. one node's ports (default 30s).
	Timeout time.Duration
	// Concurrency is the number of perfquery runs at once (default 4:
	// ibsim serves at most 10 clients, and a real SM's PMA traffic is
	// better spread than bursty).
	Concurrency int
	// MaxOutput bounds one perfquery run's standard output (default
	// DefaultPerfqueryMaxOutput); past it the run is killed and its ports
	// are unknown.
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
	Ready  <-chan struct{}
	Logger *slog.Logger
	Now    func() time.Time
	Reaper *subprocess.Reaper
}

// DefaultPerfqueryMaxOutput bounds one perfquery run: a PortCounters block
// is about 700 bytes, so 254 ports are under 200 kB; 1 MiB leaves five
// times that.
const DefaultPerfqueryMaxOutput = 1 << 20

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
	// addl holds the GUIDs of the nodes whose PortCountersExtended
	// answered every counter on every port last time (CapabilityMask2
	// IsAdditionalPortCountersExtendedSupported: NVIDIA switches): their
	// next sweep asks -x alone, one perfquery run instead of two. A node
	// whose -x answer falls short is asked both ways again.
	addl sync.Map // uint64 -> struct{}
}

// NewSweeper returns a sweeper; call Run to start it.
func NewSweeper(cfg SweeperConfig) *Sweeper {
	if cfg.Path == "" {
		cfg.Path = "perfquery"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultPerfqueryMaxOutput
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
	return &Sweeper{cfg: cfg, st: SweepStatus{Failures: map[Reason]uint64{}}}
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
	defer s.wg.Wait()
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

// node is one perfquery target: a node's LID and the ports to read, as
// indexes into the sweep's Ports.
type node struct {
	lid   int
	first int // index of its first port in Sweep.Ports
	n     int
}

// SweepOnce runs one sweep synchronously over the latest topology. With
// no topology yet it does nothing: the next tick tries again.
func (s *Sweeper) SweepOnce(ctx context.Context) {
	topo := s.cfg.Topology()
	if topo == nil {
		s.cfg.Logger.Debug("counter sweep waits for the first topology scan")
		return
	}
	start := s.cfg.Now()
	began := time.Now()
	sw := &Sweep{Start: start, Topology: topo, Failures: map[Reason]int{}}
	nodes := s.plan(topo, sw)

	var mu sync.Mutex
	// msgs are the nodes' first failures, by node: the log names the
	// first failing node in topology order, the same one each sweep
	// whatever the goroutines' order, so a repeating failure logs once.
	msgs := make([]string, len(nodes))
	sem := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, nd := range nodes {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int, nd node) {
			defer wg.Done()
			defer func() { <-sem }()
			ports := sw.Ports[nd.first : nd.first+nd.n]
			fails, msg := s.queryNode(ctx, nd.lid, ports)
			mu.Lock()
			defer mu.Unlock()
			sw.Queries++
			for _, r := range fails {
				sw.Failures[r]++
			}
			msgs[i] = msg
		}(i, nd)
	}
	wg.Wait()
	var firstErr string
	for _, m := range msgs {
		if m != "" {
			firstErr = m
			break
		}
	}
	if ctx.Err() != nil {
		return // shutting down: not a sweep
	}
	// Forget the nodes that left the topology: addl stays bounded by
	// the fabric, not by every node ever seen.
	swept := make(map[uint64]bool, len(nodes))
	for _, nd := range nodes {
		if nd.n > 0 {
			swept[sw.Ports[nd.first].GUID] = true
		}
	}
	s.addl.Range(func(k, _ any) bool {
		if !swept[k.(uint64)] {
			s.addl.Delete(k)
		}
		return true
	})
	for i := range sw.Ports {
		if sw.Ports[i].Unknown {
			sw.Unknown++
		}
	}
	sw.Duration = time.Since(began)

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
// other than port 0; CA ports only with CAs) and returns one query per
// node. Ports of a node without a LID are unknown without a query.
func (s *Sweeper) plan(topo *Fabric, sw *Sweep) []node {
	var nodes []node
	lines := topo.PortLines
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && lines[j].GUID == lines[i].GUID {
			j++
		}
		g := lines[i:j]
		i = j
		if !g[0].Switch && !s.cfg.CAs || !s.InShard(g[0].GUID) {
			continue
		}
		nd := node{lid: g[0].LID, first: len(sw.Ports)}
		for _, p := range g {
			if p.Port == 0 {
				continue
			}
			sw.Ports = append(sw.Ports, PortCounters{PortLine: p})
		}
		nd.n = len(sw.Ports) - nd.first
		if nd.n > 0 {
			nodes = append(nodes, nd)
		}
	}
	return nodes
}

// queryNode reads the ports of one node (same LID) with perfquery -l, and
// with -x where the PMA advertises PortCountersExtended. A port it cannot
// read is marked unknown; it returns the reasons of the failed runs and
// the first failure's message.
func (s *Sweeper) queryNode(ctx context.Context, lid int, ports []PortCounters) ([]Reason, string) {
	if lid > 0 && len(ports) > 0 {
		guid := ports[0].GUID
		if _, ok := s.addl.Load(guid); ok {
			if fails, msg, ok := s.queryExtendedOnly(ctx, lid, ports); ok {
				return fails, msg
			}
			s.addl.Delete(guid)
			for i := range ports {
				ports[i].Values = [NumCounters]Value{}
				ports[i].Unknown, ports[i].Reason = false, ""
			}
		}
	}
	fails, msg, extended := s.queryBoth(ctx, lid, ports)
	if len(fails) == 0 && len(ports) > 0 && len(extended) == len(ports) {
		all := true
		for i := range ports {
			if b := extended[ports[i].Port]; b == nil || !b.completeAddl() {
				all = false
				break
			}
		}
		if all {
			s.addl.Store(ports[0].GUID, struct{}{})
		}
	}
	return fails, msg
}

// queryExtendedOnly reads a node's ports with one perfquery -x run, for a
// node whose PMA answered every counter in PortCountersExtended before.
// It is false, with ports untouched, when a port's answer no longer
// carries every counter (the PMA was replaced or reconfigured): then the
// node is asked both ways. A run that fails leaves the ports unknown, as
// the two runs would, rather than asking a failing node twice.
func (s *Sweeper) queryExtendedOnly(ctx context.Context, lid int, ports []PortCounters) ([]Reason, string, bool) {
	nums := make([]int, len(ports))
	for i := range ports {
		nums[i] = ports[i].Port
	}
	blocks, reason, msg := s.run(ctx, lid, nums, true)
	for i := range ports {
		if b := blocks[ports[i].Port]; b != nil && !b.completeAddl() {
			return nil, "", false
		}
	}
	var fails []Reason
	if reason != "" {
		fails = append(fails, reason)
	}
	missing := 0
	for i := range ports {
		p := &ports[i]
		b := blocks[p.Port]
		if b == nil {
			p.Unknown, p.Reason = true, orReason(reason, ReasonUnparsable)
			missing++
			continue
		}
		b.applyAddl(p)
	}
	if reason == "" && missing > 0 {
		fails = append(fails, ReasonUnparsable)
		msg = fmt.Sprintf("perfquery -x LID %d: no complete PortCountersExtended answer for %d of %d ports", lid, missing, len(ports))
	}
	return fails, msg, true
}

// queryBoth reads a node's ports with PortCounters, then
// PortCountersExtended where the PMA advertises it; it returns the
// extended answers too, so queryNode can tell whether -x alone would do.
func (s *Sweeper) queryBoth(ctx context.Context, lid int, ports []PortCounters) ([]Reason, string, map[int]*pqBlock) {
	if lid <= 0 {
		for i := range ports {
			ports[i].Unknown, ports[i].Reason = true, ReasonMAD
		}
		return []Reason{ReasonMAD}, fmt.Sprintf("LID %d: no LID assigned (no SM sweep?)", lid), nil
	}
	var fails []Reason
	var msg string
	fail := func(r Reason, m string) {
		fails = append(fails, r)
		if msg == "" {
			msg = m
		}
	}
	nums := make([]int, len(ports))
	for i := range ports {
		nums[i] = ports[i].Port
	}
	basic, reason, m := s.run(ctx, lid, nums, false)
	if reason != "" {
		fail(reason, m)
	}
	var ext []int
	for i := range ports {
		p := &ports[i]
		b := basic[p.Port]
		if b == nil || !applyBasic(p, b) {
			p.Unknown, p.Reason = true, orReason(reason, ReasonUnparsable)
			continue
		}
		if b.extendedAdvertised() {
			ext = append(ext, p.Port)
		}
	}
	if reason == "" && countUnknown(ports) > 0 {
		fail(ReasonUnparsable, fmt.Sprintf("perfquery LID %d: no complete PortCounters answer for %d of %d ports", lid, countUnknown(ports), len(ports)))
	}
	if len(ext) == 0 || ctx.Err() != nil {
		return fails, msg, nil
	}
	extended, xreason, xm := s.run(ctx, lid, ext, true)
	if xreason != "" {
		fail(xreason, xm)
	}
	missing := 0
	for i := range ports {
		p := &ports[i]
		if p.Unknown || basic[p.Port] == nil || !basic[p.Port].extendedAdvertised() {
			continue
		}
		b := extended[p.Port]
		if b == nil || !applyExtended(p, b) {
			// The 32-bit data counters are not exported instead: a
			// series must keep one width, or its rate jumps.
			for _, id := range extendedData {
				p.Values[id] = Value{}
			}
			p.Unknown, p.Reason = true, orReason(xreason, ReasonUnparsable)
			missing++
		}
	}
	if xreason == "" && missing > 0 {
		fail(ReasonUnparsable, fmt.Sprintf("perfquery -x LID %d: no complete PortCountersExtended answer for %d ports", lid, missing))
	}
	return fails, msg, extended
}

func orReason(r, def Reason) Reason {
	if r != "" {
		return r
	}
	return def
}

func countUnknown(ports []PortCounters) int {
	n := 0
	for i := range ports {
		if ports[i].Unknown {
			n++
		}
	}
	return n
}

// run runs one perfquery over ports of lid and returns the complete
// blocks it printed for them, by port. reason is non-empty when the run
// failed: an error exit, a timeout, too much output, or error text on
// standard error even with exit status 0 (libibmad reports a failed MAD
// there and perfquery -l stops at the first one).
func (s *Sweeper) run(ctx context.Context, lid int, ports []int, extended bool) (map[int]*pqBlock, Reason, string) {
	args := append([]string{}, s.cfg.Local...)
	if extended {
		args = append(args, "-x")
	}
	args = append(args, "-l", strconv.Itoa(lid), portList(ports))
	want := make(map[int]bool, len(ports))
	for _, p := range ports {
		want[p] = true
	}
	blocks := make(map[int]*pqBlock, len(ports))
	var junk int
	var errText string
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path:      s.cfg.Path,
		Args:      args,
		Timeout:   s.cfg.Timeout,
		MaxOutput: s.cfg.MaxOutput,
		MaxStderr: 64 << 10,
		Reaper:    s.cfg.Reaper,
		Stdout: func(r io.Reader) error {
			var perr error
			junk, errText, perr = parsePerfquery(r, func(b *pqBlock) {
				// Only the blocks asked for, once each: memory stays
				// bounded by the ports, whatever the output.
				if b.lid == lid && b.extended == extended && want[b.port] && blocks[b.port] == nil {
					blocks[b.port] = b
				}
			})
			return perr
		},
	})
	what := "perfquery LID " + strconv.Itoa(lid)
	if extended {
		what = "perfquery -x LID " + strconv.Itoa(lid)
	}
	if err != nil {
		return blocks, classify(err), err.Error()
	}
	if line := errorLine(res.Stderr); line != "" {
		return blocks, ReasonMAD, what + ": " + line
	}
	if errText != "" {
		return blocks, ReasonMAD, what + ": " + errText
	}
	if junk > 0 && len(blocks) < len(ports) {
		return blocks, ReasonUnparsable, fmt.Sprintf("%s: %d lines not in perfquery's format", what, junk)
	}
	return blocks, "", ""
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
	case strings.Contains(err.Error(), "reading perfquery output"):
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
				s := string(pidTag(l))
				if len(s) > 300 {
					s = s[:300] + "..."
				}
				return s
			}
		}
	}
	return ""
}

// pidTag drops libibmad's "[pid]" tag so log lines repeat identically.
func pidTag(l []byte) []byte {
	if i := bytes.Index(l, []byte("] ")); i > 0 {
		if j := bytes.LastIndexByte(l[:i], '['); j >= 0 {
			if _, err := strconv.Atoi(string(l[j+1 : i])); err == nil {
				return append(append([]byte{}, l[:j]...), l[i+2:]...)
			}
		}
	}
	return l
}

// portList formats ports for perfquery: "1-36" when contiguous and
// ascending, a comma-separated list otherwise.
func portList(ports []int) string {
	contiguous := true
	for i := 1; i < len(ports); i++ {
		if ports[i] != ports[i-1]+1 {
			contiguous = false
			break
		}
	}
	if len(ports) > 1 && contiguous {
		return strconv.Itoa(ports[0]) + "-" + strconv.Itoa(ports[len(ports)-1])
	}
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ",")
}
