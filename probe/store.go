// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"maps"
	"sort"
	"sync"
)

// Key identifies a series of runs: a target, a test, the local HCA port,
// and where the buffers were.
type Key struct {
	Peer   string `json:"peer"`
	Test   string `json:"test"`
	Device string `json:"device"`
	Port   int    `json:"port"`
	Memory Memory `json:"memory"`
}

// Entry is what the store knows about one key.
type Entry struct {
	Key
	Mode Mode `json:"mode"`
	// Last is the latest run, good or bad.
	Last *Result `json:"last"`
	// LastSuccess and LastFailure are the latest of each; a failure does
	// not erase the last good values.
	LastSuccess *Result `json:"last_success,omitempty"`
	LastFailure *Result `json:"last_failure,omitempty"`
	Runs        uint64  `json:"runs"`
	// Failures counts failed runs by error kind.
	Failures map[string]uint64 `json:"failures,omitempty"`
}

// Reader is the read side of the store, for the metrics collector and the
// diagnose checks.
type Reader interface {
	// Latest returns every entry, sorted by peer, test, device, port,
	// memory.
	// The entries are copies: the caller may keep them.
	Latest() []Entry
}

// Store keeps the results. Recording and reading take a lock only for the
// copy: a probe never holds it while it runs, so a scrape never waits for
// a probe.
type Store struct {
	mu      sync.RWMutex
	entries map[Key]*Entry
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{entries: map[Key]*Entry{}} }

// Record adds a run.
func (s *Store) Record(r Result) {
	r.Memory = r.Memory.orHost()
	k := Key{Peer: r.Peer, Test: r.Test, Device: r.Device, Port: r.Port, Memory: r.Memory}
	rp := &r
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[Key]*Entry{}
	}
	e, ok := s.entries[k]
	if !ok {
		e = &Entry{Key: k}
		s.entries[k] = e
	}
	e.Mode = r.Mode
	e.Last = rp
	e.Runs++
	if r.Success {
		e.LastSuccess = rp
	} else {
		e.LastFailure = rp
		if e.Failures == nil {
			e.Failures = map[string]uint64{}
		}
		kind := r.ErrorKind
		if kind == "" {
			kind = "unknown"
		}
		e.Failures[kind]++
	}
}

// Latest implements Reader. Results are shared read-only between copies:
// the store never modifies a Result once recorded.
func (s *Store) Latest() []Entry {
	s.mu.RLock()
	out := make([]Entry, 0, len(s.entries))
	for _, e := range s.entries {
		c := *e
		c.Failures = maps.Clone(e.Failures)
		out = append(out, c)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Key, out[j].Key
		if a.Peer != b.Peer {
			return a.Peer < b.Peer
		}
		if a.Test != b.Test {
			return a.Test < b.Test
		}
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return a.Memory < b.Memory
	})
	return out
}

// Get returns the entry of one key; an unset Memory is host memory.
func (s *Store) Get(k Key) (Entry, bool) {
	k.Memory = k.Memory.orHost()
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.entries[k]
	if !ok {
		return Entry{}, false
	}
	c := *e
	c.Failures = maps.Clone(e.Failures)
	return c, true
}
