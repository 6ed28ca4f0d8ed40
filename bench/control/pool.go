// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"net"
	"sync"
)

// handshakePool holds the slots of connections not yet authenticated: at
// most max in all and perClient from one address, so one host that keeps
// opening idle connections cannot fill the pool for everyone else.
type handshakePool struct {
	max, perClient int

	mu    sync.Mutex
	total int
	by    map[string]int
}

func newHandshakePool(max, perClient int) *handshakePool {
	return &handshakePool{max: max, perClient: perClient, by: map[string]int{}}
}

// take reserves a slot for a connection from addr; when none is left it
// says which limit was reached.
func (p *handshakePool) take(addr net.Addr) (ok bool, full string) {
	host := hostOf(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.total >= p.max:
		return false, "all"
	case p.by[host] >= p.perClient:
		return false, "client"
	}
	p.total++
	p.by[host]++
	return true, ""
}

// give returns the slot taken for addr.
func (p *handshakePool) give(addr net.Addr) {
	host := hostOf(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total--
	if p.by[host]--; p.by[host] <= 0 {
		delete(p.by, host)
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
