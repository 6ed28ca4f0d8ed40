// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package tcpprobe

import (
	"bufio"
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/probe/nstest"
)

// pair runs Serve on the accepted side of ln for req and returns the
// client connection and the server's error channel.
func serveOne(t *testing.T, ln net.Listener, req Request) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		errc <- Serve(context.Background(), c, c, req)
	}()
	return errc
}

func runBoth(t *testing.T, ln net.Listener, dial func() (net.Conn, error), req Request) (*Latency, *Bandwidth) {
	t.Helper()
	req = req.WithDefaults()
	errc := serveOne(t, ln, req)
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var lat *Latency
	var bw *Bandwidth
	if req.Mode == ModeLatency {
		lat, err = RunLatency(ctx, c, bufio.NewReader(c), req)
	} else {
		bw, err = RunBandwidth(ctx, c, bufio.NewReader(c), req)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server: %v", err)
	}
	return lat, bw
}

// TestLoopback: both modes over 127.0.0.1; the statistics are ordered and
// the counts add up.
func TestLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }

	lat, _ := runBoth(t, ln, dial, Request{Mode: ModeLatency, Iterations: 2000})
	if lat.Samples != 2000 {
		t.Errorf("%d samples", lat.Samples)
	}
	if !(0 < lat.Min && lat.Min <= lat.Typical && lat.Typical <= lat.P99 && lat.P99 <= lat.P999 && lat.P999 <= lat.Max && lat.Min <= lat.Avg && lat.Avg <= lat.Max) {
		t.Errorf("statistics out of order: %+v", lat)
	}
	if lat.CPU.ClientSeconds <= 0 || lat.CPU.ServerSeconds <= 0 {
		t.Errorf("no CPU time measured: %+v", lat.CPU)
	}

	_, bw := runBoth(t, ln, dial, Request{Mode: ModeBandwidth, Duration: 300 * time.Millisecond})
	if bw.Bytes < DefaultBandwidthSize || bw.BytesPerSecond <= 0 || bw.Seconds < 0.3 {
		t.Errorf("bandwidth %+v", bw)
	}
	if bw.CPU.ClientPercent <= 0 || bw.CPU.ServerPercent <= 0 {
		t.Errorf("no CPU share: %+v", bw.CPU)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{Mode: "udp"}, "mode"},
		{Request{Mode: ModeLatency, Size: 0, Iterations: 10}, "size"},
		{Request{Mode: ModeLatency, Size: MaxLatencySize + 1, Iterations: 10}, "size"},
		{Request{Mode: ModeLatency, Size: 64, Iterations: MaxIterations + 1}, "iterations"},
		{Request{Mode: ModeLatency, Size: 64, Iterations: 10, Duration: time.Second}, "count"},
		{Request{Mode: ModeBandwidth, Size: 1024, Duration: time.Millisecond}, "duration"},
		{Request{Mode: ModeBandwidth, Size: 1024, Duration: time.Hour}, "duration"},
		{Request{Mode: ModeBandwidth, Size: 1024, Duration: time.Second, Iterations: 5}, "duration, not a count"},
	} {
		err := tc.req.Validate(time.Minute)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
	if err := (Request{Mode: ModeBandwidth}).WithDefaults().Validate(time.Minute); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

// TestPeerGone: a server that hangs up mid-run is an error, not a result.
func TestPeerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			buf := make([]byte, 64)
			_, _ = c.Read(buf)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := Request{Mode: ModeLatency}.WithDefaults()
	if _, err := RunLatency(context.Background(), c, bufio.NewReader(c), req); err == nil {
		t.Error("hung-up server gave a result")
	}
	// A cancelled context unblocks a stuck read.
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := RunLatency(ctx, c2, bufio.NewReader(c2), req); err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Errorf("deadline: %v", err)
	}
}

func TestLatencyStats(t *testing.T) {
	var rtts []time.Duration
	for i := 1000; i >= 1; i-- { // 1..1000 µs round trips, reversed
		rtts = append(rtts, time.Duration(i)*2*time.Microsecond)
	}
	s := latencyStats(rtts)
	is := func(v, us float64) bool { return math.Abs(v*1e6-us) < 1e-6 }
	if s.Samples != 1000 || !is(s.Min, 1) || !is(s.Max, 1000) || !is(s.Typical, 501) || !is(s.P99, 990) || !is(s.P999, 999) || !is(s.Avg, 500.5) {
		t.Errorf("%+v", s)
	}
	if e := latencyStats(nil); e.Samples != 0 || e.Max != 0 {
		t.Errorf("empty: %+v", e)
	}
}

// oneWay is the netem (or relay) delay added in each direction. It is large
// enough that a probe reporting the full round trip (2 × oneWay) or a
// quarter of it falls outside the tolerance below even on a loaded machine.
const oneWay = 500 * time.Microsecond

