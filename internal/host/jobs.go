// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"

	"github.com/rdma-doctor/rdma_doctor/internal/read/jobs"
)

// jobsSource is slow: jobs run for minutes to days, and a read resolves
// every open descriptor of every job's processes.
var jobsSource = register(&Source[*jobs.Snapshot]{name: "jobs", read: func(ctx context.Context, s *Snapshot) (*jobs.Snapshot, error) {
	return jobs.Read(ctx, s.h.fs, s.h.opts.Jobs, s.h.Keep)
}})

// Jobs are the Slurm jobs of the host and the kept RDMA devices each
// holds (internal/read/jobs; slow). Read only where the jobs collector runs.
func (s *Snapshot) Jobs(ctx context.Context) (*jobs.Snapshot, error) {
	return get(ctx, s, jobsSource)
}
