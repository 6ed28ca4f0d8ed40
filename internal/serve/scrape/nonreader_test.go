// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// nonReader opens a connection to srv with a small receive buffer, asks
// for /metrics with accept and never reads the answer.
func nonReader(t *testing.T, srv *httptest.Server, accept string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: %s\r\n\r\n", accept); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds: a state to reach, not a time to
// meet (the test's own deadline bounds it).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if d, ok := t.Deadline(); ok && time.Until(d) < 5*time.Second {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestScrapeBesideNonReaders: on a fabric of 10,080 switch ports, with
// 15 clients that asked for the text format and a debugging-format
// client, none of them reading, a Prometheus scrape (delimited protobuf,
// gzip) is answered whole. The budget is 64 MiB, what 256 MiB is to a
// fabric of about 48,000 switch ports; the minimum transfer rate is off,
// so the non-readers hold their scrapes throughout. Reserving the 15
// 5.7 MB each for fabric samples they never make, and the debugging
// client 380 MB (issue 35), would answer the scrape 503.
func TestScrapeBesideNonReaders(t *testing.T) {
	m, _ := fabricHandler(t, 64<<20)
	m.minRate = 0
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close) // after the non-readers' connections are closed (cleanups run last first)
	for range 15 {
		nonReader(t, srv, "text/plain;version=0.0.4")
	}
	nonReader(t, srv, protoTextAccept)
	waitFor(t, "15 text scrapes and one in protobuf text in flight", func() bool {
		return len(m.inFlight) == 15 && len(m.debug) == 1
	})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Accept", protobufAccept)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(body) < 100000 {
		t.Fatalf("beside 16 non-readers: HTTP %d, %d bytes, %v: %.200s", resp.StatusCode, len(body), err, body)
	}
	if len(m.inFlight) != 15 {
		t.Errorf("%d text scrapes in flight after the scrape, want the 15 non-readers'", len(m.inFlight))
	}
}

// TestScrapeDropsNonReader: a client that asks and never reads is
// dropped once it takes less than the minimum transfer rate (here a
// chunk per 100 ms), and its scrape's slot and memory are released while
// its connection stays open. Without the minimum rate it would hold
// them for the whole write timeout (40 s by default; none here:
// forever; issue 35).
func TestScrapeDropsNonReader(t *testing.T) {
	m, _ := fabricHandler(t, 256<<20)
	m.minRate = rateChunk * 10
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close) // after the non-readers' connections are closed (cleanups run last first)
	nonReader(t, srv, "text/plain;version=0.0.4")
	waitFor(t, "the scrape in flight", func() bool { return len(m.inFlight) == 1 })
	waitFor(t, "the non-reader dropped", func() bool {
		m.memory.mu.Lock()
		defer m.memory.mu.Unlock()
		return len(m.inFlight) == 0 && m.memory.used == 0
	})
}
