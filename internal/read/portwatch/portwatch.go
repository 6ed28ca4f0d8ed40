// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package portwatch keeps what a scrape every 15 s misses of every RDMA
// port's logical state: each transition, how long the port was down, and
// the down-up cycles of a recent window, so a link that flaps between two
// scrapes is seen.
//
// Its cost follows what can change, not the clock. A round (two or three
// pread calls per port on descriptors kept open, hostfs.Attr) runs when
// someone asks for the history (a scrape, the diagnose sampler: Refresh),
// when an event source says a link changed (Options.Events: the netlink
// link group on a live kernel), and every Options.Interval only when one
// is set. Between two rounds it reads nothing and sets no timer, so a quiet
// host that nobody scrapes costs no wake-ups.
//
// What a round catches between two rounds it did not see: an InfiniBand
// port's link_downed counter (8 bits, PMA PortCounters) counts every time
// the physical link went down, so a rise the states read did not explain
// is that many down-up cycles (Inferred), dated at the round that found
// them and with no time down. It cannot tell a logical state change that
// did not take the link down (the SM moving a port to INIT), nor anything
// once the counter is saturated at 255 or on a port without it (RoCE ports
// of some drivers, iWARP); those need Events or an Interval.
//
// A port whose read hangs in its driver keeps that read to itself: a round
// waits ReadWait for each port, then leaves the read in flight and goes on
// with the others; the port is skipped (its error says why) until the read
// returns. The port list is re-read every RescanEvery rounds, RescanAfter
// after the last listing, and whenever a port's files vanish.
package portwatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// Defaults.
const (
	// RescanEvery is how many rounds pass at most between two reads of
	// the port list, and RescanAfter how long: a hot-plugged device is
	// watched from the first round this long after it appeared.
	RescanEvery = 10
	RescanAfter = 10 * time.Second
	// DefaultReadWait is how long a round waits for one port's reads
	// before it leaves them in flight: a sysfs attribute answers in
	// microseconds, an mlx5 state read (a firmware command) in
	// milliseconds.
	DefaultReadWait = 500 * time.Millisecond
	// fresh is how old a round may be for Refresh to reuse it: the
	// collector and the diagnose reader of one scrape ask both.
	fresh = 100 * time.Millisecond
	// maxCycles bounds the down-up cycles kept per port, whatever the
	// window: a port flapping every second for ten minutes is 600.
	maxCycles = 1024
	// linkDowned is the counter whose rise tells link downs no round saw.
	linkDowned = "link_downed"
)

// Options configure a Watcher.
type Options struct {
	// Sys is the sysfs root (class/infiniband is read below it).
	Sys hostfs.FS
	// Keep selects the devices watched (the host's device filter); nil
	// keeps all.
	Keep func(device string) bool
	// Interval between two rounds that nobody asked for; 0 runs none:
	// rounds run on Refresh and on Events only.
	Interval time.Duration
	// Events, when not nil, asks for a round at each receive (a link
	// changed somewhere); Run stops listening when it is closed.
	Events <-chan struct{}
	// ReadWait bounds a round's wait for one port; 0 means
	// DefaultReadWait.
	ReadWait time.Duration
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
	// state entered (StateName), Inferred cycles included.
	Transitions map[string]uint64
	// DownSeconds is the time the port was not ACTIVE after it had been
	// ACTIVE once, at the resolution of the rounds: a spare port that
	// never came up does not count, nor an Inferred cycle.
	DownSeconds float64
	// WasActive is set once the port was seen ACTIVE (or an Inferred
	// cycle shows it was).
	WasActive bool
	// DownSince is when the port left ACTIVE, zero while it is ACTIVE or
	// before it ever was.
	DownSince time.Time
	// Cycles are the times the port came back to ACTIVE after leaving it,
	// within the window, oldest first.
	Cycles []time.Time
	// Inferred counts the down-up cycles no round saw, told by a rise of
	// link_downed; each is also in Transitions and Cycles.
	Inferred uint64
	// Blind is set when link_downed cannot tell the cycles between two
	// rounds: absent or unreadable (RoCE ports of some drivers, iWARP),
	// or at its saturated maximum (255: cleared by perfquery -R).
	Blind bool
	// Err is the last round's error for the port, nil when it read the
	// state; an error wrapping hostfs.ErrStuck while a read hangs.
	Err error
}

// Watcher samples port states. Its methods are safe for concurrent use.
type Watcher struct {
	opts Options
	// sampling makes rounds take turns (it is held at most ReadWait per
	// port whose read begins to hang); round and rescanned are its.
	sampling  sync.Mutex
	round     int
	rescanned time.Time
	// mu guards ports, the histories and the counts below.
	mu    sync.Mutex
	ports map[key]*watched
	// rounds counts completed rounds, and busy the time they took: the
	// watcher's own cost. last is when the last round ended.
	rounds uint64
	busy   time.Duration
	last   time.Time
}

type key struct {
	device string
	port   int
}

