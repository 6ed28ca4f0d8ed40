// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/bench/control"
	"github.com/rdma-doctor/rdma_doctor/bench/perftest"
	"github.com/rdma-doctor/rdma_doctor/bench/probe"
	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/gpu"
)

// Exit codes of rdma_doctor probe.
const (
	probeExitOK     = 0
	probeExitFailed = 1 // the probe ran and failed
	probeExitUsage  = 2 // bad input: nothing was started
)

// defaultResponderPort is the port of a responder named as HOST without
// :PORT on the command line.
const defaultResponderPort = "9874"

type probeFlags struct {
	test                   string
	peer                   string
	device                 string
	port                   int
	gid                    int
	peerDevice             string
	peerPort               int
	peerGID                int
	remoteDevice           string
	size, iterations       int
	duration               time.Duration
	format                 string
	secretFile             string
	compare                string
	compareIPoIB, compareE string
	tcpIterations          int
	tcpDuration            time.Duration
}

func setupProbe(cmd *kingpin.CmdClause) func(context.Context, *App) int {
	f := &probeFlags{}
	cmd.Flag("test", "perftest test: ib_write_lat, ib_read_lat, ib_send_lat, ib_write_bw, ib_read_bw, ib_send_bw.").Default("ib_write_lat").StringVar(&f.test)
	cmd.Flag("peer", "A peer from probe.peers, or HOST[:PORT] of a responder. Default: loopback on this host.").PlaceHolder("PEER").StringVar(&f.peer)
	cmd.Flag("device", "Local RDMA device (default: the config target's).").PlaceHolder("DEVICE").StringVar(&f.device)
	cmd.Flag("port", "Local HCA port.").Default("0").IntVar(&f.port)
	cmd.Flag("gid-index", "Local GID index (-x), for RoCE; -1: perftest's choice.").Default("-1").IntVar(&f.gid)
	cmd.Flag("peer-device", "Loopback: the server side's device (another local HCA: the traffic crosses the cable).").PlaceHolder("DEVICE").StringVar(&f.peerDevice)
	cmd.Flag("peer-port", "Loopback: the server side's HCA port.").Default("0").IntVar(&f.peerPort)
	cmd.Flag("peer-gid-index", "Loopback: the server side's GID index; -1: as --gid-index.").Default("-1").IntVar(&f.peerGID)
	cmd.Flag("remote-device", "Peer: its device (one of its responder.devices).").StringVar(&f.remoteDevice)
	cmd.Flag("size", "Message size in bytes (default: probe.latency / probe.bandwidth).").Default("0").IntVar(&f.size)
	cmd.Flag("iterations", "Iterations (default: probe.latency / probe.bandwidth).").Default("0").IntVar(&f.iterations)
	cmd.Flag("duration", "Bandwidth tests: run for this long instead of a count (5s..300s).").Default("0s").DurationVar(&f.duration)
	cmd.Flag("format", "Output: table or json.").Default("table").EnumVar(&f.format, "table", "json")
	cmd.Flag("secret-file", "Shared secret of the responders (default: probe.secret_file).").PlaceHolder("FILE").StringVar(&f.secretFile)
	cmd.Flag("compare", "Print the guide's transport comparison (RDMA, IPoIB, Ethernet: latency, bandwidth, CPU) with this peer.").PlaceHolder("PEER").StringVar(&f.compare)
	cmd.Flag("compare.ipoib-address", "The peer's responder over IPoIB, HOST:PORT (default: the peer's ipoib_address).").StringVar(&f.compareIPoIB)
	cmd.Flag("compare.ethernet-address", "The peer's responder over Ethernet, HOST:PORT (default: the peer's ethernet_address).").StringVar(&f.compareE)
	cmd.Flag("compare.tcp-iterations", "TCP latency round trips.").Default("10000").IntVar(&f.tcpIterations)
	cmd.Flag("compare.tcp-duration", "TCP bandwidth stream length.").Default("3s").DurationVar(&f.tcpDuration)
	return func(ctx context.Context, a *App) int { return runProbe(ctx, a, f, os.Stdout, os.Stderr) }
}

// newProber builds the prober of the config's probe section. secretFile
// overrides probe.secret_file.
func newProber(a *App, secretFile string) (*probe.Prober, error) {
	cfg := &a.Config.Probe
	// A probe killed mid-run (SIGKILL, OOM) leaves its perftest work
	// directory; the next start removes those of processes that are gone.
	if n, err := perftest.RemoveStaleWorkDirs(); err != nil {
		a.Logger.Warn("removing perftest work directories of killed runs", "err", err)
	} else if n > 0 {
		a.Logger.Info("removed perftest work directories of killed runs", "count", n)
	}
	p := &probe.Prober{
		Runner: &perftest.Runner{Dir: cfg.PerftestDir, Proc: a.Host.FS().Proc, Logger: a.Logger.With("component", "perftest"), Reaper: a.Reaper},
		Sys:    a.Host.FS().Sys,
		Config: cfg,
		// probe.gpu targets find their GPU and its nearest HCA in the
		// host snapshot's GPU source (cached on the slow interval).
		GPUs:   func(ctx context.Context) (*gpu.Snapshot, error) { return a.Host.Snapshot().GPUs(ctx) },
		Logger: a.Logger.With("component", "probe"),
	}
	if secretFile == "" {
		secretFile = cfg.SecretFile
	}
	if secretFile != "" {
		secret, warning, err := control.LoadSecret(secretFile)
		if err != nil {
			return nil, err
		}
		if warning != "" {
			a.Logger.Warn(warning)
		}
		p.Client = &control.Client{Secret: secret}
	}
	return p, nil
}

