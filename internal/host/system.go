// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/opensm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// The host-wide slow sources: tuning, the local OpenSM, the CPU topology
// and the host name.
var (
	tuningSource = register(&Source[*tuning.Snapshot]{name: "tuning", read: func(ctx context.Context, s *Snapshot) (*tuning.Snapshot, error) {
		return tuning.Read(ctx, s.h.fs, s.h.opts.Tuning)
	}})
	openSMSource = register(&Source[*opensm.State]{name: "opensm", read: func(ctx context.Context, s *Snapshot) (*opensm.State, error) {
		return opensm.Read(ctx, s.h.fs.Root, s.h.fs.Proc, s.h.opts.OpenSMConfig, s.h.now(), &s.h.smLogs)
	}})
	topologySource = register(&Source[*pci.Topology]{name: "topology", read: func(_ context.Context, s *Snapshot) (*pci.Topology, error) {
		t := pci.ReadTopology(s.h.fs.Sys)
		return &t, nil
	}})
	hostnameSource = register(&Source[string]{name: "hostname", read: func(_ context.Context, s *Snapshot) (string, error) {
		b, err := s.h.fs.Proc.ReadFile("sys/kernel/hostname")
		return strings.TrimSpace(string(b)), err
	}})
)

// Tuning is the host tuning state (slow).
func (s *Snapshot) Tuning(ctx context.Context) (*tuning.Snapshot, error) {
	return get(ctx, s, tuningSource)
}

// OpenSM is the local OpenSM: processes, configuration, log (slow). A
// partial read (an unreadable file) still has the processes.
func (s *Snapshot) OpenSM(ctx context.Context) (*opensm.State, error) {
	return get(ctx, s, openSMSource)
}

// NeedTuning and NeedOpenSM judge a Tuning and an OpenSM reading.
var (
	NeedTuning = cannotRead[tuning.Snapshot]("tuning", "the host tuning state")
	NeedOpenSM = cannotRead[opensm.State]("opensm", "the local OpenSM state")
)

// Topology is the host's NUMA nodes and online CPUs (slow).
func (s *Snapshot) Topology(ctx context.Context) *pci.Topology {
	t, _ := get(ctx, s, topologySource)
	return t
}

// Hostname is the kernel's host name, "" when unreadable (slow).
func (s *Snapshot) Hostname(ctx context.Context) string {
	n, _ := get(ctx, s, hostnameSource)
	return n
}