type watched struct {
	h                            History
	state, physState, linkDowned *hostfs.Attr
	lastSeen                     time.Time
	// reading is set while a worker reads the port, since when in
	// readSince (unix nanoseconds, 0 when not known): a round skips a
	// port still being read.
	reading   atomic.Bool
	readSince atomic.Int64
	// The link_downed bookkeeping (under Watcher.mu): the last value,
	// whether there is one, and the downs rounds saw in the last round
	// that the counter may not show yet.
	ld      uint64
	ldKnown bool
	seen    uint64
}

// New returns a watcher; Run starts it.
func New(o Options) *Watcher {
	if o.ReadWait <= 0 {
		o.ReadWait = DefaultReadWait
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Watcher{opts: o, ports: map[key]*watched{}}
}

// Interval is the time between two rounds nobody asked for, 0 for none.
func (w *Watcher) Interval() time.Duration { return w.opts.Interval }

// Run runs a first round, then one every Interval (when set) and one at
// each event until ctx ends, then closes what it holds. first, if not
// nil, is closed after the first round. With neither an Interval nor
// Events it waits for ctx alone: rounds then run on Refresh.
func (w *Watcher) Run(ctx context.Context, first chan<- struct{}) {
	defer w.close()
	w.Sample()
	if first != nil {
		close(first)
	}
	var tick <-chan time.Time
	if w.opts.Interval > 0 {
		t := time.NewTicker(w.opts.Interval)
		defer t.Stop()
		tick = t.C
	}
	events := w.opts.Events
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
		}
		w.Sample()
	}
}

// Refresh runs a round unless one ended less than 100 ms ago: a scrape
// asks for the history through it, so the history is as fresh as the
// scrape. Concurrent scrapes wait for the round in progress and use it.
// It returns within ReadWait per port whose read begins to hang.
func (w *Watcher) Refresh() {
	w.sampling.Lock()
	defer w.sampling.Unlock()
	w.mu.Lock()
	recent := !w.last.IsZero() && time.Since(w.last) < fresh
	w.mu.Unlock()
	if !recent {
		w.sample()
	}
}

// Sample runs one round: re-reads the port list when it is due, then each
// port's state, phys_state and link_downed. The files are read by a
// worker goroutine, without the lock, one port after the other; the round
// waits ReadWait for each, and when one outlasts it leaves that worker
// with it and goes on with a new one: a read stuck in a wedged driver
// costs its port alone, never the other ports or a scrape.
func (w *Watcher) Sample() {
	w.sampling.Lock()
	defer w.sampling.Unlock()
	w.sample()
}

// sample is Sample; the caller holds sampling.
func (w *Watcher) sample() {
	began := time.Now()
	if w.round%RescanEvery == 0 || w.opts.Now().Sub(w.rescanned) >= RescanAfter {
		w.rescan()
	}
	w.round++
	if w.readAll() {
		w.rescan()
	}
	w.mu.Lock()
	w.rounds++
	w.last = time.Now()
	w.busy += w.last.Sub(began)
	w.mu.Unlock()
}

// readAll reads every port, as Sample says, and reports whether a port's
// files vanished.
func (w *Watcher) readAll() (vanished bool) {
	w.mu.Lock()
	todo := make([]*watched, 0, len(w.ports))
	for _, p := range w.ports {
		todo = append(todo, p)
	}
	w.mu.Unlock()
	timer := time.NewTimer(w.opts.ReadWait)
	defer timer.Stop()
	for len(todo) > 0 {
		// done is buffered for every port, so a worker left behind
		// never blocks on it; gone tells it to stop after its read.
		done := make(chan bool, len(todo))
		gone := new(atomic.Bool)
		go w.work(todo, done, gone)
		next := 0
		for next < len(todo) {
			timer.Reset(w.opts.ReadWait)
			select {
			case v := <-done:
				vanished = vanished || v
				next++
				continue
			case <-timer.C:
			}
			gone.Store(true) // todo[next] hangs: the rest to a new worker
			next++
			break
		}
		todo = todo[next:]
	}
	return vanished
}

// work reads ports in order, sending on done for each (true when its
// files vanished), until gone is set. A port another worker still reads
// is skipped with an error that says since when.
func (w *Watcher) work(ports []*watched, done chan<- bool, gone *atomic.Bool) {
	for _, p := range ports {
		if gone.Load() {
			return
		}
		if !p.reading.CompareAndSwap(false, true) {
			// A worker left behind still reads it. Said so only past
			// ReadWait: one that just began (readSince not yet set: 0)
			// will apply what it reads.
			if ns := p.readSince.Load(); ns != 0 && time.Since(time.Unix(0, ns)) >= w.opts.ReadWait {
				since := time.Unix(0, ns)
				err := fmt.Errorf("%s: %w: a read started at %s has not returned; the port is skipped until it does",
					p.state.Name(), hostfs.ErrStuck, since.UTC().Format("2006-01-02T15:04:05.000Z"))
				w.mu.Lock()
				p.h.Err = err
				w.mu.Unlock()
			}
			done <- false
			continue
		}
		p.readSince.Store(time.Now().UnixNano())
		r := p.read()
		now := w.opts.Now()
		w.mu.Lock()
		w.apply(p, r, now)
		w.mu.Unlock()
		p.readSince.Store(0)
		p.reading.Store(false)
		done <- errors.Is(r.err, fs.ErrNotExist)
	}
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
	w.rescanned = now
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, dir := range found {
		if _, ok := w.ports[k]; ok {
			continue
		}
		w.ports[k] = &watched{
			h:          History{Device: k.device, Port: k.port, Transitions: map[string]uint64{}},
			state:      hostfs.NewAttr(w.opts.Sys, dir+"state"),
			physState:  hostfs.NewAttr(w.opts.Sys, dir+"phys_state"),
			linkDowned: hostfs.NewAttr(w.opts.Sys, dir+"counters/"+linkDowned),
			lastSeen:   now,
		}
	}
	for k, p := range w.ports {
		if _, ok := found[k]; !ok {
			p.closeFiles()
			delete(w.ports, k)
		}
	}
}

