// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"

	"github.com/rdma-doctor/rdma_doctor/internal/expo"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/jobs"
)

// jobsCollector says which job uses which RDMA device. Its series are
// per job, so it is off by default and bounded: at most
// --collector.jobs.max-jobs jobs a host, one series per job per device
// it holds; the jobs past the bound are counted unknown.
type jobsCollector struct {
	device, running, unknown *expo.Desc
	out                      rendered[*jobs.Snapshot]
}

// NewJobsCollector builds the jobs collector.
func NewJobsCollector(Env) Collector {
	return &jobsCollector{
		device: desc("rdma_job_device_info",
			"A running job holds the RDMA device (a verbs context: its cgroup's rdma.current charges the device, or one of its processes holds the device's /dev/infiniband/uverbsN open); always 1. One series per job per device; job_id is the scheduler's numeric id.", "device", "job_id", "scheduler"),
		running: desc("rdma_jobs",
			"Jobs the scheduler runs on this host (its cgroups), those whose devices are unknown included.", "scheduler"),
		unknown: desc("rdma_jobs_unknown",
			"Jobs whose RDMA devices are not (completely) known: a file unreadable, a bound reached (--collector.jobs.max-jobs, processes, descriptors), an id that is not a job id. Their rdma_job_device_info series are a lower bound or absent.", "scheduler"),
	}
}

func (c *jobsCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	s, err := snap.Jobs(ctx)
	if s == nil {
		return err
	}
	rerr := c.out.append(out, s, err, func(out *sink) error {
		for _, j := range s.Jobs {
			for _, d := range j.Devices {
				gauge(out, c.device, 1, d, j.ID, j.Scheduler)
			}
		}
		gauge(out, c.running, float64(len(s.Jobs)+s.Unread), jobs.SchedulerSlurm)
		gauge(out, c.unknown, float64(s.Unknown()), jobs.SchedulerSlurm)
		return errors.Join(s.Errors...)
	})
	return errors.Join(rerr, err)
}
