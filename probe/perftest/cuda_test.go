// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

const cudaRun = "ib_write_bw_use_cuda_dmabuf_D60_q16_roce_client_nvidia_tools_image.txt"

func TestParseCUDAHelp(t *testing.T) {
	for _, tc := range []struct {
		file string
		want CUDA
	}{
		{perftesttest.HelpCUDA, CUDA{Supported: true, BusID: true}},
		{perftesttest.HelpNoCUDA, CUDA{}},
		{"ib_write_lat_help_debian_v4.5-0.17.txt", CUDA{}},
	} {
		if got := ParseCUDAHelp(sample(t, tc.file)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.file, got, tc.want)
		}
	}
	// The option, not the word: a description naming CUDA is not support,
	// and the pre-2020 spelling without "=<id>" still is.
	if ParseCUDAHelp([]byte("  -F  Do not show a warning (CUDA builds only)\n")).Supported {
		t.Error("a description mentioning CUDA read as support")
	}
	if got := ParseCUDAHelp([]byte("      --use_cuda  Use CUDA lib for GPU-Direct testing.\n      --use_cuda_dmabuf Use CUDA DMA-BUF for GPUDirect RDMA testing\n")); got != (CUDA{Supported: true, DMABuf: true}) {
		t.Errorf("old spelling: %+v", got)
	}
}

// TestCUDAParse: the recorded CUDA run (a DMA-BUF GPU buffer, 16 QPs, 60 s)
// parses like any other: CUDA's own lines before and after the table are
// notes, not rows.
func TestCUDAParse(t *testing.T) {
	rep, err := Parse(sample(t, cudaRun))
	if err != nil {
		t.Fatal(err)
	}
	row, ok := rep.BandwidthRow(65536)
	if !ok || row.AvgBytesPerSecond != 181.46*gbit || row.PeakMeasured || row.Iterations != 10384867 {
		t.Errorf("row %+v", row)
	}
}

// TestRunnerCUDA: the help is asked once per binary, and says whether the
// binary was built with CUDA.
func TestRunnerCUDA(t *testing.T) {
	for _, cuda := range []bool{true, false} {
		script := perftesttest.WithCUDA(map[string]perftesttest.Sides{string(WriteBW): {}}, cuda)
		d := fakeDir{perftesttest.Install(t, script)}
		r := d.runner()
		for i := 0; i < 2; i++ {
			got, err := r.CUDA(context.Background(), WriteBW)
			if err != nil {
				t.Fatal(err)
			}
			if got.Supported != cuda || got.BusID != cuda {
				t.Errorf("cuda %v: %+v", cuda, got)
			}
		}
		calls := d.calls(t)
		if len(calls) != 1 || !slices.Equal(calls[0].Args, []string{"--help"}) {
			t.Errorf("cuda %v: calls %+v, want one --help", cuda, calls)
		}
	}
	r := &Runner{Dir: t.TempDir()}
	if _, err := r.CUDA(context.Background(), WriteBW); !errors.Is(err, NotInstalled) {
		t.Errorf("no binary: %v", err)
	}
}

// TestRunnerGPULoopback: both sides get the GPU option and the PCI bus
// order, and the recorded CUDA run is the result.
func TestRunnerGPULoopback(t *testing.T) {
	d := fakeDir{perftesttest.Install(t, perftesttest.WithCUDA(map[string]perftesttest.Sides{string(WriteBW): {
		Server: behaviour{StdoutFile: cudaRun, Protocol: true},
		Client: behaviour{StdoutFile: cudaRun, Protocol: true},
	}}, true))}
	for _, g := range []GPU{{Set: true, Index: 3}, {Set: true, Index: 3, BusID: "0000:9a:00.0", ByBusID: true}} {
		p := Params{Test: WriteBW, Device: "mlx5_3", Size: 65536, Duration: 5e9, GPU: g}
		run := d.runner().Loopback(context.Background(), p, p)
		if run.Err != nil {
			t.Fatal(run.Err)
		}
		if row, ok := run.Report.BandwidthRow(65536); !ok || row.AvgBytesPerSecond != 181.46*gbit {
			t.Errorf("row %+v", row)
		}
	}
	calls := d.calls(t)
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4", len(calls))
	}
	for i, c := range calls {
		want := "--use_cuda=3"
		if i >= 2 {
			want = "--use_cuda_bus_id=0000:9a:00.0"
		}
		if !slices.Contains(c.Args, want) {
			t.Errorf("%s args %q lack %s", c.Side, c.Args, want)
		}
		if !slices.Contains(c.Env, "CUDA_DEVICE_ORDER=PCI_BUS_ID") {
			t.Errorf("%s env %q lacks CUDA_DEVICE_ORDER", c.Side, c.Env)
		}
	}
}

