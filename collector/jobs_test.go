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
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/podres"
	"github.com/rdma-doctor/rdma_doctor/internal/read/podres/podrestest"
)

// slurmHost is a copy of the cx6-hdr-fdr fixture host (mlx5_0 is
// uverbs0) running the recorded Slurm job 4, whose task holds uverbs0
// open (internal/read/jobs/testdata).
func slurmHost(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	for _, cmd := range [][]string{
		{"cp", "-a", "../fixtures/hosts/cx6-hdr-fdr", root},
		{"cp", "-a", "../internal/read/jobs/testdata/slurm-v2/.", root},
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
	want := `# HELP rdma_job_device_info A running job holds the RDMA device (its cgroup's rdma.current or an open uverbs device); always 1.
# TYPE rdma_job_device_info gauge
rdma_job_device_info{device="mlx5_0",job_id="4",scheduler="slurm"} 1
# HELP rdma_jobs Jobs the scheduler runs on this host, those whose devices are unknown included.
# TYPE rdma_jobs gauge
rdma_jobs{scheduler="slurm"} 1
# HELP rdma_jobs_unknown Jobs whose RDMA devices are not completely known (unreadable, or past a bound); their device series are a lower bound.
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
	want := `# HELP rdma_jobs_unknown Jobs whose RDMA devices are not completely known (unreadable, or past a bound); their device series are a lower bound.
# TYPE rdma_jobs_unknown gauge
rdma_jobs_unknown{scheduler="slurm"} 1
# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="jobs"} 0
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_jobs_unknown", "rdma_scrape_collector_success"); err != nil {
		t.Error(err)
	}
}

// podsHost is the cx6-hdr-fdr fixture host (mlx5_0 is 0000:3b:00.0) with
// a fake kubelet answering code: a pod holding mlx5_0's function (as
// sriov-network-device-plugin names a device) and a pod holding only a
// GPU.
func podsHost(t *testing.T, code string) Env {
	sock := podrestest.Serve(t, []podres.Pod{
		{Namespace: "default", Name: "nccl-test-worker-0", Devices: []podres.Device{
			{Resource: "mellanox.com/mlx5_vf", IDs: []string{"0000:3b:00.0"}},
			{Resource: "nvidia.com/gpu", IDs: []string{"GPU-9a3c2f1e-58c0-3d7f-6b2a-0d1e4c5b6a7f"}},
		}},
		{Namespace: "kube-system", Name: "coredns-6f6b679f8f-v2fqq"},
	}, code)
	return hostEnv(t, "../fixtures/hosts/cx6-hdr-fdr", func(o *host.Options) { o.PodResources = sock })
}

func TestJobsCollectorPods(t *testing.T) {
	env := podsHost(t, "0")
	g := gatherOne(t, "jobs", on(env, NewJobsCollector(env)))
	want := `# HELP rdma_pod_device_info A Kubernetes pod holds the RDMA device, as the kubelet's pod-resources API lists it; always 1.
# TYPE rdma_pod_device_info gauge
rdma_pod_device_info{device="mlx5_0",namespace="default",pod="nccl-test-worker-0"} 1
# HELP rdma_jobs_unknown Jobs whose RDMA devices are not completely known (unreadable, or past a bound); their device series are a lower bound.
# TYPE rdma_jobs_unknown gauge
rdma_jobs_unknown{scheduler="kubernetes"} 0
rdma_jobs_unknown{scheduler="slurm"} 0
# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="jobs"} 1
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_pod_device_info", "rdma_jobs_unknown", "rdma_scrape_collector_success"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(g, "rdma_jobs"); err != nil || n != 2 {
		t.Errorf("%d rdma_jobs series (%v), want slurm's and kubernetes'", n, err)
	}
}

// A failed call (the kubelet denies it): no kubernetes series and the
// collector fails, never "no pods".
func TestJobsCollectorPodsFail(t *testing.T) {
	env := podsHost(t, "7")
	g := gatherOne(t, "jobs", on(env, NewJobsCollector(env)))
	want := `# HELP rdma_jobs_unknown Jobs whose RDMA devices are not completely known (unreadable, or past a bound); their device series are a lower bound.
# TYPE rdma_jobs_unknown gauge
rdma_jobs_unknown{scheduler="slurm"} 0
# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).
# TYPE rdma_scrape_collector_success gauge
rdma_scrape_collector_success{collector="jobs"} 0
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_pod_device_info", "rdma_jobs_unknown", "rdma_scrape_collector_success"); err != nil {
		t.Error(err)
	}
}