func runProbe(ctx context.Context, a *App, f *probeFlags, stdout, stderr io.Writer) int {
	usage := func(err error) int {
		errorf(stderr, "probe: %v", err)
		return probeExitUsage
	}
	prober, err := newProber(a, f.secretFile)
	if err != nil {
		return usage(err)
	}
	if f.compare != "" {
		return runCompare(ctx, a, f, prober, stdout, stderr)
	}
	test, err := perftest.ParseTest(f.test)
	if err != nil {
		return usage(err)
	}
	target, err := probeTarget(&a.Config.Probe, f, f.peer)
	if err != nil {
		return usage(err)
	}
	// The command line's settings override the config's, then everything
	// is validated before anything starts.
	cfg := *prober.Config
	if f.size > 0 {
		cfg.Latency.Size, cfg.Bandwidth.Size = f.size, f.size
	}
	if f.iterations > 0 {
		cfg.Latency.Iterations, cfg.Bandwidth.Iterations, cfg.Bandwidth.Duration = f.iterations, f.iterations, 0
	}
	if f.duration > 0 {
		cfg.Bandwidth.Duration, cfg.Bandwidth.Iterations = config.Duration(f.duration), 0
	}
	if f.duration > 0 && !test.Bandwidth() {
		return usage(fmt.Errorf("--duration: %s is a latency test; use --iterations", test))
	}
	if f.size < 0 || f.iterations < 0 || f.duration < 0 {
		return usage(errors.New("--size, --iterations and --duration must not be negative"))
	}
	prober.Config = &cfg
	if err := probe.Params(&cfg, test).Validate(); err != nil {
		return usage(err)
	}

	res := prober.Run(ctx, target, test)
	if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		writeResult(stdout, &res)
	}
	if !res.Success {
		return probeExitFailed
	}
	return probeExitOK
}

// probeTarget finds the target: a configured peer by name, a responder by
// HOST[:PORT], or loopback (the first configured loopback with the flags
// applied over it).
func probeTarget(cfg *config.Probe, f *probeFlags, peer string) (*probe.Target, error) {
	configured, err := probe.Targets(cfg)
	if err != nil {
		return nil, err
	}
	var t probe.Target
	switch {
	case peer == "" || peer == "loopback":
		t = probe.Target{Name: "loopback", Mode: probe.ModeLoopback, Port: 1}
		for _, c := range configured {
			if c.Mode != probe.ModePeer && c.Memory != probe.MemoryGPU && (f.device == "" || c.Device == f.device) {
				t = c
				break
			}
		}
		if f.peerDevice != "" {
			t.PeerDevice = f.peerDevice
		}
		if f.peerPort > 0 {
			t.PeerPort = f.peerPort
		}
		if f.peerGID >= 0 {
			t.PeerGIDIndex = &f.peerGID
		}
	default:
		found := false
		for _, c := range configured {
			if c.Mode == probe.ModePeer && c.Name == peer {
				t, found = c, true
				break
			}
		}
		if !found {
			host, port, err := splitPeer(peer)
			if err != nil {
				return nil, err
			}
			t = probe.Target{Name: host, Mode: probe.ModePeer, Port: 1, Address: net.JoinHostPort(host, port), PerftestHost: host}
		}
		if f.remoteDevice != "" {
			if !perftest.ValidDevice(f.remoteDevice) {
				return nil, fmt.Errorf("--remote-device %q: not an RDMA device name", f.remoteDevice)
			}
			t.RemoteDevice = f.remoteDevice
		}
	}
	if f.device != "" {
		t.Device = f.device
	}
	if f.port > 0 {
		t.Port = f.port
	}
	if f.gid >= 0 {
		t.GIDIndex = &f.gid
	}
	if t.Mode != probe.ModePeer {
		if t.PeerDevice == "" {
			t.PeerDevice = t.Device
		}
		if t.PeerPort == 0 {
			t.PeerPort = t.Port
		}
		if t.PeerGIDIndex == nil {
			t.PeerGIDIndex = t.GIDIndex
		}
		t.Mode = probe.ModeLoopback
		if t.PeerDevice != t.Device || t.PeerPort != t.Port {
			t.Mode = probe.ModeLoopbackCable
			if t.Name == "loopback" {
				t.Name = "loopback:" + t.PeerDevice + "/" + strconv.Itoa(t.PeerPort)
			}
		}
	}
	for _, d := range []string{t.Device, t.PeerDevice} {
		if d != "" && !perftest.ValidDevice(d) {
			return nil, fmt.Errorf("device %q: not an RDMA device name", d)
		}
	}
	return &t, nil
}

