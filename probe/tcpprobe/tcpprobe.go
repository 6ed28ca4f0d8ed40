// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package tcpprobe measures a TCP path the way perftest measures a verbs
// path, so the two can stand side by side (the guide's §7 comparison of
// RDMA, IPoIB and Ethernet): ping-pong latency (half the round trip, with
// perftest's statistics) and streaming bandwidth, each with the CPU time
// both ends spent.
//
// It is native Go over an established connection: the responder (package
// control) hands over its authenticated control connection, so the probe
// runs over whichever address, and therefore netdev, the client dialled.
//
// CPU time is the thread's own (getrusage RUSAGE_THREAD) on a goroutine
// locked to its OS thread: the process's total would count whatever else
// the exporter does meanwhile. It misses the runtime's netpoller thread,
// which costs little next to the send and receive system calls.
package tcpprobe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"sort"
	"syscall"
	"time"
)

// Modes.
const (
	ModeLatency   = "lat"
	ModeBandwidth = "bw"
)

// Limits of a request; they bound what a peer can make a responder do.
const (
	MaxLatencySize   = 1 << 20
	MaxBandwidthSize = 8 << 20
	MaxIterations    = 1_000_000
	MinDuration      = 100 * time.Millisecond
	// Warmup round trips are not measured: the first ones pay for page
	// faults, scheduler wake-ups and TCP slow start.
	Warmup = 100
)

// Defaults, the guide's conditions for §7 ("blocks ≥ 128 KiB").
const (
	DefaultLatencySize   = 64
	DefaultIterations    = 10000
	DefaultBandwidthSize = 128 << 10
	DefaultDuration      = 3 * time.Second
)

// Request is what the client asks the server to do.
type Request struct {
	Mode       string        `json:"mode"`
	Size       int           `json:"size"`
	Iterations int           `json:"iterations,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`
}

// WithDefaults fills zero fields.
func (r Request) WithDefaults() Request {
	switch r.Mode {
	case ModeLatency:
		if r.Size == 0 {
			r.Size = DefaultLatencySize
		}
		if r.Iterations == 0 {
			r.Iterations = DefaultIterations
		}
	case ModeBandwidth:
		if r.Size == 0 {
			r.Size = DefaultBandwidthSize
		}
		if r.Duration == 0 {
			r.Duration = DefaultDuration
		}
	}
	return r
}

// Validate checks r against the limits and maxDuration (the responder's
// longest allowed run).
func (r Request) Validate(maxDuration time.Duration) error {
	switch r.Mode {
	case ModeLatency:
		if r.Size < 1 || r.Size > MaxLatencySize {
			return fmt.Errorf("tcp latency size %d: want 1..%d bytes", r.Size, MaxLatencySize)
		}
		if r.Iterations < 1 || r.Iterations > MaxIterations {
			return fmt.Errorf("tcp latency iterations %d: want 1..%d", r.Iterations, MaxIterations)
		}
		if r.Duration != 0 {
			return errors.New("tcp latency runs a count of iterations, not a duration")
		}
	case ModeBandwidth:
		if r.Size < 1 || r.Size > MaxBandwidthSize {
			return fmt.Errorf("tcp bandwidth size %d: want 1..%d bytes", r.Size, MaxBandwidthSize)
		}
		if r.Duration < MinDuration || (maxDuration > 0 && r.Duration > maxDuration) {
			return fmt.Errorf("tcp bandwidth duration %s: want %s..%s", r.Duration, MinDuration, maxDuration)
		}
		if r.Iterations != 0 {
			return errors.New("tcp bandwidth runs for a duration, not a count")
		}
	default:
		return fmt.Errorf("tcp probe mode %q: want %q or %q", r.Mode, ModeLatency, ModeBandwidth)
	}
	return nil
}

// Latency is the result of a ping-pong run. Latencies are half the round
// trip, in seconds, as perftest reports send and write latency.
type Latency struct {
	Samples int     `json:"samples"`
	Min     float64 `json:"min_seconds"`
	Typical float64 `json:"typical_seconds"`
	Avg     float64 `json:"avg_seconds"`
	Max     float64 `json:"max_seconds"`
	P99     float64 `json:"p99_seconds"`
	P999    float64 `json:"p999_seconds"`
	CPU     CPU     `json:"cpu"`
}