// reading is one read of a port.
type reading struct {
	st, ps infiniband.Enum
	// ld is link_downed, when ldOK.
	ld   uint64
	ldOK bool
	err  error
}

// read reads one port's state, phys_state (zero when it cannot be read:
// state alone decides) and link_downed (absent when it cannot be read).
func (p *watched) read() (r reading) {
	// 64 bytes: hostfs.Attr allocates a 4 KiB buffer for anything smaller,
	// three per port every round (BenchmarkPortwatchRound counts the
	// bytes; docs/measurements.md#portwatch). The longest value, "6: Link Error Recovery\n", is 23.
	var buf [64]byte
	b, err := p.state.Read(buf[:0])
	if err == nil {
		r.st, err = infiniband.ParseEnum(string(b))
	}
	if err != nil {
		r.err = err
		return r
	}
	if b, err := p.physState.Read(buf[:0]); err == nil {
		r.ps, _ = infiniband.ParseEnum(string(b))
	}
	if b, err := p.linkDowned.Read(buf[:0]); err == nil {
		r.ld, err = infiniband.ParseCounter(string(b))
		r.ldOK = err == nil
	}
	return r
}

func (p *watched) closeFiles() {
	p.state.Close()
	p.physState.Close()
	p.linkDowned.Close()
}

// linkDownedMax is the saturated value of link_downed (its PMA width, in
// infiniband.Counters): at it the counter has stopped counting.
var linkDownedMax = func() uint64 {
	for _, c := range infiniband.Counters {
		if c.File == linkDowned && c.Bits > 0 && c.Bits < 64 {
			return 1<<c.Bits - 1
		}
	}
	return 1<<64 - 1
}()

// apply records one read of a port at now.
func (w *Watcher) apply(p *watched, r reading, now time.Time) {
	h := &p.h
	elapsed := now.Sub(p.lastSeen)
	p.lastSeen = now
	if r.err != nil {
		h.Err = r.err
		return
	}
	st := r.st
	h.Err, h.PhysState = nil, r.ps
	first := h.Changed.IsZero()
	if !first && h.State.Value != infiniband.StateActive && h.WasActive {
		h.DownSeconds += elapsed.Seconds()
	}
	downs := uint64(0) // the link downs this read saw
	if first || st.Value != h.State.Value {
		if !first {
			h.Transitions[StateName(st.Value)]++
			switch {
			case h.State.Value == infiniband.StateActive:
				h.DownSince = now
				downs = 1
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
	h.Blind = !r.ldOK || r.ld >= linkDownedMax
	if missed := p.unseenDowns(r, downs); missed > 0 {
		// Each link down no round saw is a whole cycle between two
		// rounds: down, and up again (the port is as this read found
		// it). When it happened is unknown: dated now, no time down.
		h.Transitions[StateName(infiniband.StateDown)] += missed
		h.Transitions[StateName(infiniband.StateActive)] += missed
		h.Inferred += missed
		h.WasActive = true
		for i := uint64(0); i < missed && i < maxCycles; i++ {
			h.Cycles = append(h.Cycles, now)
		}
	}
	h.Cycles = trim(h.Cycles, now.Add(-w.opts.Window))
}

// unseenDowns is how many link downs link_downed counted since the last
// read beyond those the rounds saw (downs now, and those of the previous
// read the counter may have shown only now: the state and the counter are
// two reads). The first value and a counter cleared (perfquery -R: lower
// than before) tell nothing; a counter at its saturated maximum no longer
// rises (Blind).
func (p *watched) unseenDowns(r reading, downs uint64) uint64 {
	if !r.ldOK {
		p.ldKnown = false
		return 0
	}
	prev, known := p.ld, p.ldKnown
	p.ld, p.ldKnown = r.ld, true
	seen := p.seen + downs
	p.seen = downs
	if !known || r.ld < prev {
		return 0
	}
	rise := r.ld - prev
	if rise <= seen {
		p.seen = min(p.seen, seen-rise)
		return 0
	}
	p.seen = 0
	return rise - seen
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
		p.closeFiles()
		delete(w.ports, k)
	}
}
