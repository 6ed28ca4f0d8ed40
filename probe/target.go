// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"fmt"
	"net"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
)

// Target is where a probe runs: a loopback on this host or a peer.
type Target struct {
	// Name is the peer label.
	Name string
	Mode Mode
	// Device, Port, GIDIndex: the local HCA port (the client side).
	Device   string
	Port     int
	GIDIndex *int
	// Loopback: the server side's device and port (same as the client's
	// for ModeLoopback).
	PeerDevice   string
	PeerPort     int
	PeerGIDIndex *int
	// Peers: the responder, the host perftest connects to, the peer's
	// device and its addresses for the transport comparison.
	Address         string
	PerftestHost    string
	RemoteDevice    string
	IPoIBAddress    string
	EthernetAddress string
	Tests           []perftest.Test
	// Memory is where the buffers are; GPU the GPU's index for MemoryGPU.
	// A GPU target with an empty Device runs on the HCA nearest the GPU,
	// found when it runs.
	Memory Memory
	GPU    int
}

// Targets builds the targets of the config's probe section, which
// config.Parse has already validated.
func Targets(p *config.Probe) ([]Target, error) {
	var out []Target
	for _, l := range p.Loopback {
		t := Target{Name: l.LoopbackName(), Mode: ModeLoopback, Memory: MemoryHost, Device: l.Device, Port: portOr1(l.Port), GIDIndex: l.GIDIndex,
			PeerDevice: l.PeerDevice, PeerPort: l.PeerPort, PeerGIDIndex: l.PeerGIDIndex}
		if t.PeerDevice == "" {
			t.PeerDevice = t.Device
		}
		if t.PeerPort == 0 {
			t.PeerPort = t.Port
		}
		if t.PeerGIDIndex == nil {
			t.PeerGIDIndex = t.GIDIndex
		}
		if t.PeerDevice != t.Device || t.PeerPort != t.Port {
			t.Mode = ModeLoopbackCable
		}
		tests, err := parseTests(p.TestsOrDefault(l.Tests))
		if err != nil {
			return nil, fmt.Errorf("probe.loopback %s: %w", t.Name, err)
		}
		t.Tests = tests
		out = append(out, t)
	}
	for _, pe := range p.Peers {
		t := Target{Name: pe.Name, Mode: ModePeer, Memory: MemoryHost, Device: pe.Device, Port: portOr1(pe.Port), GIDIndex: pe.GIDIndex,
			Address: pe.Address, PerftestHost: pe.PerftestHost, RemoteDevice: pe.RemoteDevice,
			IPoIBAddress: pe.IPoIBAddress, EthernetAddress: pe.EthernetAddress}
		if t.PerftestHost == "" {
			host, _, err := net.SplitHostPort(pe.Address)
			if err != nil {
				return nil, fmt.Errorf("probe.peers %s: %w", pe.Name, err)
			}
			t.PerftestHost = host
		}
		if err := perftest.ValidateHost(t.PerftestHost); err != nil {
			return nil, fmt.Errorf("probe.peers %s: %w", pe.Name, err)
		}
		tests, err := parseTests(p.TestsOrDefault(pe.Tests))
		if err != nil {
			return nil, fmt.Errorf("probe.peers %s: %w", pe.Name, err)
		}
		t.Tests = tests
		out = append(out, t)
	}
	for _, g := range p.GPU {
		t := Target{Name: g.GPUName(), Mode: ModeLoopback, Memory: MemoryGPU, GPU: *g.GPU, Device: g.Device,
			Port: portOr1(g.Port), GIDIndex: g.GIDIndex}
		tests, err := parseTests(config.GPUTestsOrDefault(g.Tests))
		if err != nil {
			return nil, fmt.Errorf("probe.gpu %s: %w", t.Name, err)
		}
		t.Tests = tests
		out = append(out, t)
	}
	return out, nil
}

func portOr1(p int) int {
	if p == 0 {
		return 1
	}
	return p
}

func parseTests(names []string) ([]perftest.Test, error) {
	var out []perftest.Test
	for _, n := range names {
		t, err := perftest.ParseTest(n)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Params are the perftest settings of test from the config: size and
// iterations or duration per kind.
func Params(p *config.Probe, test perftest.Test) perftest.Params {
	run := p.LatencyRun()
	if test.Bandwidth() {
		run = p.BandwidthRun()
	}
	return perftest.Params{Test: test, Size: run.Size, Iterations: run.Iterations, Duration: durationOf(run.Duration)}
}

// Pair is one (target, test) of the rotation.
type Pair struct {
	Target *Target
	Test   perftest.Test
}

// Rotation interleaves the targets' tests: every target's first test, then
// every target's second, so each target gets a first result early.
func Rotation(targets []Target) []Pair {
	var out []Pair
	for i := 0; ; i++ {
		added := false
		for j := range targets {
			if i < len(targets[j].Tests) {
				out = append(out, Pair{Target: &targets[j], Test: targets[j].Tests[i]})
				added = true
			}
		}
		if !added {
			return out
		}
	}
}
