// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/jobs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/podres"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// jobsCollector says which job uses which RDMA device. Its series are
// per job, so it is off by default and bounded: at most
// --collector.jobs.max-jobs jobs a host, one series per job per device
// it holds; the jobs past the bound are counted unknown.
//
// With --collector.jobs.pods it also asks the kubelet which pods hold
// which device (host.Snapshot.Pods), bounded by the same max-jobs: their
// counts are the scheduler="kubernetes" series. A failed call exports no
// kubernetes series and fails the collector: unknown, never "no pods".
type jobsCollector struct {
	device, pod, running, unknown *expo.Desc
	out                           rendered[*jobs.Snapshot]
	pods                          rendered[*podres.Snapshot]
}

func jobsSpec() Spec {
	return Spec{Name: "jobs", Default: false,
		Help: "which Slurm job holds which RDMA device, from the cgroup tree: the job cgroup's rdma.current, else its processes' open /dev/infiniband/uverbs* (needs to read other users' /proc/PID/fd: CAP_SYS_PTRACE, or root); one series per job per device",
		Flags: func(app *kingpin.Application, f *Flags) {
			o := &f.Jobs
			app.Flag("collector.jobs.max-jobs",
				"Jobs read on one host; those past it are counted in rdma_jobs_unknown and have no rdma_job_device_info series.").
				Default(strconv.Itoa(jobs.DefaultOptions.MaxJobs)).IntVar(&o.MaxJobs)
			app.Flag("collector.jobs.pods",
				"Also ask the kubelet which Kubernetes pods hold which RDMA device (its pod-resources API, /var/lib/kubelet/pod-resources/kubelet.sock below --path.rootfs; needs read-write access to the socket): rdma_pod_device_info, one series per pod per device, at most max-jobs pods.").
				BoolVar(&o.Pods)
		},
		New: func(env Env, _ *Flags) (Collector, error) { return NewJobsCollector(env), nil }}
}

// JobsOptions are the jobs collector's flags: the bounds of the host's
// jobs read (host.Options.Jobs), and whether the kubelet's pod-resources
// API is asked which pods hold which device (host.Options.PodResources).
type JobsOptions struct {
	jobs.Options
	Pods bool
}

// NewJobsCollector builds the jobs collector.
func NewJobsCollector(Env) Collector {
	return &jobsCollector{
		device: desc("rdma_job_device_info",
			"A running job holds the RDMA device (its cgroup's rdma.current or an open uverbs device); always 1.", "device", "job_id", "scheduler"),
		pod: desc("rdma_pod_device_info",
			"A Kubernetes pod holds the RDMA device, as the kubelet's pod-resources API lists it; always 1.", "device", "namespace", "pod"),
		running: desc("rdma_jobs",
			"Jobs the scheduler runs on this host, those whose devices are unknown included.", "scheduler"),
		unknown: desc("rdma_jobs_unknown",
			"Jobs whose RDMA devices are not completely known (unreadable, or past a bound); their device series are a lower bound.", "scheduler"),
	}
}

func (c *jobsCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	return errors.Join(c.slurm(ctx, snap, out), c.kubernetes(ctx, snap, out))
}

func (c *jobsCollector) kubernetes(ctx context.Context, snap *host.Snapshot, out *sink) error {
	s, err := snap.Pods(ctx)
	if s == nil {
		return err
	}
	rerr := c.pods.append(out, s, err, func(out *sink) error {
		for _, p := range s.Pods {
			for _, d := range p.Devices {
				gauge(out, c.pod, 1, d, p.Namespace, p.Pod)
			}
		}
		gauge(out, c.running, float64(s.Listed), schedulerKubernetes)
		gauge(out, c.unknown, float64(s.Unread), schedulerKubernetes)
		return nil
	})
	return errors.Join(rerr, err)
}

// schedulerKubernetes is the scheduler label of the pods' counts.
const schedulerKubernetes = "kubernetes"

func (c *jobsCollector) slurm(ctx context.Context, snap *host.Snapshot, out *sink) error {
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
