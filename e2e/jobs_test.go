// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/podres"
	"github.com/rdma-doctor/rdma_doctor/internal/read/podres/podrestest"
)

// slurmCopyHost copies a fixture host and runs on it the recorded Slurm
// job 4 of internal/read/jobs/testdata (a real slurmstepd.scope cgroup tree;
// its task's processes hold /dev/infiniband/uverbs0, mlx5_0's, open).
func slurmCopyHost(t *testing.T, host string) string {
	t.Helper()
	root := smCopyHost(t, host)
	src := filepath.Join(repoRoot(t), "internal", "read", "jobs", "testdata", "slurm-v2") + "/."
	if out, err := exec.Command("cp", "-a", src, root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return root
}

// TestJobsJoin: the built server with --collector.jobs and
// --collector.jobs.pods on a fixture host running a Slurm job on mlx5_0
// and, says its (fake) kubelet, a pod holding mlx5_1's PCI function; a
// real Prometheus with the shipped rules: each reaches the host end of
// its device's link (link:rdma_jobs:count 1 on both), and the query the
// link pages' jobs annotation gives lists job 4 and the pod.
func TestJobsJoin(t *testing.T) {
	promBin := requireTool(t, "prometheus")
	root := slurmCopyHost(t, "cx6-hdr-fdr")
	sock := filepath.Join(root, podres.SocketPath)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	podrestest.ServeAt(t, sock, []podres.Pod{{Namespace: "default", Name: "nccl-test-worker-0", Devices: []podres.Device{
		{Resource: "mellanox.com/mlx5_vf", IDs: []string{"0000:3b:00.1"}},
	}}}, "0")
	e := start(t, "--path.rootfs="+root, "--collector.jobs", "--collector.jobs.pods")
	smWaitFor(t, e.addr, `rdma_job_device_info{device="mlx5_0",job_id="4",scheduler="slurm"} 1`)
	smWaitFor(t, e.addr, `rdma_pod_device_info{device="mlx5_1",namespace="default",pod="nccl-test-worker-0"} 1`)
	prom := startPrometheus(t, promBin, t.TempDir(), "", []string{e.addr})

	type sample struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	query := func(q string) []sample {
		var resp struct {
			Data struct {
				Result []sample `json:"result"`
			} `json:"data"`
		}
		getJSON(t, "http://"+prom.addr+"/api/v1/query?"+url.Values{"query": {q}}.Encode(), &resp)
		return resp.Data.Result
	}
	// The host's links are its own ("<instance>/<device>/<port>"): no
	// fabric exporter runs here.
	link := e.addr + "/mlx5_0/1"
	link1 := e.addr + "/mlx5_1/1"
	want := map[string]string{link: "1", link1: "1"}
	var got map[string]string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		got = map[string]string{}
		for _, s := range query("link:rdma_jobs:count") {
			v, _ := s.Value[1].(string)
			got[s.Metric["link"]] = v
		}
		if len(got) == len(want) && got[link] == want[link] && got[link1] == want[link1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("link:rdma_jobs:count = %v, want %v\n%s", got, want, prom.out.String())
		}
	}
	// The jobs annotation's query (alerts/rdma_doctor.rules.yml.tmpl,
	// linkJobs).
	onLink := func(l string) []sample {
		return query(`{__name__=~"rdma_job_device_info|rdma_pod_device_info"} and on (instance, device) instance_device_port:rdma_link_identity:info{link="` + l + `"}`)
	}
	if jobs := onLink(link); len(jobs) != 1 || jobs[0].Metric["job_id"] != "4" || jobs[0].Metric["scheduler"] != "slurm" {
		t.Errorf("the jobs on %s: %+v, want Slurm job 4", link, jobs)
	}
	if pods := onLink(link1); len(pods) != 1 || pods[0].Metric["namespace"] != "default" || pods[0].Metric["pod"] != "nccl-test-worker-0" {
		t.Errorf("the jobs on %s: %+v, want pod default/nccl-test-worker-0", link1, pods)
	}
}
