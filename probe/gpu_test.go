// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

// cudaRun is a recorded CUDA client run (ib_write_bw --use_cuda=0
// --use_cuda_dmabuf, 65536 bytes, 181.46 Gb/s).
const cudaRun = "ib_write_bw_use_cuda_dmabuf_D60_q16_roce_client_nvidia_tools_image.txt"

// hgxGPUs reads the GPUs of the hgx-h100 fixture host: eight H100s, each
// PIX to its rail's ConnectX-7.
func hgxGPUs(t *testing.T) GPUSource {
	t.Helper()
	p, err := hostfs.Paths{Rootfs: "../fixtures/hosts/hgx-h100"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := gpu.Read(context.Background(), p.Open(), gpu.Options{Nodes: 2})
	if err != nil || len(s.GPUs) != 8 {
		t.Fatalf("fixture GPUs: %v (%d)", err, len(s.GPUs))
	}
	return func(context.Context) (*gpu.Snapshot, error) { return s, nil }
}

func gpuProber(t *testing.T, cuda bool, cfg *config.Probe) (*Prober, perftesttest.Dir) {
	t.Helper()
	fake := perftesttest.Install(t, perftesttest.WithCUDA(map[string]perftesttest.Sides{"ib_write_bw": {
		Server: perftesttest.Behaviour{StdoutFile: cudaRun, Protocol: true},
		Client: perftesttest.Behaviour{StdoutFile: cudaRun, Protocol: true},
	}}, cuda))
	p := newProber(t, fake, cfg)
	p.Sys = sysfs(t, "mlx5_4", "400 Gb/sec (4X NDR)")
	p.GPUs = hgxGPUs(t)
	return p, fake
}

func intp(i int) *int { return &i }

// TestGPUTargetNearestHCA: GPU2 of the HGX host runs on mlx5_4, its PIX
// rail HCA, both sides in its memory, named by its PCI address.
func TestGPUTargetNearestHCA(t *testing.T) {
	cfg := &config.Probe{GPU: []config.ProbeGPU{{GPU: intp(2)}}}
	targets, err := Targets(cfg)
	if err != nil || len(targets) != 1 {
		t.Fatal(targets, err)
	}
	tg := targets[0]
	if tg.Name != "loopback:gpu2" || tg.Memory != MemoryGPU || tg.Mode != ModeLoopback || !slices.Equal(tg.Tests, []perftest.Test{perftest.WriteBW}) {
		t.Fatalf("target %+v", tg)
	}
	p, fake := gpuProber(t, true, cfg)
	snap, _ := p.GPUs(context.Background())
	addr := snap.GPUs[2].Address
	r := p.Run(context.Background(), &tg, perftest.WriteBW)
	if !r.Success {
		t.Fatalf("%+v", r)
	}
	if r.Device != "mlx5_4" || r.PeerDevice != "mlx5_4" || r.Memory != MemoryGPU || r.GPU == nil || *r.GPU != (GPUUse{Index: 2, Address: addr, Link: "PIX"}) {
		t.Errorf("result %+v gpu %+v", r, r.GPU)
	}
	if ratio, ok := r.BandwidthRatio(); !ok || !near(ratio, 181.46/400) {
		t.Errorf("ratio %v %v", ratio, ok)
	}
	calls := fake.Calls(t)
	if len(calls) != 3 || !slices.Equal(calls[0].Args, []string{"--help"}) {
		t.Fatalf("calls %+v", calls)
	}
	for _, c := range calls[1:] {
		if !slices.Contains(c.Args, "--use_cuda_bus_id="+addr) || !strings.Contains(strings.Join(c.Args, " "), "-d mlx5_4") {
			t.Errorf("%s args %q", c.Side, c.Args)
		}
	}
	// The second run asks no --help: the answer is cached.
	if r := p.Run(context.Background(), &tg, perftest.WriteBW); !r.Success || len(fake.Calls(t)) != 5 {
		t.Errorf("second run %+v, %d calls", r, len(fake.Calls(t)))
	}
}

// TestGPUTargetFailures: each reason a GPU target cannot run, and that
// nothing but --help was started for any of them.
func TestGPUTargetFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		cuda bool
		gpu  int
		dev  string
		src  func(*testing.T) GPUSource
		kind string
		dev2 string
	}{
		{"no CUDA", false, 0, "", hgxGPUs, string(perftest.NoCUDA), "mlx5_0"},
		{"GPU not on the host", true, 8, "", hgxGPUs, ReasonNoGPU, ""},
		{"no GPU source", true, 0, "", func(*testing.T) GPUSource { return nil }, ReasonNoGPU, ""},
		{"no HCA near", true, 0, "", func(*testing.T) GPUSource {
			return func(context.Context) (*gpu.Snapshot, error) {
				return &gpu.Snapshot{GPUs: []gpu.GPU{{Index: 0, Address: "0000:19:00.0"}}}, nil
			}
		}, ReasonNoGPUDevice, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Probe{GPU: []config.ProbeGPU{{GPU: intp(tc.gpu), Device: tc.dev}}}
			targets, _ := Targets(cfg)
			p, fake := gpuProber(t, tc.cuda, cfg)
			p.GPUs = tc.src(t)
			r := p.Run(context.Background(), &targets[0], perftest.WriteBW)
			if r.Success || r.ErrorKind != tc.kind || r.Device != tc.dev2 || r.Memory != MemoryGPU || r.Error == "" {
				t.Errorf("%+v", r)
			}
			for _, c := range fake.Calls(t) {
				if !slices.Equal(c.Args, []string{"--help"}) {
					t.Errorf("started %q", c.Args)
				}
			}
		})
	}
}

