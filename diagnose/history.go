// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// Span formats a window for evidence: "10m0s", "15s".
func Span(d time.Duration) string {
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return d.String()
}

// CounterKey names one counter of one port: a PMA counter (counters/) or a
// driver hw_counter (hw_counters/).
type CounterKey struct {
	Device string
	Port   int
	HW     bool
	Name   string
}

type sample struct {
	t    time.Time
	vals map[CounterKey]uint64
}

// History is a bounded ring of counter samples. Its memory depends on the
// window, the interval and the number of counters, never on uptime: the ring
// has a fixed capacity and samples older than the window are dropped.
type History struct {
	mu     sync.Mutex
	window time.Duration
	ring   []sample
	start  int // index of the oldest sample
	n      int
	// sweeps are the distinct fabric counter sweeps the samples saw, or
	// the sweeper published (followed: AddSweep), oldest first
	// (fabric_history.go).
	sweeps   []*fabric.Sweep
	followed bool
}

// NewHistory keeps at most capacity samples (at least 2) and none older
// than window before the newest; window 0 keeps any age.
func NewHistory(window time.Duration, capacity int) *History {
	if capacity < 2 {
		capacity = 2
	}
	return &History{window: window, ring: make([]sample, capacity)}
}

// HistoryFor sizes a history for a sampler: window/interval + 1 samples
// cover the window, plus one for jitter.
func HistoryFor(window, interval time.Duration) *History {
	capacity := 2
	if interval > 0 {
		capacity = int(window/interval) + 2
	}
	if capacity > 10000 {
		capacity = 10000 // a 1 s interval over almost 3 hours; enough
	}
	return NewHistory(window, capacity)
}

// Add records the counters of a reading.
func (h *History) Add(s *Reading) {
	vals := map[CounterKey]uint64{}
	if s.IB() != nil {
		for i := range s.IB().Devices {
			d := &s.IB().Devices[i]
			for j := range d.Ports {
				p := &d.Ports[j]
				for _, c := range p.Counters {
					vals[CounterKey{d.Name, p.Num, false, c.Name}] = c.Value
				}
				for _, c := range p.HWCounters {
					vals[CounterKey{d.Name, p.Num, true, c.Name}] = c.Value
				}
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n > 0 && !s.Time.After(h.at(h.n-1).t) {
		// A clock step backwards: the old samples cannot be ordered
		// against the new one, start again.
		h.start, h.n = 0, 0
	}
	if h.n == len(h.ring) {
		h.ring[h.start] = sample{}
		h.start = (h.start + 1) % len(h.ring)
		h.n--
	}
	h.ring[(h.start+h.n)%len(h.ring)] = sample{t: s.Time, vals: vals}
	h.n++
	h.expire()
	if st := s.SweepStatus(); st != nil && !h.followed {
		h.addSweep(st.Last)
	}
}

func (h *History) at(i int) *sample { return &h.ring[(h.start+i)%len(h.ring)] }

// expire drops samples older than the window before the newest one.
func (h *History) expire() {
	if h.window <= 0 || h.n == 0 {
		return
	}
	newest := h.at(h.n - 1).t
	for h.n > 1 && newest.Sub(h.at(0).t) > h.window {
		h.ring[h.start] = sample{}
		h.start = (h.start + 1) % len(h.ring)
		h.n--
	}
}

// Len is the number of samples held.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Cap is the most samples it will hold.
func (h *History) Cap() int { return len(h.ring) }

// Span is the time between the oldest and the newest sample.
func (h *History) Span() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n < 2 {
		return 0
	}
	return h.at(h.n - 1).t.Sub(h.at(0).t)
}

// Delta is a counter's increase over the history.
type Delta struct {
	// Increase is the sum of the increases between consecutive samples.
	Increase uint64
	// First and Last are the oldest and newest values seen.
	First, Last uint64
	// Span is the time between the first and last sample that had the
	// counter.
	Span time.Duration
	// Resets counts drops in value taken as a counter reset (perfquery -R,
	// driver reload); the new value then counts as the increase since.
	// Wraps counts drops taken as a 32-bit wrap (mlx5 Q counters wrap).
	Resets, Wraps int
}

// Increase returns the counter's increase over the samples held; ok is
// false when fewer than two samples have it.
//
// PMA counters saturate and never wrap, so a drop is a reset. Driver
// hw_counters are 32-bit and wrap on mlx5, so a drop from the upper half of
// the 32-bit range is taken as a wrap and any other drop as a reset.
func (h *History) Increase(k CounterKey) (d Delta, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var prev uint64
	var prevT, firstT time.Time
	seen := 0
	for i := 0; i < h.n; i++ {
		s := h.at(i)
		v, has := s.vals[k]
		if !has {
			continue
		}
		if seen == 0 {
			d.First, firstT = v, s.t
		} else {
			switch {
			case v >= prev:
				d.Increase += v - prev
			case k.HW && prev >= 1<<31 && prev < 1<<32:
				d.Increase += (1<<32 - prev) + v
				d.Wraps++
			default:
				d.Increase += v
				d.Resets++
			}
		}
		prev, prevT = v, s.t
		seen++
	}
	if seen < 2 {
		return Delta{}, false
	}
	d.Last = prev
	d.Span = prevT.Sub(firstT)
	return d, true
}
