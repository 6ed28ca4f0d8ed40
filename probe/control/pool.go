// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"net"
	"sync"
	"time"
)

// handshakePool holds the slots of connections not yet authenticated: at
// most max in all and perClient from one address. When it is full, a
// newcomer from an address holding fewer slots takes the oldest slot of
// the address holding the most, whose connection is closed: a few
// addresses that keep idle connections open cannot keep everyone else
// out, since a prober's handshake takes one round trip and an idle
// connection is always older.
type handshakePool struct {
	max, perClient int
	// grace is the age below which a slot is never taken by a newcomer
	// from an address holding as many: equals do not evict each other's
	// fresh connections in turn.
	grace time.Duration
	now   func() time.Time

	mu    sync.Mutex
	slots map[*slot]struct{}
	by    map[string]int
}

// slot is one connection's place in the pool.
type slot struct {
	host  string
	since time.Time
	conn  net.Conn
}

func newHandshakePool(max, perClient int, grace time.Duration, now func() time.Time) *handshakePool {
	return &handshakePool{max: max, perClient: perClient, grace: grace, now: now,
		slots: map[*slot]struct{}{}, by: map[string]int{}}
}

// take reserves a slot for c. When none is left it says which limit was
// reached; evicted, when not nil, is the connection whose slot c took,
// for the caller to close.
func (p *handshakePool) take(c net.Conn) (s *slot, evicted net.Conn, full string) {
	host := hostOf(c.RemoteAddr())
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	mine := p.by[host]
	if mine >= p.perClient {
		return nil, nil, "client"
	}
	if len(p.slots) >= p.max {
		v := p.victim(mine, now)
		if v == nil {
			return nil, nil, "all"
		}
		p.drop(v)
		evicted = v.conn
	}
	s = &slot{host: host, since: now, conn: c}
	p.slots[s] = struct{}{}
	p.by[host]++
	return s, evicted, ""
}

// victim is the oldest slot of the address holding the most, when it
// holds more than mine+1, or mine+1 and that slot is past the grace.
func (p *handshakePool) victim(mine int, now time.Time) *slot {
	var v *slot
	for s := range p.slots {
		n, vn := p.by[s.host], 0
		if v != nil {
			vn = p.by[v.host]
		}
		if v == nil || n > vn || n == vn && s.since.Before(v.since) {
			v = s
		}
	}
	if v == nil {
		return nil
	}
	if n := p.by[v.host]; n > mine+1 || n == mine+1 && now.Sub(v.since) >= p.grace {
		return v
	}
	return nil
}

func (p *handshakePool) drop(s *slot) {
	delete(p.slots, s)
	if p.by[s.host]--; p.by[s.host] <= 0 {
		delete(p.by, s.host)
	}
}

// give returns s, unless a newcomer took it already.
func (p *handshakePool) give(s *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.slots[s]; ok {
		p.drop(s)
	}
}

// failureLimit bounds what failed handshakes (a wrong secret, a request
// that never came) cost per client address: a bucket of burst tokens
// each, one back every refill; an address with none left has its
// connections closed at accept, before a challenge or a MAC is computed.
// At most maxTracked addresses are remembered; past that, those whose
// bucket is full are forgotten first.
type failureLimit struct {
	burst      int
	refill     time.Duration
	maxTracked int

	mu sync.Mutex
	by map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// level is b's tokens at now.
func (l *failureLimit) level(b *bucket, now time.Time) float64 {
	t := b.tokens + float64(now.Sub(b.at))/float64(l.refill)
	return min(t, float64(l.burst))
}

// allow reports whether host may try a handshake now.
func (l *failureLimit) allow(host string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.by[host]
	return !ok || l.level(b, now) >= 1
}

// fail takes a token from host.
func (l *failureLimit) fail(host string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.by[host]
	if !ok {
		if len(l.by) >= l.maxTracked {
			l.forget(now)
		}
		b = &bucket{tokens: float64(l.burst), at: now}
		l.by[host] = b
	}
	b.tokens, b.at = max(l.level(b, now)-1, 0), now
}

// forget drops the addresses whose bucket is full again, and when none
// is, one of the others: the table stays bounded.
func (l *failureLimit) forget(now time.Time) {
	for h, b := range l.by {
		if l.level(b, now) >= float64(l.burst) {
			delete(l.by, h)
		}
	}
	for h := range l.by {
		if len(l.by) < l.maxTracked {
			break
		}
		delete(l.by, h)
	}
}

// hostOf is the address without its port: what one client shares across
// its connections.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
