// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"

	"github.com/rdma-doctor/rdma_doctor/internal/read/jobs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/podres"
)

// podsSource is slow, as jobsSource: pods run for minutes to days, and a
// read is a call to the kubelet.
var podsSource = register(&Source[*podres.Snapshot]{name: "pods", read: func(ctx context.Context, s *Snapshot) (*podres.Snapshot, error) {
	devs, err := s.PCI(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := podres.List(ctx, s.h.opts.PodResources, 0)
	if err != nil {
		return nil, err
	}
	max := s.h.opts.Jobs.MaxJobs
	if max <= 0 {
		max = jobs.DefaultOptions.MaxJobs
	}
	return podres.Match(pods, devs, max), nil
}})

// Pods are the Kubernetes pods of the host holding kept RDMA devices, from
// the kubelet's pod-resources API (internal/read/podres; slow), bounded by
// Options.Jobs.MaxJobs. Nil and no error where Options.PodResources is
// empty (not asked); a failed call is an error, never "no pods".
func (s *Snapshot) Pods(ctx context.Context) (*podres.Snapshot, error) {
	if s.h.opts.PodResources == "" {
		return nil, nil
	}
	return get(ctx, s, podsSource)
}
