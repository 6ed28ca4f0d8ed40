// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"

	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
)

// Failure reasons of a GPU target found before perftest runs (the reason
// label of rdma_probe_failures_total, besides perftest's no_cuda).
const (
	// ReasonNoGPU: the GPU index is not on this host, or the GPUs could
	// not be read.
	ReasonNoGPU = "no_gpu"
	// ReasonNoGPUDevice: no HCA was given and none has a classified
	// relation to the GPU.
	ReasonNoGPUDevice = "no_gpu_device"
)

// gpuError is a GPU target that cannot run, with its reason.
type gpuError struct {
	kind string
	msg  string
}

func (e *gpuError) Error() string { return e.msg }

// resolveGPU finds the GPU of t and the HCA it runs on: the configured
// device, else the nearest by the gpu package's relation (the first by
// name among equals), and whether the binary can use GPU memory. It
// returns the perftest setting and what the result reports.
func (p *Prober) resolveGPU(ctx context.Context, t *Target, test perftest.Test) (device string, g perftest.GPU, use *GPUUse, err error) {
	use = &GPUUse{Index: t.GPU}
	if p.GPUs == nil {
		return "", g, use, &gpuError{ReasonNoGPU, "no GPU source configured"}
	}
	snap, err := p.GPUs(ctx)
	if err != nil || snap == nil {
		return "", g, use, &gpuError{ReasonNoGPU, fmt.Sprintf("reading the GPUs: %v", err)}
	}
	if t.GPU < 0 || t.GPU >= len(snap.GPUs) {
		return "", g, use, &gpuError{ReasonNoGPU, fmt.Sprintf("GPU%d: this host has %d GPUs on its PCI bus", t.GPU, len(snap.GPUs))}
	}
	use.Address = snap.GPUs[t.GPU].Address
	device = t.Device
	if device == "" {
		_, devs, ok := snap.Closest(t.GPU)
		if !ok || len(devs) == 0 {
			return "", g, use, &gpuError{ReasonNoGPUDevice, fmt.Sprintf("GPU%d (%s): no RDMA device with a known PCI relation to it; set probe.gpu[].device", t.GPU, use.Address)}
		}
		device = devs[0]
	}
	for _, a := range snap.Affinity {
		if a.GPU == t.GPU && a.Device == device {
			use.Link = a.Link.String()
		}
	}
	c, err := p.Runner.CUDA(ctx, test)
	if err != nil {
		return device, g, use, err
	}
	if !c.Supported {
		return device, g, use, &perftest.Error{Kind: perftest.NoCUDA, Status: -1,
			Detail: test.Binary() + " was built without CUDA (its --help lists no --use_cuda): build perftest with ./configure CUDA_H_PATH=/usr/local/cuda/include/cuda.h, or set probe.perftest_dir to such a build"}
	}
	g = perftest.GPU{Set: true, Index: t.GPU, BusID: use.Address, ByBusID: c.BusID}
	return device, g, use, nil
}

// GPUSource is where a prober reads the GPUs from: the host snapshot's
// (internal/host's Snapshot.GPUs, cached on the slow interval).
type GPUSource func(ctx context.Context) (*gpu.Snapshot, error)
