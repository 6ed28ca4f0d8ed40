// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/probe/control"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
)

// Exit codes of `rdma_doctor probe`.
const (
	ExitOK     = 0
	ExitFailed = 1 // the probe ran and failed
	ExitUsage  = 2 // bad input: nothing was started
)

// DefaultResponderPort is the port of a responder named as HOST without
// :PORT on the command line.
const DefaultResponderPort = "9874"

// Command is `rdma_doctor probe` once its flags are parsed (each field is
// the flag of its name): one perftest run, or with Compare the transport
// comparison with a peer. main declares the flags and builds the prober;
// Run picks the target, checks the settings and prints the result.
type Command struct {
	Test                          string
	Peer                          string
	Device                        string
	Port                          int
	GID                           int // --gid-index; -1: perftest's choice
	PeerDevice                    string
	PeerPort                      int
	PeerGID                       int // --peer-gid-index; -1: as GID
	RemoteDevice                  string
	Size, Iterations              int
	Duration                      time.Duration
	Format                        string // table or json
	SecretFile                    string
	Compare                       string
	CompareIPoIB, CompareEthernet string
	TCPIterations                 int
	TCPDuration                   time.Duration
}

// Run builds the prober (newProber, given --secret-file), runs the probe
// or the comparison and prints it. It returns the exit code: 0 ok, 1 the
// probe ran and failed, 2 bad input (nothing started), that last one
// with the error to print.
func (f *Command) Run(ctx context.Context, newProber func(secretFile string) (*Prober, error), stdout io.Writer) (int, error) {
	usage := func(err error) (int, error) {
		return ExitUsage, fmt.Errorf("probe: %w", err)
	}
	prober, err := newProber(f.SecretFile)
	if err != nil {
		return usage(err)
	}
	if f.Compare != "" {
		return f.runCompare(ctx, prober, stdout)
	}
	test, err := perftest.ParseTest(f.Test)
	if err != nil {
		return usage(err)
	}
	target, err := f.target(prober.Config, f.Peer)
	if err != nil {
		return usage(err)
	}
	// The command line's settings override the config's, then everything
	// is validated before anything starts.
	cfg := *prober.Config
	if f.Size > 0 {
		cfg.Latency.Size, cfg.Bandwidth.Size = f.Size, f.Size
	}
	if f.Iterations > 0 {
		cfg.Latency.Iterations, cfg.Bandwidth.Iterations, cfg.Bandwidth.Duration = f.Iterations, f.Iterations, 0
	}
	if f.Duration > 0 {
		cfg.Bandwidth.Duration, cfg.Bandwidth.Iterations = model.Duration(f.Duration), 0
	}
	if f.Duration > 0 && !test.Bandwidth() {
		return usage(fmt.Errorf("--duration: %s is a latency test; use --iterations", test))
	}
	if f.Size < 0 || f.Iterations < 0 || f.Duration < 0 {
		return usage(errors.New("--size, --iterations and --duration must not be negative"))
	}
	prober.Config = &cfg
	if err := Params(&cfg, test).Validate(); err != nil {
		return usage(err)
	}

	res := prober.Run(ctx, target, test)
	if f.Format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		WriteResult(stdout, &res)
	}
	if !res.Success {
		return ExitFailed, nil
	}
	return ExitOK, nil
}

