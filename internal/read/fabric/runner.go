// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
)

// RunnerConfig configures the background iblinkinfo runner.
type RunnerConfig struct {
	// Path is the iblinkinfo executable (default "iblinkinfo").
	Path string
	// Args are its arguments (default Args("", 0)).
	Args []string
	// Interval between scans (default 5m): a scan sends MADs to every
	// port of the fabric.
	Interval time.Duration
	// Timeout of one scan (default 2m).
	Timeout time.Duration
	// MaxOutput bounds iblinkinfo's standard output (default
	// DefaultMaxOutput); past it the scan is killed and fails.
	MaxOutput int
	Logger    *slog.Logger
	Now       func() time.Time
	// Reaper, when set, starts iblinkinfo and kills what it leaves behind.
	Reaper *subprocess.Reaper
	// Done, when set, is called after each scan that ran to its end (not
	// one cut short by its context), once Status returns it.
	Done func()
	// Names, when set, replaces node descriptions in every scan
	// (--collector.fabric.node-name-map), so series and findings carry
	// them.
	Names NameMap
	// KeepLost is how long a switch that a scan no longer prints keeps
	// its ports, Stale (default DefaultKeepLost).
	KeepLost time.Duration
}

// DefaultKeepLost is how long a switch seen in an earlier scan and missing
// from the latest stays exported: iblinkinfo prints nothing of a switch
// whose every link is cut (it cannot reach it), so without this its
// series would vanish with the scan and the sweep reading clean. Six
// scans at the default interval; past it the switch is taken as removed.
const DefaultKeepLost = 30 * time.Minute

// DefaultMaxOutput is the default cap on one scan's output. It leaves
// about three times the --line output of a 40,000-link fabric with the
// longest node descriptions (TestDefaultMaxOutputFitsLargeFabric), so a
// real fabric fits; and since the parse keeps a record per link, it also
// bounds what a runaway iblinkinfo can make the exporter hold
// (docs/subnet-manager.md, "Fabric", has the figures). The fabric
// collector is off by default and meant for one host per fabric; a
// smaller cap can be set in RunnerConfig.
const DefaultMaxOutput = 64 << 20

// Status is the latest scan result.
type Status struct {
	// Fabric is the latest successful scan; nil before one.
	Fabric *Fabric
	// OK is true when the latest scan succeeded; Err is its error otherwise.
	OK  bool
	Err error
	// Scans and Failures count scans since start.
	Scans, Failures uint64
	LastScan        time.Time
	LastSuccess     time.Time
	Duration        time.Duration
}

// Runner scans the fabric in the background; Status never waits for a scan.
type Runner struct {
	cfg   RunnerConfig
	runMu sync.Mutex
	mu    sync.Mutex
	st    Status
	// scanned is closed by the first successful scan.
	scanned     chan struct{}
	scannedOnce sync.Once
	// lost holds when each switch missing from the scans was first
	// missed (bounded by the switches of the fabric; owned by RunOnce).
	lost map[uint64]time.Time
}

// NewRunner returns a runner; call Run to start it.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Path == "" {
		cfg.Path = "iblinkinfo"
	}
	if cfg.Args == nil {
		cfg.Args = Args("", 0)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeepLost <= 0 {
		cfg.KeepLost = DefaultKeepLost
	}
	return &Runner{cfg: cfg, scanned: make(chan struct{}), lost: map[uint64]time.Time{}}
}

// Scanned is closed once a scan has given a fabric (a successful or a
// partial one): the counter sweep waits for it instead of a whole
// interval.
func (r *Runner) Scanned() <-chan struct{} { return r.scanned }

// Run scans now and then every Interval until ctx ends.
func (r *Runner) Run(ctx context.Context) { subprocess.Every(ctx, r.cfg.Interval, r.RunOnce) }

