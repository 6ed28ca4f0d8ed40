// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package nstest

import (
	"net"
	"runtime"
	"sync"
	"time"
)

// DelayRelay stands in for netem where the kernel lacks it: it accepts on
// ln, connects each client to dial(), and forwards every chunk in each
// direction no earlier than delay after it arrived, in order. Like netem,
// it only ever adds delay: a probe through it must measure at least delay
// one way. Go timers overshoot by tens of microseconds, so it is less exact
// than netem above that floor. Close ln to stop it.
func DelayRelay(ln net.Listener, dial func() (net.Conn, error), delay time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := dial()
		if err != nil {
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var both sync.WaitGroup
			both.Add(2)
			go func() { defer both.Done(); delayCopy(s, c, delay) }()
			go func() { defer both.Done(); delayCopy(c, s, delay) }()
			both.Wait()
			c.Close()
			s.Close()
		}()
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// delayCopy reads from src and writes each chunk to dst at arrival+delay.
// A half-close (EOF) is passed on as a half-close after the last chunk.
func delayCopy(dst, src net.Conn, delay time.Duration) {
	q := make(chan chunk, 4096)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 64<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{buf[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		waitUntil(c.at.Add(delay))
		if _, err := dst.Write(c.b); err != nil {
			// Drain so the reader is not stuck on a full queue.
			for range q {
			}
			return
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

// waitUntil sleeps until a millisecond before t, then yields in a loop
// until t.
func waitUntil(t time.Time) {
	if d := time.Until(t) - time.Millisecond; d > 0 {
		time.Sleep(d)
	}
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}