// TestRunnerGPUWithoutCUDA: a binary without CUDA refuses the option; the
// run fails and starts nothing else.
func TestRunnerGPUWithoutCUDA(t *testing.T) {
	d := fakeDir{perftesttest.Install(t, perftesttest.WithCUDA(map[string]perftesttest.Sides{string(WriteBW): {
		Server: behaviour{StdoutFile: cudaRun, Protocol: true},
		Client: behaviour{StdoutFile: cudaRun, Protocol: true},
	}}, false))}
	p := Params{Test: WriteBW, Device: "mlx5_0", GPU: GPU{Set: true}}
	run := d.runner().Loopback(context.Background(), p, p)
	var e *Error
	if !errors.As(run.Err, &e) || e.Side != "server" || !strings.Contains(e.Stderr+e.Detail, "unrecognized option '--use_cuda=0'") {
		t.Errorf("run error %#v", run.Err)
	}
}

func TestGPUParamsValidate(t *testing.T) {
	for _, tc := range []struct {
		p   Params
		bad string
	}{
		{Params{Test: WriteLat, GPU: GPU{Set: true}}, "read and send only"},
		{Params{Test: WriteBW, GPU: GPU{Set: true, Index: -1}}, "gpu -1"},
		{Params{Test: WriteBW, GPU: GPU{Set: true, Index: 256}}, "gpu 256"},
		{Params{Test: WriteBW, GPU: GPU{Set: true, ByBusID: true, BusID: "19:00.0;reboot"}}, "not a PCI address"},
		{Params{Test: SendLat, GPU: GPU{Set: true, Index: 1}}, ""},
		{Params{Test: ReadLat, GPU: GPU{Set: true, ByBusID: true, BusID: "0000:19:00.0"}}, ""},
		{Params{Test: WriteLat}, ""},
	} {
		err := tc.p.Validate()
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%+v: %v", tc.p, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.bad)
		}
	}
}

// TestRealPerftestHasNoCUDA: Debian's perftest is built without CUDA; its
// --help must read so.
func TestRealPerftestHasNoCUDA(t *testing.T) {
	testenv.RequireTool(t, "ib_write_bw", "perftest not installed (Debian: apt-get install perftest; .ci/run does)")
	r := &Runner{Locks: &DeviceLocks{}}
	c, err := r.CUDA(context.Background(), WriteBW)
	if err != nil {
		t.Fatal(err)
	}
	if c.Supported {
		t.Errorf("Debian perftest reads as CUDA-built: %+v", c)
	}
}

// TestConfigKnowsCUDATests: internal/host/config refuses GPU targets with the
// tests CUDATest refuses, from its own list.
func TestConfigKnowsCUDATests(t *testing.T) {
	var not []string
	for _, test := range Tests {
		if !CUDATest(test) {
			not = append(not, string(test))
		}
	}
	if !slices.Equal(not, config.NotCUDATests) || MaxGPUIndex != config.MaxGPUIndex {
		t.Errorf("perftest refuses %v up to GPU %d, config %v up to %d", not, MaxGPUIndex, config.NotCUDATests, config.MaxGPUIndex)
	}
}