// TestGPUTargetConfiguredDevice: a configured HCA wins over the nearest;
// the relation reported is that HCA's (SYS: across the sockets).
func TestGPUTargetConfiguredDevice(t *testing.T) {
	cfg := &config.Probe{GPU: []config.ProbeGPU{{GPU: intp(2), Device: "mlx5_9"}}}
	targets, _ := Targets(cfg)
	p, _ := gpuProber(t, true, cfg)
	r := p.Run(context.Background(), &targets[0], perftest.WriteBW)
	if !r.Success || r.Device != "mlx5_9" || r.GPU.Link != "SYS" {
		t.Errorf("%+v %+v", r, r.GPU)
	}
}

// TestMemoryLabel: a GPU run and a host run of the same peer, test and
// port are two series that differ in memory.
func TestMemoryLabel(t *testing.T) {
	s := NewStore()
	t0 := time.Unix(1700000000, 0)
	bw := func(m Memory, avg float64) Result {
		return Result{Peer: "loopback", Test: "ib_write_bw", Device: "mlx5_4", Port: 1, Memory: m, Start: t0, Success: true,
			PortRate: 50e9, Bandwidth: &Bandwidth{Average: avg}}
	}
	s.Record(bw(MemoryGPU, 22.6825e9))
	s.Record(bw("", 45e9))
	want := `
# HELP rdma_probe_bandwidth_ratio Average bandwidth of the last successful probe run over the local port's active rate.
# TYPE rdma_probe_bandwidth_ratio gauge
rdma_probe_bandwidth_ratio{device="mlx5_4",memory="gpu",peer="loopback",port="1",test="ib_write_bw"} 0.45365
rdma_probe_bandwidth_ratio{device="mlx5_4",memory="host",peer="loopback",port="1",test="ib_write_bw"} 0.9
`
	if err := testutil.CollectAndCompare(&Collector{Store: s}, strings.NewReader(want), "rdma_probe_bandwidth_ratio"); err != nil {
		t.Error(err)
	}
	if e, ok := s.Get(Key{Peer: "loopback", Test: "ib_write_bw", Device: "mlx5_4", Port: 1}); !ok || e.Memory != MemoryHost || e.Runs != 1 {
		t.Errorf("host entry %+v", e)
	}
}
