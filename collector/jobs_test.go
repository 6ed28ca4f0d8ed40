// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	iofs "io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/hostfs/hostfstest"
)

// slurmHost is a copy of the cx6-hdr-fdr fixture host (mlx5_0 is
// uverbs0) running the recorded Slurm job 4, whose task holds uverbs0
// open (internal/jobs/testdata).
func slurmHost(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	for _, cmd := range [][]string{
		{"cp", "-a", "../fixtures/hosts/cx6-hdr-fdr", root},
		{"cp", "-a", "../internal/jobs/testdata/slurm-v2/.", root},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, out)
		}
	}
	return root
}

func TestJobsCollector(t *testing.T) {
	env := hostEnv(t, slurmHost(t))
	g := gatherOne(t, "jobs", on(env, NewJobsCollector(env)))
	want := `# HELP rdma_job_device_info A running job holds the RDMA device (a verbs context: its cgroup's rdma.current charges the device, or one of its processes holds the device's /dev/infiniband/uverbsN open); always 1. One series per job per device; job_id is the scheduler's numeric id.
# TYPE rdma_job_device_info gauge
rdma_job_device_info{device="mlx5_0",job_id="4",scheduler="slurm"} 1
# HELP rdma_jobs Jobs the scheduler runs on this host (its cgroups), those whose devices are unknown included.
# TYPE rdma_jobs gauge
rdma_jobs{scheduler="slurm"} 1
# HELP rdma_jobs_unknown Jobs whose RDMA devices are not (completely) known: a file unreadable, a bound reached (--collector.jobs.max-jobs, processes, descriptors), an id that is not a job id. Their rdma_job_device_info series are a lower bound or absent.
# TYPE rdma_jobs_unknown gauge
rdma_jobs_unknown{scheduler="slurm"} 0
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_job_device_info", "rdma_jobs", "rdma_jobs_unknown"); err != nil {
		t.Error(err)
	}
}

// An unreadable descriptor directory: the job is unknown and the
// collector fails, never a clean "no device".
func TestJobsCollectorUnknown(t *testing.T) {
	root := slurmHost(t)
	env := hostEnv(t, root, func(o *host.Options) {
		fs := hostfs.Host{Root: hostfs.Dir(root), Sys: hostfs.Dir(root + "/sys"), Proc: &hostfstest.Faulty{
			Base: hostfs.Dir(root + "/proc"), Errors: map[string]error{"49334/fd": iofs.ErrPermission}}}
		o.FS = &fs
	})
	g := gatherOne(t, "jobs", on(env, NewJobsCollector(env)))
	want := `# HELP rdma_jobs_unknown Jobs whose RDMA devices are not (completely) known: a file unreadable, a bound reached (--collector.jobs.max-jobs, processes, descriptors), an id that is not a job id. Their rdma_job_device_info series are a lower bound or absent.
# TYPE rdma_jobs_unknown gauge
rdma_jobs_unknown{scheduler="slurm"} 1
# HELP rdma_scrape_collector_success rdma_doctor: whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="jobs"} 0
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_jobs_unknown", "rdma_scrape_collector_success"); err != nil {
		t.Error(err)
	}
}