// Bandwidth is the result of a streaming run.
type Bandwidth struct {
	Bytes          int64   `json:"bytes"`
	Seconds        float64 `json:"seconds"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	CPU            CPU     `json:"cpu"`
}

// CPU is the CPU time each end spent during the measurement, and that time
// as a percentage of one core over the measurement's wall time.
type CPU struct {
	ClientSeconds float64 `json:"client_seconds"`
	ServerSeconds float64 `json:"server_seconds"`
	ClientPercent float64 `json:"client_percent"`
	ServerPercent float64 `json:"server_percent"`
}

// trailer is what the server sends after the measurement.
type trailer struct {
	Bytes      int64         `json:"bytes"`
	CPU        time.Duration `json:"cpu_ns"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	ServerNote string        `json:"error,omitempty"`
}

// threadCPU is the calling thread's user + system time. The caller must be
// locked to its thread.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	// RUSAGE_THREAD (1) is Linux-only and missing from package syscall's
	// constants.
	if err := syscall.Getrusage(1, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lockThread pins the goroutine to its thread for CPU accounting. Unlock
// before the goroutine ends: a goroutine that exits locked takes its thread
// down with it, and a child process started from that thread with
// Pdeathsig (the perftest runner's) would be killed.
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// watch applies ctx to conn: its deadline, and a close when it is
// cancelled, so blocked reads and writes return.
func watch(ctx context.Context, conn net.Conn) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
}

// Serve answers one request on conn, reading through r (the control
// channel's buffered reader, or conn itself): it echoes latency messages or
// sinks a stream, then sends a trailer with its CPU time. It does not close
// conn.
func Serve(ctx context.Context, conn net.Conn, r io.Reader, req Request) error {
	defer watch(ctx, conn)()
	defer lockThread()()
	cpu0, t0 := threadCPU(), time.Now()
	var n int64
	var err error
	switch req.Mode {
	case ModeLatency:
		buf := make([]byte, req.Size)
		for i := 0; i < req.Iterations+Warmup; i++ {
			if _, err = io.ReadFull(r, buf); err != nil {
				break
			}
			if _, err = conn.Write(buf); err != nil {
				break
			}
			n += int64(req.Size)
		}
	case ModeBandwidth:
		// The client half-closes after its duration; everything up to
		// the EOF is counted.
		buf := make([]byte, 256<<10)
		for {
			k, rerr := r.Read(buf)
			n += int64(k)
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				err = rerr
				break
			}
		}
	default:
		err = fmt.Errorf("tcp probe mode %q", req.Mode)
	}
	tr := trailer{Bytes: n, CPU: threadCPU() - cpu0, Elapsed: time.Since(t0)}
	if err != nil {
		tr.ServerNote = err.Error()
	}
	b, _ := json.Marshal(tr)
	if _, werr := conn.Write(append(b, '\n')); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("tcp probe server: %w", err)
	}
	return nil
}

// RunLatency is the client side of a latency request on conn. r is the
// reader of conn to use (the control channel may have buffered it).
func RunLatency(ctx context.Context, conn net.Conn, r *bufio.Reader, req Request) (*Latency, error) {
	if err := req.Validate(0); err != nil || req.Mode != ModeLatency {
		return nil, fmt.Errorf("tcp latency: %v", err)
	}
	defer watch(ctx, conn)()
	unlock := lockThread()
	msg := make([]byte, req.Size)
	for i := range msg {
		msg[i] = byte(i)
	}
	back := make([]byte, req.Size)
	samples := make([]time.Duration, 0, req.Iterations)
	var cpu0 time.Duration
	var t0 time.Time
	for i := 0; i < req.Iterations+Warmup; i++ {
		if i == Warmup {
			cpu0, t0 = threadCPU(), time.Now()
		}
		start := time.Now()
		if _, err := conn.Write(msg); err != nil {
			unlock()
			return nil, fmt.Errorf("tcp latency: write: %w", err)
		}
		if _, err := io.ReadFull(r, back); err != nil {
			unlock()
			return nil, fmt.Errorf("tcp latency: read: %w", err)
		}
		if i >= Warmup {
			samples = append(samples, time.Since(start))
		}
	}
	cpu, wall := threadCPU()-cpu0, time.Since(t0)
	unlock()
	tr, err := readTrailer(r)
	if err != nil {
		return nil, err
	}
	res := latencyStats(samples)
	res.CPU = cpuShare(cpu, tr.CPU, wall, tr.Elapsed)
	return res, nil
}

