// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/url"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// slurmCopyHost copies a fixture host and runs on it the recorded Slurm
// job 4 of internal/jobs/testdata (a real slurmstepd.scope cgroup tree;
// its task's processes hold /dev/infiniband/uverbs0, mlx5_0's, open).
func slurmCopyHost(t *testing.T, host string) string {
	t.Helper()
	root := smCopyHost(t, host)
	src := filepath.Join(repoRoot(t), "internal", "jobs", "testdata", "slurm-v2") + "/."
	if out, err := exec.Command("cp", "-a", src, root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return root
}

// TestJobsJoin: the built server with --collector.jobs on a fixture host
// running a Slurm job on mlx5_0, a real Prometheus with the shipped rules:
// the job reaches the host end of mlx5_0's link (link:rdma_jobs:count 1),
// mlx5_1's link counts 0 jobs, and the documented query lists job 4 on
// the link.
func TestJobsJoin(t *testing.T) {
	promBin := requireTool(t, "prometheus")
	root := slurmCopyHost(t, "cx6-hdr-fdr")
	e := start(t, "--path.rootfs="+root, "--collector.jobs")
	smWaitFor(t, e.addr, `rdma_job_device_info{device="mlx5_0",job_id="4",scheduler="slurm"} 1`)
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
	want := map[string]string{link: "1", e.addr + "/mlx5_1/1": "0"}
	var got map[string]string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		got = map[string]string{}
		for _, s := range query("link:rdma_jobs:count") {
			v, _ := s.Value[1].(string)
			got[s.Metric["link"]] = v
		}
		if len(got) == len(want) && got[link] == want[link] && got[e.addr+"/mlx5_1/1"] == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("link:rdma_jobs:count = %v, want %v\n%s", got, want, prom.out.String())
		}
	}
	jobs := query(`rdma_job_device_info and on (instance, device) instance_device_port:rdma_link_identity:info{link="` + link + `"}`)
	if len(jobs) != 1 || jobs[0].Metric["job_id"] != "4" || jobs[0].Metric["scheduler"] != "slurm" {
		t.Errorf("the jobs on %s: %+v, want Slurm job 4", link, jobs)
	}
}
