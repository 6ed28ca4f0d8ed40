// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/testenv"
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