// RunBandwidth is the client side of a bandwidth request: it writes
// req.Size blocks for req.Duration, half-closes, and reads the server's
// count. Bandwidth is what the server received over the client's time from
// the first write to the server's answer.
func RunBandwidth(ctx context.Context, conn net.Conn, r *bufio.Reader, req Request) (*Bandwidth, error) {
	if err := req.Validate(0); err != nil || req.Mode != ModeBandwidth {
		return nil, fmt.Errorf("tcp bandwidth: %v", err)
	}
	cw, ok := conn.(interface{ CloseWrite() error })
	if !ok {
		return nil, errors.New("tcp bandwidth: connection cannot half-close")
	}
	defer watch(ctx, conn)()
	unlock := lockThread()
	block := make([]byte, req.Size)
	cpu0, t0 := threadCPU(), time.Now()
	end := t0.Add(req.Duration)
	for time.Now().Before(end) {
		if _, err := conn.Write(block); err != nil {
			unlock()
			return nil, fmt.Errorf("tcp bandwidth: write: %w", err)
		}
	}
	if err := cw.CloseWrite(); err != nil {
		unlock()
		return nil, fmt.Errorf("tcp bandwidth: close: %w", err)
	}
	cpu := threadCPU() - cpu0
	unlock()
	tr, err := readTrailer(r)
	if err != nil {
		return nil, err
	}
	wall := time.Since(t0)
	if tr.Bytes <= 0 {
		return nil, errors.New("tcp bandwidth: the server received nothing")
	}
	return &Bandwidth{
		Bytes:          tr.Bytes,
		Seconds:        wall.Seconds(),
		BytesPerSecond: float64(tr.Bytes) / wall.Seconds(),
		CPU:            cpuShare(cpu, tr.CPU, wall, tr.Elapsed),
	}, nil
}

func readTrailer(r *bufio.Reader) (trailer, error) {
	var tr trailer
	line, err := r.ReadBytes('\n')
	if err != nil {
		return tr, fmt.Errorf("tcp probe: server's result: %w", err)
	}
	if err := json.Unmarshal(line, &tr); err != nil {
		return tr, fmt.Errorf("tcp probe: server's result: %w", err)
	}
	if tr.ServerNote != "" {
		return tr, fmt.Errorf("tcp probe: server: %s", tr.ServerNote)
	}
	return tr, nil
}

func cpuShare(client, server, clientWall, serverWall time.Duration) CPU {
	c := CPU{ClientSeconds: client.Seconds(), ServerSeconds: server.Seconds()}
	if clientWall > 0 {
		c.ClientPercent = 100 * client.Seconds() / clientWall.Seconds()
	}
	if serverWall > 0 {
		c.ServerPercent = 100 * server.Seconds() / serverWall.Seconds()
	}
	return c
}

// latencyStats halves each round trip and summarises as perftest does:
// typical is the median, p99 and p99.9 the samples at ceil(p × n).
func latencyStats(rtts []time.Duration) *Latency {
	n := len(rtts)
	if n == 0 {
		return &Latency{}
	}
	s := make([]float64, n)
	sum := 0.0
	for i, d := range rtts {
		s[i] = d.Seconds() / 2
		sum += s[i]
	}
	sort.Float64s(s)
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(n))) - 1
		return s[min(max(i, 0), n-1)]
	}
	return &Latency{
		Samples: n,
		Min:     s[0],
		Typical: s[n/2],
		Avg:     sum / float64(n),
		Max:     s[n-1],
		P99:     pct(0.99),
		P999:    pct(0.999),
	}
}
