// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package portwatch samples the logical and physical state of every RDMA
// port often (default every second) and keeps what a scrape every 15 s and
// an 8-bit link_downed counter miss: each transition, how long the port was
// down, and the down-up cycles of a recent window, so a link that flaps
// between two scrapes is seen.
//
// A round costs two pread calls per port on descriptors kept open
// (hostfs.Attr); the port list is re-read every RescanEvery rounds and
// whenever a port's files vanish (a device re-registered).
package portwatch

import (
	"context"
	"errors"
	"io/fs"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
)

// Defaults.
const (
	DefaultInterval = time.Second
	// RescanEvery is how many rounds pass between two reads of the port
	// list: a hot-plugged device is watched within ten seconds.
	RescanEvery = 10
	// maxCycles bounds the down-up cycles kept per port, whatever the
	// window: a port flapping every second for ten minutes is 600.
	maxCycles = 1024
)

// Options configure a Watcher.
type Options struct {
	// Sys is the sysfs root (class/infiniband is read below it).
	Sys hostfs.FS
	// Keep selects the devices watched (the host's device filter); nil
	// keeps all.
	Keep func(device string) bool
	// Interval between two rounds; 0 means DefaultInterval.
	Interval time.Duration
	// Window is how long down-up cycles are kept (diagnose's flap window).
	Window time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// StateLabels are the states a transition can go to, the values of the
// "to" label of rdma_port_state_transitions_total: the five port states
// (ib_port_state 1 to 5, in order) and "other", a bounded set.
var StateLabels = []string{"down", "init", "armed", "active", "active_defer", "other"}

// StateName is the label value of a state number.
func StateName(v int) string {
	if v >= infiniband.StateDown && v <= infiniband.StateActiveDefer {
		return StateLabels[v-infiniband.StateDown]
	}
	return StateLabels[len(StateLabels)-1]
}

// History is what the watcher knows of one port.
type History struct {
	Device string
	Port   int
	// State and PhysState are the last values read.
	State, PhysState infiniband.Enum
	// Changed is when State last changed (the first read counts as a
	// change); zero before the first read.
	Changed time.Time
	// Transitions counts the State changes since the watch began, by the
	// state entered (StateName).
	Transitions map[string]uint64
	// DownSeconds is the time the port was not ACTIVE after it had been
	// ACTIVE once: a spare port that never came up does not count.
	DownSeconds float64
	// WasActive is set once the port was seen ACTIVE.
	WasActive bool
	// DownSince is when the port left ACTIVE, zero while it is ACTIVE or
	// before it ever was.
	DownSince time.Time
	// Cycles are the times the port came back to ACTIVE after leaving it,
	// within the window, oldest first.
	Cycles []time.Time
	// Err is the last read's error, nil when the last round read both
	// files.
	Err error
}

// Watcher samples port states. Its methods are safe for concurrent use.
type Watcher struct {
	opts Options
	// mu guards ports and the histories; round is the sampler's own.
	mu    sync.Mutex
	ports map[key]*watched
	round int
	// rounds counts completed rounds, and busy the time they took: the
	// watcher's own cost.
	rounds uint64
	busy   time.Duration
}

type key struct {
	device string
	port   int
}

type watched struct {
	h                History
	state, physState *hostfs.Attr
	lastSeen         time.Time
}

// New returns a watcher; Run starts it.
func New(o Options) *Watcher {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Watcher{opts: o, ports: map[key]*watched{}}
}

// Interval is the time between two rounds.
func (w *Watcher) Interval() time.Duration { return w.opts.Interval }

// Run samples every Interval until ctx ends, then closes what it holds.
// first, if not nil, is closed after the first round.
func (w *Watcher) Run(ctx context.Context, first chan<- struct{}) {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	defer w.close()
	for {
		w.Sample()
		if first != nil {
			close(first)
			first = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample runs one round: re-reads the port list when it is due, then each
// port's state and phys_state. The files are read without the lock, so a
// read stuck in a wedged driver stops the sampler, never a scrape asking
// for the history.
func (w *Watcher) Sample() {
	began := time.Now()
	if w.round%RescanEvery == 0 {
		w.rescan()
	}
	w.round++
	w.mu.Lock()
	ports := make([]*watched, 0, len(w.ports))
	for _, p := range w.ports {
		ports = append(ports, p)
	}
	w.mu.Unlock()
	vanished := false
	for _, p := range ports {
		st, ps, err := p.read()
		now := w.opts.Now()
		w.mu.Lock()
		w.apply(p, st, ps, err, now)
		w.mu.Unlock()
		vanished = vanished || errors.Is(err, fs.ErrNotExist)
	}
	if vanished {
		w.rescan()
	}
	w.mu.Lock()
	w.rounds++
	w.busy += time.Since(began)
	w.mu.Unlock()
}

// rescan lists the ports below class/infiniband: new ones are added,
// vanished ones dropped (their series go with them).
func (w *Watcher) rescan() {
	found := map[key]string{}
	names, err := infiniband.DeviceNames(w.opts.Sys, w.opts.Keep)
	if err != nil && !errors.Is(err, infiniband.ErrNoClass) {
		return // keep what we have; the next rescan tries again
	}
	for _, name := range names { // none without the RDMA core
		ports, err := w.opts.Sys.ReadDir(infiniband.ClassDir + "/" + name + "/ports")
		if err != nil {
			continue
		}
		for _, pe := range ports {
			if n, err := strconv.Atoi(pe.Name()); err == nil && n >= 1 {
				found[key{name, n}] = infiniband.ClassDir + "/" + name + "/ports/" + pe.Name() + "/"
			}
		}
	}
	now := w.opts.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, dir := range found {
		if _, ok := w.ports[k]; ok {
			continue
		}
		w.ports[k] = &watched{
			h:         History{Device: k.device, Port: k.port, Transitions: map[string]uint64{}},
			state:     hostfs.NewAttr(w.opts.Sys, dir+"state"),
			physState: hostfs.NewAttr(w.opts.Sys, dir+"phys_state"),
			lastSeen:  now,
		}
	}
	for k, p := range w.ports {
		if _, ok := found[k]; !ok {
			p.state.Close()
			p.physState.Close()
			delete(w.ports, k)
		}
	}
}

// read reads one port's state and phys_state (the latter zero when it
// cannot be read: state alone decides).
func (p *watched) read() (st, ps infiniband.Enum, err error) {
	// 64 bytes: hostfs.Attr allocates a 4 KiB buffer for anything smaller,
	// which was 74 KB a round on the DGX host (BenchmarkPortwatchRound).
	// The longest value, "6: Link Error Recovery\n", is 23.
	var buf [64]byte
	b, err := p.state.Read(buf[:0])
	if err == nil {
		st, err = infiniband.ParseEnum(string(b))
	}
	if err != nil {
		return st, ps, err
	}
	if b, err := p.physState.Read(buf[:0]); err == nil {
		ps, _ = infiniband.ParseEnum(string(b))
	}
	return st, ps, nil
}

// apply records one read of a port at now.
func (w *Watcher) apply(p *watched, st, ps infiniband.Enum, err error, now time.Time) {
	h := &p.h
	elapsed := now.Sub(p.lastSeen)
	p.lastSeen = now
	if err != nil {
		h.Err = err
		return
	}
	h.Err, h.PhysState = nil, ps
	first := h.Changed.IsZero()
	if !first && h.State.Value != infiniband.StateActive && h.WasActive {
		h.DownSeconds += elapsed.Seconds()
	}
	if first || st.Value != h.State.Value {
		if !first {
			h.Transitions[StateName(st.Value)]++
			switch {
			case h.State.Value == infiniband.StateActive:
				h.DownSince = now
			case st.Value == infiniband.StateActive && h.WasActive:
				h.Cycles = append(h.Cycles, now)
			}
		}
		h.State, h.Changed = st, now
	}
	if st.Value == infiniband.StateActive {
		h.WasActive = true
		h.DownSince = time.Time{}
	}
	h.Cycles = trim(h.Cycles, now.Add(-w.opts.Window))
}

// trim drops the cycles before since and keeps at most maxCycles.
func trim(c []time.Time, since time.Time) []time.Time {
	i := 0
	for i < len(c) && c[i].Before(since) {
		i++
	}
	if n := len(c) - i; n > maxCycles {
		i = len(c) - maxCycles
	}
	if i == 0 {
		return c
	}
	return append(c[:0], c[i:]...)
}

// Ports returns a copy of every watched port's history, sorted by device
// and port.
func (w *Watcher) Ports() []History {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]History, 0, len(w.ports))
	for _, p := range w.ports {
		h := p.h
		h.Transitions = make(map[string]uint64, len(p.h.Transitions))
		for k, v := range p.h.Transitions {
			h.Transitions[k] = v
		}
		h.Cycles = append([]time.Time(nil), p.h.Cycles...)
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Device != out[j].Device {
			return out[i].Device < out[j].Device
		}
		return out[i].Port < out[j].Port
	})
	return out
}

// Cost is the rounds run and the time they took.
func (w *Watcher) Cost() (rounds uint64, busy time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds, w.busy
}

func (w *Watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, p := range w.ports {
		p.state.Close()
		p.physState.Close()
		delete(w.ports, k)
	}
}
