// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// MaxFabricSweeps bounds the fabric sweeps the history keeps. A sweep is
// immutable and shared with the collector, so keeping one costs only what
// the sweeper would otherwise free: about 0.4 kB per swept port (a 4000-host
// fat tree's 8,700 switch ports: 3.5 MB per sweep). The fabric checks need
// the first and the latest sweep of the window and those in between (to
// see resets and a port that went down); eight cover a 10-minute window at
// the default 1-minute sweep interval with the oldest ones thinned out.
const MaxFabricSweeps = 8

// AddSweep records a sweep as the sweeper publishes it
// (Host.OnFabricSweep, through Sampler.FollowSweeps): the window then
// holds every sweep, not only those a sample happens to read. A sweep is
// kept once however it arrives, and from the first one that arrives here
// on, the samples no longer add the sweeps they read: this hook has every
// one of them, in order, and one a sample read late (older than the newest
// held) must not be taken for a clock step.
func (h *History) AddSweep(sw *fabric.Sweep) {
	if sw == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.followed = true
	h.addSweep(sw)
}

// addSweep records a fabric sweep the sampler saw; the same sweep seen by
// several samples is kept once. Called with h.mu held.
func (h *History) addSweep(sw *fabric.Sweep) {
	if sw == nil || sw.Overrun {
		// An overrun's stand-in read nothing: the latest-sweep checks
		// see its unknown ports, and the window keeps the sweeps that
		// read.
		return
	}
	if n := len(h.sweeps); n > 0 {
		last := h.sweeps[n-1]
		if last == sw || last.Start.Equal(sw.Start) {
			return
		}
		if sw.Start.Before(last.Start) {
			// A clock step backwards: the sweeps cannot be ordered.
			clear(h.sweeps)
			h.sweeps = h.sweeps[:0]
		}
	}
	h.sweeps = append(h.sweeps, sw)
	if len(h.sweeps) > MaxFabricSweeps {
		// Thin out rather than lose the window's start: drop the second
		// oldest, so the oldest still anchors the increase (the sum of
		// increases between consecutive kept sweeps is the same unless a
		// reset fell between the two merged ones).
		h.sweeps = append(h.sweeps[:1], h.sweeps[2:]...)
		h.sweeps[len(h.sweeps):cap(h.sweeps)][0] = nil
	}
	if h.window > 0 {
		newest := sw.Start
		drop := 0
		for drop < len(h.sweeps)-1 && newest.Sub(h.sweeps[drop].Start) > h.window {
			drop++
		}
		if drop > 0 {
			n := copy(h.sweeps, h.sweeps[drop:])
			clear(h.sweeps[n:])
			h.sweeps = h.sweeps[:n]
		}
	}
}

// Sweeps returns the fabric sweeps held, oldest first.
func (h *History) Sweeps() []*fabric.Sweep {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*fabric.Sweep(nil), h.sweeps...)
}

// sweepDelta is one counter's increase over the held sweeps.
type sweepDelta struct {
	Increase    uint64
	First, Last uint64
	Span        time.Duration
	// Sweeps is the number of sweeps that read the counter; Resets the
	// drops taken as a reset (PMA counters saturate, never wrap).
	Sweeps, Resets int
}

// SweepIncrease returns counter id's increase at port guid/port over the
// sweeps; ok is false when fewer than two sweeps read it.
func SweepIncrease(sweeps []*fabric.Sweep, guid uint64, port int, id fabric.CounterID) (d sweepDelta, ok bool) {
	var prev uint64
	var firstT, prevT time.Time
	for _, sw := range sweeps {
		p := sw.Find(guid, port)
		if p == nil || p.Unknown || !p.Values[id].Present {
			continue
		}
		v := p.Values[id].V
		if d.Sweeps == 0 {
			d.First, firstT = v, sw.Start
		} else if v >= prev {
			d.Increase += v - prev
		} else {
			d.Increase += v
			d.Resets++
		}
		prev, prevT = v, sw.Start
		d.Sweeps++
	}
	if d.Sweeps < 2 {
		return sweepDelta{}, false
	}
	d.Last, d.Span = prev, prevT.Sub(firstT)
	return d, true
}