// RunOnce runs one scan synchronously. The output is parsed while
// iblinkinfo writes it; a failed scan keeps the previous fabric.
func (r *Runner) RunOnce(ctx context.Context) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	var fab *Fabric
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path:      r.cfg.Path,
		Args:      r.cfg.Args,
		Timeout:   r.cfg.Timeout,
		MaxOutput: r.cfg.MaxOutput,
		Reaper:    r.cfg.Reaper,
		Stdout: func(rd io.Reader) error {
			var perr error
			fab, perr = Parse(rd)
			r.cfg.Names.Apply(fab)
			return perr
		},
	})
	if ctx.Err() != nil {
		return
	}
	// partial: iblinkinfo exited 0 with port lines but reported an error
	// (a node that did not answer). The scan fails, but its fabric is
	// exported: it is the fresher view of every port it did reach (a port
	// that went down must show), where keeping the previous scan would
	// freeze the fabric for as long as one node stays silent.
	partial := false
	if err == nil {
		err = exitZeroLies(res.Stderr, fab)
		partial = err != nil && fab != nil && fab.Ports > 0
	}
	now := r.cfg.Now()
	r.mu.Lock()
	// A complete scan that no longer prints a switch: kept, and the scan
	// is not clean while it is (exported as partial).
	vanished := false
	if err == nil {
		if n, ports := r.keepVanished(fab, r.st.Fabric, now); n > 0 {
			err = fmt.Errorf("iblinkinfo printed none of the %d ports of %d switches seen in the last %v (every link cut, or powered off): kept as unknown", ports, n, r.cfg.KeepLost)
			partial, vanished = true, true
		}
	}
	wasOK, hadScan, prevErr := r.st.OK, r.st.Scans > 0, r.st.Err
	r.st.Scans++
	r.st.LastScan = now
	r.st.Duration = res.Duration
	if err != nil {
		r.st.OK, r.st.Err = false, err
		r.st.Failures++
		if partial {
			if !vanished {
				fab.keepLost(r.st.Fabric)
			}
			r.st.Fabric = fab
		}
	} else {
		r.st.OK, r.st.Err = true, nil
		r.st.Fabric = fab
		r.st.LastSuccess = now
	}
	r.mu.Unlock()
	if err == nil || partial {
		r.scannedOnce.Do(func() { close(r.scanned) })
	}
	if r.cfg.Done != nil {
		r.cfg.Done()
	}

	switch {
	case err != nil && (wasOK || !hadScan || prevErr == nil || prevErr.Error() != err.Error()):
		r.cfg.Logger.Warn("iblinkinfo failed; rdma_fabric_scan_success is 0 and the previous scan's links stay exported", "err", err)
	case err != nil:
		r.cfg.Logger.Debug("iblinkinfo still failing", "err", err)
	case fab.Malformed > 0:
		r.cfg.Logger.Warn("iblinkinfo: skipped malformed lines", "count", fab.Malformed, "first_lines", fab.MalformedLines)
	case hadScan && !wasOK:
		r.cfg.Logger.Info("iblinkinfo succeeds again", "fabric", fab.Describe())
	default:
		r.cfg.Logger.Debug("fabric scanned", "fabric", fab.Describe(), "duration", res.Duration)
	}
}

// exitZeroLies fails a scan that exited 0 but is not one: iblinkinfo
// exits 0 on a partial fabric (a node that did not answer) and after
// printing only an error, so its standard error is read, and a scan
// without one port line is no fabric (an empty fabric still has the
// local port). RunOnce exports a partial scan's fabric all the same.
func exitZeroLies(stderr []byte, fab *Fabric) error {
	if line := ErrorLine(stderr); line != "" {
		return fmt.Errorf("iblinkinfo exited 0 but reported an error: %s", line)
	}
	if fab == nil || fab.Ports == 0 {
		return errors.New("iblinkinfo exited 0 without printing one port line")
	}
	return nil
}

// keepLost adds to a partial scan the port lines of the previous fabric
// that this scan did not print, marked Stale: a node that stopped
// answering keeps its ports (and their series, the sweep marking them
// unknown) instead of vanishing.
func (f *Fabric) keepLost(prev *Fabric) {
	if prev == nil {
		return
	}
	seen := make(map[PortKey]bool, len(f.PortLines))
	for i := range f.PortLines {
		seen[PortKey{f.PortLines[i].GUID, f.PortLines[i].Port}] = true
	}
	n := len(f.PortLines)
	for _, p := range prev.PortLines {
		if !seen[PortKey{p.GUID, p.Port}] {
			p.Stale = true
			f.PortLines = append(f.PortLines, p)
		}
	}
	if len(f.PortLines) == n {
		return
	}
	sortPortLines(f.PortLines)
	// A switch of which the scan printed one port is still a switch.
	lines := map[uint64]int{}
	for i := range f.PortLines {
		lines[f.PortLines[i].GUID]++
	}
	for i := range f.PortLines {
		if lines[f.PortLines[i].GUID] > 1 {
			f.PortLines[i].Switch = true
		}
	}
}

// keepVanished adds to a complete scan f the port lines of the switches
// of prev that f does not print, marked Stale, for KeepLost from when a
// scan first missed each; it returns how many switches and ports it kept.
// A switch printed again, or missed for longer, is forgotten.
func (r *Runner) keepVanished(f, prev *Fabric, now time.Time) (switches, ports int) {
	if prev == nil {
		return 0, 0
	}
	printed := make(map[uint64]bool, len(f.PortLines))
	for i := range f.PortLines {
		printed[f.PortLines[i].GUID] = true
	}
	missed, kept := map[uint64]bool{}, map[uint64]bool{}
	n := len(f.PortLines)
	for _, p := range prev.PortLines {
		if !p.Switch || printed[p.GUID] {
			continue
		}
		missed[p.GUID] = true
		since, ok := r.lost[p.GUID]
		if !ok {
			since = now
			r.lost[p.GUID] = now
		}
		if now.Sub(since) > r.cfg.KeepLost {
			continue // removed: this scan drops it, the next forgets it
		}
		p.Stale = true
		f.PortLines = append(f.PortLines, p)
		kept[p.GUID] = true
	}
	// Printed again, or dropped by the scan before: forgotten.
	for g := range r.lost {
		if !missed[g] {
			delete(r.lost, g)
		}
	}
	if len(f.PortLines) > n {
		sortPortLines(f.PortLines)
	}
	return len(kept), len(f.PortLines) - n
}

// Status returns the latest result. The Fabric it points to is never
// modified after the scan that made it.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}
