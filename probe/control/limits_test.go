// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// idle opens a connection that says nothing.
func idle(t *testing.T, addr string) net.Conn { t.Helper(); return idleFrom(t, addr, "127.0.0.1") }

// idleFrom is idle from the loopback address src (all of 127/8 is local),
// to stand for another client.
func idleFrom(t *testing.T, addr, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// greeted reads the greeting on c: true when the responder sent one.
func greeted(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var h Hello
	err := readLine(bufio.NewReader(c), &h)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("no greeting and not closed either")
	}
	return err == nil && h.Challenge != ""
}

// closedByServer waits until the responder closes c (EOF or reset); the
// guard is generous and is not a timing assertion.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestIdleConnectionsDoNotHoldSessions: more idle, unauthenticated
// connections than there are session slots are open (and stay open: the
// handshake timeout is an hour), from two clients within their share of
// the handshake pool, and an authenticated probe still runs.
func TestIdleConnectionsDoNotHoldSessions(t *testing.T) {
	e := startServer(t, nil, nil, func(s *Server) { s.HandshakeTimeout = time.Hour })
	for i := 0; i < maxSessions+4; i++ {
		src := []string{"127.0.0.2", "127.0.0.3"}[i%2]
		if c := idleFrom(t, e.addr, src); !greeted(t, c) {
			t.Fatalf("idle connection %d (from %s) refused before the handshake pool was full", i, src)
		}
	}
	res, err := client().TCP(context.Background(), e.addr, Request{Test: "tcp_lat", Iterations: 100})
	if err != nil {
		t.Fatalf("probe with %d idle connections open: %v", maxSessions+4, err)
	}
	if res.Latency == nil || res.Latency.Samples != 100 {
		t.Errorf("latency %+v", res.Latency)
	}
}

// TestOneClientCannotFillHandshakes: one client gets its share of the
// handshake pool and no more; another client is still served.
func TestOneClientCannotFillHandshakes(t *testing.T) {
	e := startServer(t, nil, nil, func(s *Server) { s.HandshakeTimeout = time.Hour })
	for i := 0; i < DefaultMaxHandshakesPerClient; i++ {
		if !greeted(t, idleFrom(t, e.addr, "127.0.0.2")) {
			t.Fatalf("idle connection %d refused within the client's share", i)
		}
	}
	if c := idleFrom(t, e.addr, "127.0.0.2"); greeted(t, c) {
		t.Errorf("connection %d from one client greeted: the per-client limit is %d", DefaultMaxHandshakesPerClient+1, DefaultMaxHandshakesPerClient)
	}
	if _, err := client().TCP(context.Background(), e.addr, Request{Test: "tcp_lat", Iterations: 100}); err != nil {
		t.Fatalf("probe from another client: %v", err)
	}
}

// TestIdleConnectionsClosedAtDeadline: with the handshake pool full of
// idle connections, more are refused at once; the idle ones are closed at
// the handshake deadline, and then a probe runs.
func TestIdleConnectionsClosedAtDeadline(t *testing.T) {
	const pool = 4
	e := startServer(t, nil, nil, func(s *Server) {
		s.HandshakeTimeout = 200 * time.Millisecond
		s.MaxHandshakes = pool
	})
	var conns []net.Conn
	for i := 0; i < pool+3; i++ {
		conns = append(conns, idle(t, e.addr))
	}
	for i, c := range conns {
		if !closedByServer(t, c) {
			t.Fatalf("idle connection %d still open past the handshake deadline", i)
		}
	}
	if _, err := client().TCP(context.Background(), e.addr, Request{Test: "tcp_lat", Iterations: 100}); err != nil {
		t.Fatalf("probe after the idle connections were closed: %v", err)
	}
}

// TestRefusedConnectionsLogRateLimited: 2,000 connections refused because
// the handshake pool is full give one warning, and one count when the
// responder stops, not 2,000 lines.
func TestRefusedConnectionsLogRateLimited(t *testing.T) {
	const refused = 2000
	logs := &testenv.Records{}
	e := startServer(t, nil, nil, func(s *Server) {
		s.HandshakeTimeout = time.Hour
		s.MaxHandshakes = 1
		s.Logger = slog.New(logs)
		s.logEvery = time.Hour
	})
	if !greeted(t, idle(t, e.addr)) {
		t.Fatal("the first connection was refused")
	}
	for i := 0; i < refused; i++ {
		c := idle(t, e.addr)
		if !closedByServer(t, c) {
			t.Fatalf("connection %d not refused with the pool full", i)
		}
		c.Close()
	}
	if n := len(logs.Matching("refus")); n != 1 {
		t.Errorf("%d log lines for %d refused connections, want 1 until the minute is up", n, refused)
	}
	e.cancel()
	if err := <-e.done; err != nil {
		t.Fatal(err)
	}
	e.done <- nil // for the cleanup
	got := logs.Matching("refus")
	if len(got) != 2 || attr(got[1], "count") != "1999" {
		var lines []string
		for _, r := range got {
			lines = append(lines, r.Message+" count="+attr(r, "count"))
		}
		t.Errorf("log lines after stopping: %q, want the warning and a count of 1999", lines)
	}
	if attr(got[0], "remote") == "" || got[0].Level != slog.LevelWarn {
		t.Errorf("first line %q: want a warning naming the remote address", got[0].Message)
	}
}

