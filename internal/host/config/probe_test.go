// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	rdmanames "github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"os"
	"strings"
	"testing"
	"time"
)

func TestProbeDefaults(t *testing.T) {
	c, err := Parse([]byte("probe: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Probe
	if p.Enabled || p.Responder.Enabled {
		t.Error("probe or responder on by default")
	}
	if p.IntervalOrDefault() != 5*time.Minute || p.JitterOrDefault() != 0.2 || p.ScrapeGuardOrDefault() != 2*time.Second {
		t.Errorf("defaults %v %v %v", p.IntervalOrDefault(), p.JitterOrDefault(), p.ScrapeGuardOrDefault())
	}
	if l := p.LatencyRun(); l.Size != 2 || l.Iterations != 10000 || l.Duration != 0 {
		t.Errorf("latency %+v", l)
	}
	if b := p.BandwidthRun(); b.Size != 65536 || time.Duration(b.Duration) != 5*time.Second {
		t.Errorf("bandwidth %+v", b)
	}
	if lo, hi := p.Responder.PortRange(); lo != 18515 || hi != 18530 {
		t.Errorf("ports %d-%d", lo, hi)
	}
	if got := p.TestsOrDefault(nil); strings.Join(got, ",") != "ib_write_lat,ib_write_bw" {
		t.Errorf("tests %v", got)
	}
	for _, tc := range []struct {
		l    ProbeLoopback
		want string
	}{
		{ProbeLoopback{Device: "mlx5_0"}, "loopback"},
		{ProbeLoopback{Device: "mlx5_0", Port: 1, PeerPort: 1}, "loopback"},
		{ProbeLoopback{Device: "mlx5_0", PeerDevice: "mlx5_1"}, "loopback:mlx5_1/1"},
		{ProbeLoopback{Device: "mlx5_0", Port: 1, PeerPort: 2}, "loopback:mlx5_0/2"},
		{ProbeLoopback{Name: "cable-a", Device: "mlx5_0"}, "cable-a"},
	} {
		if got := tc.l.LoopbackName(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.l, got, tc.want)
		}
	}
}

func TestProbeParse(t *testing.T) {
	c, err := Parse([]byte(`
probe:
  enabled: true
  interval: 1m
  secret_file: /etc/s
  bandwidth: {iterations: 5000}
  loopback:
    - {device: mlx5_0, gid_index: 0}
  peers:
    - {name: n2, address: "[fd00::2]:9874", device: mlx5_0, tests: [ib_read_lat]}
  responder:
    enabled: true
    listen: ["10.0.0.1:9874"]
    allowed_tests: [tcp_lat]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Probe
	if !p.Enabled || p.IntervalOrDefault() != time.Minute || *p.Loopback[0].GIDIndex != 0 || p.Peers[0].Tests[0] != "ib_read_lat" {
		t.Errorf("%+v", p)
	}
	if b := p.BandwidthRun(); b.Iterations != 5000 || b.Duration != 0 {
		t.Errorf("iterations should replace the default duration: %+v", b)
	}
}

func TestProbeParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"probe: {intervl: 5m}\n", "intervl"},
		{"probe: {jitter: 1.5}\n", "jitter"},
		{"probe: {tests: [ib_fast_bw]}\n", `unknown test "ib_fast_bw"`},
		{"probe: {tests: [tcp_lat]}\n", "only from rdma_doctor probe --compare"},
		{"probe: {tests: [ib_send_lat, ib_send_lat]}\n", "twice"},
		{"probe: {latency: {size: 0x7fffffff}}\n", "probe.latency.size"},
		{"probe: {latency: {duration: 10s}}\n", "duration"},
		{"probe: {bandwidth: {duration: 3s}}\n", "5s..300s"},
		{"probe: {bandwidth: {duration: 10s, iterations: 100}}\n", "exclude"},
		{"probe: {bandwidth: {iterations: 2}}\n", "iterations 2"},
		{"probe: {loopback: [{port: 1}]}\n", "probe.loopback[0].device: required"},
		{"probe: {loopback: [{device: '-d'}]}\n", "not an RDMA device name"},
		{"probe: {loopback: [{device: mlx5_0, gid_index: 5000}]}\n", "gid_index"},
		{"probe: {loopback: [{device: mlx5_0}, {device: mlx5_0}]}\n", "give it a name"},
		{"probe: {loopback: [{device: mlx5_0, peer_device: 'a b'}]}\n", "peer.device"},
		{"probe: {secret_file: s, peers: [{address: 'n2:1', device: mlx5_0}]}\n", "name"},
		{"probe: {secret_file: s, peers: [{name: loopback, address: 'n2:1', device: mlx5_0}]}\n", "loopback"},
		{"probe: {secret_file: s, peers: [{name: n2, address: 'n2', device: mlx5_0}]}\n", "host:port"},
		{"probe: {secret_file: s, peers: [{name: n2, address: 'bad host:1', device: mlx5_0}]}\n", "not a host name"},
		{"probe: {secret_file: s, peers: [{name: n2, address: 'n2:http', device: mlx5_0}]}\n", "port must be a number"},
		{"probe: {secret_file: s, peers: [{name: n2, address: 'n2:1', device: mlx5_0, perftest_host: '-x'}]}\n", "perftest_host"},
		{"probe: {secret_file: s, peers: [{name: n2, address: 'n2:1', device: mlx5_0}, {name: n2, address: 'n3:1', device: mlx5_0}]}\n", "used twice"},
		{"probe: {peers: [{name: n2, address: 'n2:1', device: mlx5_0}]}\n", "secret_file is required"},
		{"probe: {responder: {enabled: true, allowed_tests: [tcp_lat]}}\n", "listen: required"},
		{"probe: {responder: {enabled: true, listen: ['10.0.0.1:9874']}}\n", "allowed_tests: required"},
		{"probe: {secret_file: s, responder: {enabled: true, listen: ['10.0.0.1:9874'], allowed_tests: [ib_write_bw]}}\n", "devices: required"},
		{"probe: {responder: {enabled: true, listen: ['10.0.0.1:9874'], allowed_tests: [tcp_bw]}}\n", "secret_file is required"},
		{"probe: {responder: {listen: [':9874']}}\n", "empty host"},
		{"probe: {responder: {allowed_clients: [10.0.0.0]}}\n", "CIDR"},
		{"probe: {responder: {perftest_ports: 80-90}}\n", "perftest_ports"},
		{"probe: {responder: {perftest_ports: 20000-19000}}\n", "perftest_ports"},
		{"probe: {responder: {allowed_tests: [ib_atomic_bw]}}\n", "unknown test"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error naming %q", tc.in, err, tc.want)
		}
	}
	// Errors name the line.
	_, err := Parse([]byte("probe:\n  loopback:\n    - device: mlx5_0\n    - device: 'x y'\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("want the line of the bad entry: %v", err)
	}
}

// FuzzProbeSection: any YAML either fails to parse or yields a probe
// section whose values respect the limits the runner relies on.
func FuzzProbeSection(f *testing.F) {
	if b, err := os.ReadFile(examplePath); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"probe: {enabled: true, loopback: [{device: mlx5_0}]}\n",
		"probe: {secret_file: s, peers: [{name: n2, address: 'n2:9874', device: mlx5_0, gid_index: 3}]}\n",
		"probe: {responder: {enabled: true, secret_file: s, listen: ['10.0.0.1:1'], allowed_tests: [tcp_lat]}}\n",
		"probe: {bandwidth: {duration: 10s}, latency: {size: 64, iterations: 100}}\n",
		"probe: {gpu: [{gpu: 1, device: mlx5_1, tests: [ib_send_lat]}]}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		p := c.Probe
		for _, r := range []ProbeRun{p.LatencyRun(), p.BandwidthRun()} {
			if r.Size < 1 || r.Size > 8<<20 || r.Iterations < 0 || r.Iterations > 10_000_000 {
				t.Fatalf("run settings out of range: %+v", r)
			}
		}
		for _, l := range p.Loopback {
			if !rdmanames.Device(l.Device) {
				t.Fatalf("loopback device %q", l.Device)
			}
		}
		for _, g := range p.GPU {
			if g.GPU == nil || *g.GPU < 0 || *g.GPU > MaxGPUIndex || (g.Device != "" && !rdmanames.Device(g.Device)) {
				t.Fatalf("gpu target %+v", g)
			}
			for _, name := range g.Tests {
				if name == "ib_write_lat" || !isPerftestTest(name) {
					t.Fatalf("gpu test %q", name)
				}
			}
		}
		for _, pe := range p.Peers {
			if checkAddress(pe.Address) != nil || !probeName.MatchString(pe.Name) {
				t.Fatalf("peer %+v", pe)
			}
		}
		for _, name := range append(append([]string{}, p.Tests...), p.Responder.AllowedTests...) {
			if !isPerftestTest(name) && !IsTCPTest(name) {
				t.Fatalf("test %q", name)
			}
		}
		if p.Responder.Enabled && (len(p.Responder.Listen) == 0 || p.SecretFile == "") {
			t.Fatalf("responder enabled without listen or secret: %+v", p.Responder)
		}
	})
}

func TestProbeGPU(t *testing.T) {
	c, err := Parse([]byte(`
probe:
  enabled: true
  gpu:
    - gpu: 0
    - gpu: 3
      device: mlx5_3
      port: 1
      gid_index: 3
      tests: [ib_read_bw, ib_send_lat]
    - gpu: 3
      name: gpu3-via-mlx5_4
      device: mlx5_4
`))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Probe.GPU
	if len(g) != 3 || *g[0].GPU != 0 || g[0].Device != "" || g[1].Device != "mlx5_3" || *g[1].GIDIndex != 3 {
		t.Fatalf("%+v", g)
	}
	for i, want := range []string{"loopback:gpu0", "loopback:gpu3", "gpu3-via-mlx5_4"} {
		if got := g[i].GPUName(); got != want {
			t.Errorf("gpu[%d] name %q, want %q", i, got, want)
		}
	}
	if got := GPUTestsOrDefault(g[0].Tests); strings.Join(got, ",") != "ib_write_bw" {
		t.Errorf("default GPU tests %v", got)
	}
	if got := GPUTestsOrDefault(g[1].Tests); strings.Join(got, ",") != "ib_read_bw,ib_send_lat" {
		t.Errorf("GPU tests %v", got)
	}
	for _, tc := range []struct{ in, want string }{
		{"probe: {gpu: [{device: mlx5_0}]}\n", "probe.gpu[0].gpu: required"},
		{"probe: {gpu: [{gpu: -1}]}\n", "probe.gpu[0].gpu: required"},
		{"probe: {gpu: [{gpu: 256}]}\n", "0..255"},
		{"probe: {gpu: [{gpu: 0, device: 'mlx5_0 -x'}]}\n", "not an RDMA device name"},
		{"probe: {gpu: [{gpu: 0, tests: [ib_write_lat]}]}\n", "ib_write_lat cannot use GPU memory"},
		{"probe: {gpu: [{gpu: 0, tests: [tcp_bw]}]}\n", "only from rdma_doctor probe --compare"},
		{"probe: {gpu: [{gpu: 0}, {gpu: 0}]}\n", "give it a name"},
		{"probe: {gpu: [{gpu: 0, name: 'a b'}]}\n", "probe.gpu[0].name"},
		{"probe: {secret_file: s, peers: [{name: n2, address: 'n2:1', device: mlx5_0}], gpu: [{gpu: 0, name: n2}]}\n", "not a peer's name"},
		{"probe: {gpu: [{gpu: 0, use_cuda: 1}]}\n", "use_cuda"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error naming %q", tc.in, err, tc.want)
		}
	}
}