// TestNamespaceDelay measures over a veth pair between two private network
// namespaces, first as is, then with oneWay added in each direction (tc
// netem on both ends; where the kernel lacks netem, a relay that delays
// each chunk by the same amount in each direction). Tolerance: the typical
// one-way latency is at least oneWay (a delay can only add), and exceeds
// the undelayed measurement's minimum by at most 1.5 × oneWay at its own
// minimum.
//
// Then the link is shaped to 100 Mbit/s (tc tbf) and the streaming
// bandwidth must read between 80 % and 105 % of it (TCP/IP headers take
// about 4 % of the wire rate).
func TestNamespaceDelay(t *testing.T) {
	p := nstest.New(t)
	p.Link("vprobe0", "10.199.0.1/30", "vprobe1", "10.199.0.2/30")
	ln, err := p.B.Listen("tcp", "10.199.0.2:7000")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := func() (net.Conn, error) { return p.A.Dial("tcp", "10.199.0.2:7000") }
	req := Request{Mode: ModeLatency, Iterations: 2000}

	base, _ := runBoth(t, ln, dial, req)
	t.Logf("veth, no delay: typical %.1f µs, p99 %.1f µs", base.Typical*1e6, base.P99*1e6)

	errA, errB := p.A.Netem("vprobe0", oneWay, 0), p.B.Netem("vprobe1", oneWay, 0)
	via := "netem"
	if errors.Is(errA, nstest.ErrNoNetem) || errors.Is(errB, nstest.ErrNoNetem) {
		// The fallback: a relay in B delaying both directions.
		via = "relay (this kernel has no netem)"
		rl, err := p.B.Listen("tcp", "10.199.0.2:7001")
		if err != nil {
			t.Fatal(err)
		}
		defer rl.Close()
		go nstest.DelayRelay(rl, func() (net.Conn, error) { return p.B.Dial("tcp", "10.199.0.2:7000") }, oneWay)
		dial = func() (net.Conn, error) { return p.A.Dial("tcp", "10.199.0.2:7001") }
		// The relay's own cost belongs to the baseline.
		go nstest.DelayRelay(mustListen(t, p.B, "10.199.0.2:7002"), func() (net.Conn, error) { return p.B.Dial("tcp", "10.199.0.2:7000") }, 0)
		base, _ = runBoth(t, ln, func() (net.Conn, error) { return p.A.Dial("tcp", "10.199.0.2:7002") }, req)
		t.Logf("through the relay without delay: typical %.1f µs", base.Typical*1e6)
	} else if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	got, _ := runBoth(t, ln, dial, req)
	t.Logf("with %v each way via %s: typical %.1f µs, min %.1f µs, p99 %.1f µs", oneWay, via, got.Typical*1e6, got.Min*1e6, got.P99*1e6)
	if got.Typical < oneWay.Seconds() {
		t.Errorf("typical one-way latency %.1f µs is below the %v delay added to each direction", got.Typical*1e6, oneWay)
	}
	// The upper bound compares minimums: load on a shared machine only
	// adds to a sample, so the fastest of 2000 is the delay with the
	// least noise, while a probe reporting the round trip would add 2 ×
	// oneWay to every sample, its minimum included.
	if extra := got.Min - base.Min; extra > 1.5*oneWay.Seconds() {
		t.Errorf("the delay added %.1f µs one way to the fastest sample, more than 1.5 × %v: is the round trip halved?", extra*1e6, oneWay)
	}

	t.Run("shaped", func(t *testing.T) {
		const rate = 100e6
		_ = p.A.ClearQdisc("vprobe0")
		_ = p.B.ClearQdisc("vprobe1")
		if err := p.A.Shape("vprobe0", rate); errors.Is(err, nstest.ErrNoTBF) {
			t.Skip(err)
		} else if err != nil {
			t.Fatal(err)
		}
		ln2, err := p.B.Listen("tcp", "10.199.0.2:7003")
		if err != nil {
			t.Fatal(err)
		}
		defer ln2.Close()
		_, bw := runBoth(t, ln2, func() (net.Conn, error) { return p.A.Dial("tcp", "10.199.0.2:7003") },
			Request{Mode: ModeBandwidth, Duration: 2 * time.Second})
		bits := bw.BytesPerSecond * 8
		t.Logf("shaped to %.0f Mbit/s: measured %.1f Mbit/s, client CPU %.1f %%, server CPU %.1f %%", rate/1e6, bits/1e6, bw.CPU.ClientPercent, bw.CPU.ServerPercent)
		if bits < 0.8*rate || bits > 1.05*rate {
			t.Errorf("measured %.1f Mbit/s on a %.0f Mbit/s link", bits/1e6, rate/1e6)
		}
	})
}

func mustListen(t *testing.T, ns *nstest.NS, addr string) net.Listener {
	t.Helper()
	l, err := ns.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
