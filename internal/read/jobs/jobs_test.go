// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package jobs

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// recordedHost is a copy of testdata/slurm-v2 (a Slurm node's recorded
// cgroup v2 tree, job 4's task holding uverbs0 open: testdata/README.md)
// with the two uverbs devices of a dual-HCA host.
func recordedHost(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	if out, err := exec.Command("cp", "-a", "testdata/slurm-v2", root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	write(t, root, "sys/class/infiniband_verbs/uverbs0/ibdev", "mlx5_0\n")
	write(t, root, "sys/class/infiniband_verbs/uverbs1/ibdev", "mlx5_1\n")
	return root
}

func write(t *testing.T, root, name, text string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func open(root string) hostfs.Host {
	return hostfs.Host{Root: hostfs.Dir(root), Sys: hostfs.Dir(root + "/sys"), Proc: hostfs.Dir(root + "/proc")}
}

func read(t *testing.T, h hostfs.Host, opts Options, keep func(string) bool) *Snapshot {
	t.Helper()
	s, err := Read(context.Background(), h, opts, keep)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const scope = "sys/fs/cgroup/system.slice/slurmstepd.scope/"

// The recorded job's task holds uverbs0 open: job 4 uses mlx5_0, and
// nothing else; the scope's own "system" cgroup is no job.
func TestRecordedSlurmV2Job(t *testing.T) {
	s := read(t, open(recordedHost(t)), Options{}, nil)
	want := []Job{{Scheduler: "slurm", ID: "4", Devices: []string{"mlx5_0"}, Known: true}}
	if !reflect.DeepEqual(s.Jobs, want) || s.Unknown() != 0 || len(s.Errors) != 0 {
		t.Errorf("jobs %+v, unknown %d, errors %v; want %+v", s.Jobs, s.Unknown(), s.Errors, want)
	}
}

// Where the rdma controller is enabled in the job's cgroup, its
// rdma.current is the answer (devices it charges), not the descriptors.
func TestRDMACurrent(t *testing.T) {
	root := recordedHost(t)
	write(t, root, scope+"job_4/rdma.current", "mlx5_0 hca_handle=0 hca_object=0\nmlx5_1 hca_handle=2 hca_object=2000\n")
	s := read(t, open(root), Options{}, nil)
	if len(s.Jobs) != 1 || !reflect.DeepEqual(s.Jobs[0].Devices, []string{"mlx5_1"}) || !s.Jobs[0].Known {
		t.Errorf("jobs %+v, want job 4 on mlx5_1 only", s.Jobs)
	}
	write(t, root, scope+"job_4/rdma.current", "mlx5_0 hca_handle=oops\n")
	s = read(t, open(root), Options{}, nil)
	if s.Unknown() != 1 || len(s.Errors) == 0 {
		t.Errorf("a bad rdma.current: unknown %d, errors %v; want the job unknown", s.Unknown(), s.Errors)
	}
}

// A job whose descriptors cannot all be read is unknown, never "no
// device"; a process that ended meanwhile is not an error.
func TestUnreadableIsUnknown(t *testing.T) {
	root := recordedHost(t)
	h := open(root)
	h.Proc = &hostfstest.Faulty{Base: h.Proc, Errors: map[string]error{"49334/fd": fs.ErrPermission}}
	s := read(t, h, Options{}, nil)
	if len(s.Jobs) != 1 || s.Jobs[0].Known || s.Unknown() != 1 || len(s.Errors) != 1 {
		t.Errorf("jobs %+v, unknown %d, errors %v; want job 4 unknown with one error", s.Jobs, s.Unknown(), s.Errors)
	}
	if err := os.RemoveAll(filepath.Join(root, "proc/49334")); err != nil {
		t.Fatal(err)
	}
	s = read(t, open(root), Options{}, nil)
	if len(s.Jobs) != 1 || !s.Jobs[0].Known || len(s.Errors) != 0 {
		t.Errorf("an ended process: jobs %+v, errors %v; want job 4 known", s.Jobs, s.Errors)
	}
	h = open(root)
	h.Sys = &hostfstest.Faulty{Base: h.Sys, Errors: map[string]error{"class/infiniband_verbs/uverbs0/ibdev": fs.ErrPermission}}
	if s = read(t, h, Options{}, nil); s.Unknown() != 1 {
		t.Errorf("an unreadable ibdev: jobs %+v; want job 4 unknown", s.Jobs)
	}
}

// Every bound leaves what it cut unknown and counted.
func TestBounds(t *testing.T) {
	root := recordedHost(t)
	write(t, root, scope+"job_5/cgroup.procs", "")
	write(t, root, scope+"job_x/cgroup.procs", "")
	s := read(t, open(root), Options{MaxJobs: 1}, nil)
	if len(s.Jobs) != 1 || s.Jobs[0].ID != "4" || s.Unread != 2 || s.Unknown() != 2 {
		t.Errorf("MaxJobs 1 of job_4, job_5, job_x: jobs %+v, unread %d; want job 4 and 2 unread", s.Jobs, s.Unread)
	}
	s = read(t, open(root), Options{MaxProcesses: 2}, nil)
	if s.Jobs[0].Known {
		t.Errorf("MaxProcesses 2 of job 4's 5: %+v, want unknown", s.Jobs[0])
	}
	s = read(t, open(root), Options{MaxDescriptors: 1}, nil)
	if s.Jobs[0].Known {
		t.Errorf("MaxDescriptors 1: %+v, want unknown", s.Jobs[0])
	}
}

// A device the filter drops is never named; the job stays known.
func TestDeviceFilter(t *testing.T) {
	s := read(t, open(recordedHost(t)), Options{}, func(d string) bool { return d != "mlx5_0" })
	if len(s.Jobs) != 1 || len(s.Jobs[0].Devices) != 0 || !s.Jobs[0].Known {
		t.Errorf("jobs %+v, want job 4 known on no kept device", s.Jobs)
	}
}

// cgroup v1: Slurm's slurm/uid_<uid>/job_<id> below a controller's
// hierarchy (the recorded v1 names of testdata/README.md).
func TestSlurmV1(t *testing.T) {
	root := recordedHost(t)
	if err := os.RemoveAll(filepath.Join(root, "sys/fs/cgroup/system.slice")); err != nil {
		t.Fatal(err)
	}
	write(t, root, "sys/fs/cgroup/freezer/slurm/uid_20821/job_10/step_batch/cgroup.procs", "49276\n")
	write(t, root, "sys/fs/cgroup/freezer/slurm/uid_20821/job_11/step_0/cgroup.procs", "49253\n")
	s := read(t, open(root), Options{}, nil)
	want := []Job{
		{Scheduler: "slurm", ID: "10", Devices: []string{"mlx5_0"}, Known: true},
		{Scheduler: "slurm", ID: "11", Known: true},
	}
	if !reflect.DeepEqual(s.Jobs, want) {
		t.Errorf("jobs %+v, want %+v", s.Jobs, want)
	}
}

// No Slurm: no job, nothing unknown, no error.
func TestNoSlurm(t *testing.T) {
	s := read(t, open(t.TempDir()), Options{}, nil)
	if len(s.Jobs) != 0 || s.Unknown() != 0 || len(s.Errors) != 0 {
		t.Errorf("%+v", s)
	}
}