// splitPeer accepts HOST or HOST:PORT with a host name or IP address.
func splitPeer(s string) (host, port string, err error) {
	host, port = s, defaultResponderPort
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	if err := perftest.ValidateHost(host); err != nil {
		return "", "", fmt.Errorf("--peer: %q is neither a configured peer nor a host name or address", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("--peer %q: bad port", s)
	}
	return host, port, nil
}

func writeResult(w io.Writer, r *probe.Result) {
	path := fmt.Sprintf("%s/%d", r.Device, r.Port)
	switch r.Mode {
	case probe.ModePeer:
		path += " -> " + r.Peer
		if r.PeerDevice != "" {
			path += " " + r.PeerDevice
		}
	default:
		path += fmt.Sprintf(" -> %s/%d", r.PeerDevice, r.PeerPort)
	}
	fmt.Fprintf(w, "peer       %s (%s, %s)\n", r.Peer, r.Mode, path)
	fmt.Fprintf(w, "test       %s\n", r.Test)
	if g := r.GPU; g != nil {
		fmt.Fprintf(w, "memory     GPU%d %s (%s to %s)\n", g.Index, g.Address, orUnknown(g.Link), orUnknown(r.Device))
	}
	if !r.Success {
		fmt.Fprintf(w, "result     FAILED after %.2f s: %s\n", r.Duration.Seconds(), r.ErrorKind)
		fmt.Fprintf(w, "error      %s\n", strings.ReplaceAll(r.Error, "\n", "\n           "))
		return
	}
	fmt.Fprintf(w, "result     ok in %.2f s, %d bytes x %d iterations\n", r.Duration.Seconds(), r.Size, r.Iterations)
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, "latency    typical %s  min %s  avg %s  max %s", probe.FormatSeconds(l.Typical), probe.FormatSeconds(l.Min),
			probe.FormatSeconds(l.Avg), probe.FormatSeconds(l.Max))
		if l.HasPercentiles {
			fmt.Fprintf(w, "  p99 %s  p99.9 %s", probe.FormatSeconds(l.P99), probe.FormatSeconds(l.P999))
		}
		fmt.Fprintln(w)
	}
	if b := r.Bandwidth; b != nil {
		fmt.Fprintf(w, "bandwidth  average %s", probe.FormatRate(b.Average))
		if b.PeakMeasured {
			fmt.Fprintf(w, "  peak %s", probe.FormatRate(b.Peak))
		}
		if ratio, ok := r.BandwidthRatio(); ok {
			fmt.Fprintf(w, "  (%.1f %% of the port's %s)", 100*ratio, probe.FormatRate(r.PortRate))
		}
		fmt.Fprintln(w)
	}
	if r.ClientCPU > 0 || r.ServerCPU > 0 {
		fmt.Fprintf(w, "cpu        client %.2f s, server %.2f s\n", r.ClientCPU.Seconds(), r.ServerCPU.Seconds())
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note       %s\n", n)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func runCompare(ctx context.Context, a *App, f *probeFlags, prober *probe.Prober, stdout, stderr io.Writer) int {
	usage := func(err error) int {
		errorf(stderr, "probe --compare: %v", err)
		return probeExitUsage
	}
	if f.compare == "loopback" {
		return usage(errors.New("the comparison needs a peer, not loopback"))
	}
	t, err := probeTarget(&a.Config.Probe, f, f.compare)
	if err != nil {
		return usage(err)
	}
	for flag, v := range map[string]*string{"compare.ipoib-address": &f.compareIPoIB, "compare.ethernet-address": &f.compareE} {
		if *v == "" {
			continue
		}
		host, port, err := net.SplitHostPort(*v)
		if err != nil || perftest.ValidateHost(host) != nil {
			return usage(fmt.Errorf("--%s %q: want HOST:PORT", flag, *v))
		}
		*v = net.JoinHostPort(host, port)
	}
	if f.compareIPoIB != "" {
		t.IPoIBAddress = f.compareIPoIB
	}
	if f.compareE != "" {
		t.EthernetAddress = f.compareE
	}
	if prober.Client == nil {
		return usage(errors.New("no secret: set probe.secret_file or --secret-file"))
	}
	s := probe.DefaultCompareSettings()
	s.TCPLatency.Iterations = f.tcpIterations
	s.TCPBandwidth.Duration = f.tcpDuration
	for _, r := range []control.Request{s.TCPLatency, s.TCPBandwidth} {
		if err := control.TCPRequest(r).Validate(5 * time.Minute); err != nil {
			return usage(err)
		}
	}
	c := prober.Compare(ctx, t, s)
	if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(c)
	} else {
		_ = c.WriteTable(stdout)
	}
	for _, tr := range c.Transports {
		if len(tr.Errors) > 0 {
			return probeExitFailed
		}
	}
	return probeExitOK
}