// TestUnauthenticatedRefusalsRateLimited: requests refused before
// authentication (a client outside allowed_clients) are logged once and
// then counted, so connecting in a loop does not flood the log.
func TestUnauthenticatedRefusalsRateLimited(t *testing.T) {
	logs := &testenv.Records{}
	e := startServer(t, nil, func(p *config.Probe) { p.Responder.AllowedClients = []string{"192.0.2.0/24"} },
		func(s *Server) { s.Logger = slog.New(logs); s.logEvery = time.Hour })
	for i := 0; i < 50; i++ {
		_, err := client().TCP(context.Background(), e.addr, Request{Test: "tcp_lat"})
		var re *RemoteError
		if !errors.As(err, &re) || re.Kind != KindForbidden {
			t.Fatalf("connection %d: %v, want forbidden", i, err)
		}
	}
	if n := len(logs.Matching("refused")); n != 1 {
		t.Errorf("%d log lines for 50 refused requests, want 1", n)
	}
}

// TestRateLog: the first event is logged, then one count per interval
// while events keep coming; after an interval without any, the next is
// logged in full again.
func TestRateLog(t *testing.T) {
	logs := &testenv.Records{}
	l := &rateLog{logger: slog.New(logs), level: slog.LevelWarn, msg: "first", summary: "more", every: time.Hour}
	defer l.stop()
	for i := 0; i < 5; i++ {
		l.log("i", i)
	}
	l.flush() // the interval ends with 4 counted
	l.log("i", 5)
	l.flush() // one more
	l.flush() // a quiet interval
	l.log("i", 6)
	var got []string
	for _, r := range logs.Matching("") {
		got = append(got, r.Message+":"+attr(r, "count")+attr(r, "i"))
	}
	want := []string{"first:0", "more:4", "more:1", "first:6"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// hold keeps n connections from src open to addr until stop closes:
// each is greeted and then says nothing, and one the responder closes
// is opened again at once, as a peer that wants to hold the slots does.
// It reports on greeted once per connection greeted, and stops after a
// bounded number of reconnections.
func hold(addr, src string, n int, greeted chan<- struct{}, stop <-chan struct{}) {
	const maxReconnects = 400
	for range n {
		go func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
			for range maxReconnects {
				c, err := d.Dial("tcp", addr)
				if err != nil {
					return
				}
				go func() { <-stop; c.Close() }()
				_ = c.SetReadDeadline(time.Now().Add(time.Minute))
				var h Hello
				if readLine(bufio.NewReader(c), &h) == nil {
					select {
					case greeted <- struct{}{}:
					default:
					}
				}
				_, _ = io.Copy(io.Discard, c) // until the responder closes it
				c.Close()
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
}

// TestHostilePeersCannotHoldSlots (issue 29, item 3), in a network
// namespace of its own: 8 source addresses each hold 8 idle connections
// (the whole unauthenticated pool) and open another as soon as one is
// closed. Every one of 20 probes from another address must still run:
// an idle connection loses its slot to a newcomer from a client holding
// fewer, rather than the newcomer being refused.
func TestHostilePeersCannotHoldSlots(t *testing.T) {
	if !testenv.InChild(t.Name()) {
		testenv.RequireTool(t, "ip", "ip not installed (Debian: iproute2)")
		t.Log(testenv.InNamespaces(t, t.Name(), "-n"))
		return
	}
	testenv.Run(t, "ip", "link", "set", "lo", "up")
	e := startServer(t, nil, nil, nil)
	const sources, each, probes = 8, 8, 20
	greeted := make(chan struct{}, sources*each)
	stop := make(chan struct{})
	defer close(stop)
	for i := range sources {
		hold(e.addr, fmt.Sprintf("127.0.0.%d", i+2), each, greeted, stop)
	}
	// The pool is full before the first probe (bounded wait, not timed).
	for i := 0; i < sources*each; i++ {
		select {
		case <-greeted:
		case <-time.After(time.Minute):
			t.Fatalf("only %d hostile connections greeted", i)
		}
	}
	ok := 0
	var errs []string
	for range probes {
		cl := client()
		cl.Source = "127.0.0.1"
		if _, err := cl.TCP(context.Background(), e.addr, Request{Test: "tcp_lat", Iterations: 10}); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		ok++
	}
	t.Logf("%d of %d probes ran while %d addresses held %d idle connections each", ok, probes, sources, each)
	if ok != probes {
		t.Errorf("%d of %d probes ran; errors: %q", ok, probes, errs)
	}
}

// TestFailedAuthenticationRateLimited (issue 29, item 3): wrong secrets
// from one address cost a handshake each only up to a burst; after
// that its connections are closed at accept, before any challenge or
// MAC is computed. The clock is frozen, so no token comes back during
// the test. Another address is still served.
func TestFailedAuthenticationRateLimited(t *testing.T) {
	var frozen = time.Now()
	e := startServer(t, nil, nil, func(s *Server) { s.now = func() time.Time { return frozen } })
	bad := &Client{Secret: []byte("another-secret-of-16+"), Source: "127.0.0.5"}
	const attempts = 40
	unauthorized, closed := 0, 0
	for range attempts {
		_, err := bad.TCP(context.Background(), e.addr, Request{Test: "tcp_lat"})
		var re *RemoteError
		switch {
		case errors.As(err, &re) && re.Kind == KindUnauthorized:
			unauthorized++
		case err != nil:
			closed++
		default:
			t.Fatal("a wrong secret was accepted")
		}
	}
	t.Logf("%d of %d wrong secrets were checked, %d closed at accept", unauthorized, attempts, closed)
	if unauthorized > DefaultAuthFailureBurst {
		t.Errorf("%d wrong secrets checked from one address with the clock frozen, want at most the burst of %d", unauthorized, DefaultAuthFailureBurst)
	}
	if _, err := client().TCP(context.Background(), e.addr, Request{Test: "tcp_lat", Iterations: 10}); err != nil {
		t.Errorf("probe from another address: %v", err)
	}
}
