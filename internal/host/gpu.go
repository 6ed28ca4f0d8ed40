// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"

	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
)

var gpuSource = register(&Source[*gpu.Snapshot]{name: "gpu", read: func(ctx context.Context, s *Snapshot) (*gpu.Snapshot, error) {
	nodes := 0
	if t := s.Topology(ctx); t != nil {
		nodes = len(t.Nodes)
	}
	return gpu.Read(ctx, s.h.fs, gpu.Options{Keep: s.h.Keep, Nodes: nodes})
}})

// GPUs are the host's GPUs, their PCI relation to every kept RDMA device
// and the GPUDirect RDMA prerequisites (slow). A host without GPUs has an
// empty snapshot.
func (s *Snapshot) GPUs(ctx context.Context) (*gpu.Snapshot, error) {
	return get(ctx, s, gpuSource)
}

// NeedGPUs judges a GPUs reading.
var NeedGPUs = cannotRead[gpu.Snapshot]("gpu", "the GPUs")