// target finds the target: a configured peer by name, a responder by
// HOST[:PORT], or loopback (the first configured loopback with the flags
// applied over it).
func (f *Command) target(cfg *config.Probe, peer string) (*Target, error) {
	configured, err := Targets(cfg)
	if err != nil {
		return nil, err
	}
	var t Target
	switch {
	case peer == "" || peer == "loopback":
		t = Target{Name: "loopback", Mode: ModeLoopback, Port: 1}
		for _, c := range configured {
			if c.Mode != ModePeer && c.Memory != MemoryGPU && (f.Device == "" || c.Device == f.Device) {
				t = c
				break
			}
		}
		if f.PeerDevice != "" {
			t.PeerDevice = f.PeerDevice
		}
		if f.PeerPort > 0 {
			t.PeerPort = f.PeerPort
		}
		if f.PeerGID >= 0 {
			t.PeerGIDIndex = &f.PeerGID
		}
	default:
		found := false
		for _, c := range configured {
			if c.Mode == ModePeer && c.Name == peer {
				t, found = c, true
				break
			}
		}
		if !found {
			host, port, err := splitPeer(peer)
			if err != nil {
				return nil, err
			}
			t = Target{Name: host, Mode: ModePeer, Port: 1, Address: net.JoinHostPort(host, port), PerftestHost: host}
		}
		if f.RemoteDevice != "" {
			if !perftest.ValidDevice(f.RemoteDevice) {
				return nil, fmt.Errorf("--remote-device %q: not an RDMA device name", f.RemoteDevice)
			}
			t.RemoteDevice = f.RemoteDevice
		}
	}
	if f.Device != "" {
		t.Device = f.Device
	}
	if f.Port > 0 {
		t.Port = f.Port
	}
	if f.GID >= 0 {
		t.GIDIndex = &f.GID
	}
	if t.Mode != ModePeer {
		if t.PeerDevice == "" {
			t.PeerDevice = t.Device
		}
		if t.PeerPort == 0 {
			t.PeerPort = t.Port
		}
		if t.PeerGIDIndex == nil {
			t.PeerGIDIndex = t.GIDIndex
		}
		t.Mode = ModeLoopback
		if t.PeerDevice != t.Device || t.PeerPort != t.Port {
			t.Mode = ModeLoopbackCable
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
	host, port = s, DefaultResponderPort
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

// WriteResult prints one probe result as the command's table.
func WriteResult(w io.Writer, r *Result) {
	path := fmt.Sprintf("%s/%d", r.Device, r.Port)
	switch r.Mode {
	case ModePeer:
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
		fmt.Fprintf(w, "latency    typical %s  min %s  avg %s  max %s", FormatSeconds(l.Typical), FormatSeconds(l.Min),
			FormatSeconds(l.Avg), FormatSeconds(l.Max))
		if l.HasPercentiles {
			fmt.Fprintf(w, "  p99 %s  p99.9 %s", FormatSeconds(l.P99), FormatSeconds(l.P999))
		}
		fmt.Fprintln(w)
	}
	if b := r.Bandwidth; b != nil {
		fmt.Fprintf(w, "bandwidth  average %s", FormatRate(b.Average))
		if b.PeakMeasured {
			fmt.Fprintf(w, "  peak %s", FormatRate(b.Peak))
		}
		if ratio, ok := r.BandwidthRatio(); ok {
			fmt.Fprintf(w, "  (%.1f %% of the port's %s)", 100*ratio, FormatRate(r.PortRate))
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

func (f *Command) runCompare(ctx context.Context, prober *Prober, stdout io.Writer) (int, error) {
	usage := func(err error) (int, error) {
		return ExitUsage, fmt.Errorf("probe --compare: %w", err)
	}
	if f.Compare == "loopback" {
		return usage(errors.New("the comparison needs a peer, not loopback"))
	}
	t, err := f.target(prober.Config, f.Compare)
	if err != nil {
		return usage(err)
	}
	for flag, v := range map[string]*string{"compare.ipoib-address": &f.CompareIPoIB, "compare.ethernet-address": &f.CompareEthernet} {
		if *v == "" {
			continue
		}
		host, port, err := net.SplitHostPort(*v)
		if err != nil || perftest.ValidateHost(host) != nil {
			return usage(fmt.Errorf("--%s %q: want HOST:PORT", flag, *v))
		}
		*v = net.JoinHostPort(host, port)
	}
	if f.CompareIPoIB != "" {
		t.IPoIBAddress = f.CompareIPoIB
	}
	if f.CompareEthernet != "" {
		t.EthernetAddress = f.CompareEthernet
	}
	if prober.Client == nil {
		return usage(errors.New("no secret: set probe.secret_file or --secret-file"))
	}
	s := DefaultCompareSettings()
	s.TCPLatency.Iterations = f.TCPIterations
	s.TCPBandwidth.Duration = f.TCPDuration
	for _, r := range []control.Request{s.TCPLatency, s.TCPBandwidth} {
		if err := control.TCPRequest(r).Validate(5 * time.Minute); err != nil {
			return usage(err)
		}
	}
	c := prober.Compare(ctx, t, s)
	if f.Format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(c)
	} else {
		_ = c.WriteTable(stdout)
	}
	for _, tr := range c.Transports {
		if len(tr.Errors) > 0 {
			return ExitFailed, nil
		}
	}
	return ExitOK, nil
}
