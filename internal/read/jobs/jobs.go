// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package jobs finds which Slurm job uses which RDMA device, from the
// host's cgroup tree: a job's cgroup is the kernel's own record of its
// processes, so no scheduler daemon is asked.
//
// A job uses a device when its cgroup's rdma.current charges it (the rdma
// controller counts the verbs contexts and objects a cgroup holds, per
// device: exactly "which job uses which HCA"). Slurm enables only the
// controllers it constrains (a recorded job cgroup lists "cpuset cpu
// memory", testdata/README.md), so rdma.current is usually absent; then
// the job's processes are read instead: a process holding
// /dev/infiniband/uverbsN open has a verbs context on that device.
//
// Every read is bounded (jobs, processes, descriptors); a job whose use
// could not be read completely is Unknown, never "no device".
package jobs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// SchedulerSlurm is the scheduler label of the jobs read from Slurm's
// cgroups.
const SchedulerSlurm = "slurm"

// Options bound a read.
type Options struct {
	// MaxJobs is how many jobs are read; the others are counted in
	// Snapshot.Unread.
	MaxJobs int
	// MaxProcesses is how many processes of one job are read; a job with
	// more is Unknown.
	MaxProcesses int
	// MaxDescriptors is how many open descriptors one read resolves, over
	// every job: a job met after the budget is spent is Unknown.
	MaxDescriptors int
}

// DefaultOptions are the bounds used when an Options field is 0: a node
// runs a few jobs, an MPI rank holds some thousands of descriptors.
var DefaultOptions = Options{MaxJobs: 256, MaxProcesses: 1024, MaxDescriptors: 1 << 18}

// Job is one running job and the RDMA devices it holds, sorted.
type Job struct {
	Scheduler string
	// ID is the scheduler's job id: digits only (validated), so that a
	// label made of it stays bounded and printable.
	ID      string
	Devices []string
	// Known is false when the job's use could not be read completely
	// (an unreadable file, a bound reached): Devices is then a lower
	// bound.
	Known bool
}

// Snapshot is the jobs of a host.
type Snapshot struct {
	// Jobs are the jobs read, sorted by ID.
	Jobs []Job
	// Unread counts the jobs found past Options.MaxJobs or with an id
	// that is not a job id; none of their devices is known.
	Unread int
	// Errors are the read errors met; each names its file.
	Errors []error
}

// Unknown counts the jobs whose devices are not (completely) known.
func (s *Snapshot) Unknown() int {
	n := s.Unread
	for _, j := range s.Jobs {
		if !j.Known {
			n++
		}
	}
	return n
}

// cgroupRoot is the cgroup mount below the sysfs root (tuning.CgroupRoot).
const cgroupRoot = tuning.CgroupRoot

// v1Hierarchies are the cgroup v1 controllers whose hierarchy Slurm
// mirrors as slurm/uid_<uid>/job_<id>: freezer is proctrack/cgroup's,
// devices task/cgroup's; the first one present is read.
var v1Hierarchies = []string{"freezer", "devices", "memory", "cpuset", "cpuacct"}

// maxDepth bounds the walk below a job's cgroup: Slurm's deepest is
// job_<id>/step_<id>/user/task_<n> (3 below the job).
const maxDepth = 4

// Read finds the Slurm jobs of the host and the RDMA devices each holds.
// keep is the device filter: a device it drops is never named. It returns
// an error only when ctx ends; file errors are in Snapshot.Errors.
func Read(ctx context.Context, h hostfs.Host, opts Options, keep func(string) bool) (*Snapshot, error) {
	opts = opts.withDefaults()
	r := &reader{h: h, opts: opts, keep: keep, budget: opts.MaxDescriptors}
	s := &Snapshot{}
	dirs := r.jobDirs()
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].id < dirs[j].id })
	for i, d := range dirs {
		if err := ctx.Err(); err != nil {
			s.Unread += len(dirs) - i
			s.Errors = r.errs
			return s, err
		}
		if d.bad {
			s.Unread++
			continue
		}
		if len(s.Jobs) == opts.MaxJobs {
			s.Unread++
			continue
		}
		s.Jobs = append(s.Jobs, r.job(ctx, d))
	}
	s.Errors = r.errs
	return s, ctx.Err()
}

func (o Options) withDefaults() Options {
	if o.MaxJobs <= 0 {
		o.MaxJobs = DefaultOptions.MaxJobs
	}
	if o.MaxProcesses <= 0 {
		o.MaxProcesses = DefaultOptions.MaxProcesses
	}
	if o.MaxDescriptors <= 0 {
		o.MaxDescriptors = DefaultOptions.MaxDescriptors
	}
	return o
}

type reader struct {
	h      hostfs.Host
	opts   Options
	keep   func(string) bool
	errs   []error
	budget int
	// verbs maps uverbsN to its device, read once (nil until needed).
	verbs map[string]string
}

func (r *reader) fail(err error) { r.errs = append(r.errs, err) }

// jobDir is a job's cgroup directory below the sysfs root.
type jobDir struct {
	id, dir string
	bad     bool // the name is job_<something not a job id>
}

// jobDirs lists the job cgroups: cgroup v2's
// system.slice/<node>_slurmstepd.scope/job_<id> (the node prefix only with
// multiple slurmd), else cgroup v1's <controller>/slurm*/uid_*/job_<id>.
func (r *reader) jobDirs() []jobDir {
	var out []jobDir
	for _, scope := range r.list(cgroupRoot+"/system.slice", func(n string) bool { return strings.HasSuffix(n, "slurmstepd.scope") }) {
		out = append(out, r.jobs(scope)...)
	}
	if len(out) > 0 {
		return out
	}
	for _, c := range v1Hierarchies {
		slurm := r.list(cgroupRoot+"/"+c, func(n string) bool { return strings.HasPrefix(n, "slurm") })
		for _, sd := range slurm {
			for _, uid := range r.list(sd, func(n string) bool { return strings.HasPrefix(n, "uid_") }) {
				out = append(out, r.jobs(uid)...)
			}
		}
		if len(slurm) > 0 {
			return out
		}
	}
	return out
}

// jobs lists the job_<id> directories of dir.
func (r *reader) jobs(dir string) []jobDir {
	var out []jobDir
	for _, d := range r.list(dir, func(n string) bool { return strings.HasPrefix(n, "job_") }) {
		id := d[strings.LastIndexByte(d, '/')+len("/job_"):]
		out = append(out, jobDir{id: id, dir: d, bad: !ValidID(id)})
	}
	return out
}

// ValidID reports whether id is a Slurm job id: 1 to 10 digits (Slurm's
// ids are 32-bit).
func ValidID(id string) bool {
	if id == "" || len(id) > 10 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// list is dir's subdirectories whose names match, as paths. A missing
// dir is no error: most hosts run no Slurm, or the other cgroup version.
func (r *reader) list(dir string, match func(string) bool) []string {
	entries, err := r.h.Sys.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid) {
			r.fail(err)
		}
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && match(e.Name()) {
			out = append(out, dir+"/"+e.Name())
		}
	}
	return out
}

// job reads one job's devices: from its rdma.current when the rdma
// controller is enabled there (it charges the job with what every step
// below holds), else from its processes' open descriptors.
func (r *reader) job(ctx context.Context, d jobDir) Job {
	j := Job{Scheduler: SchedulerSlurm, ID: d.id, Known: true}
	seen := map[string]bool{}
	add := func(dev string) {
		if !seen[dev] && (r.keep == nil || r.keep(dev)) {
			seen[dev] = true
			j.Devices = append(j.Devices, dev)
		}
	}
	if text, err := r.h.Sys.ReadFile(d.dir + "/rdma.current"); err == nil {
		lines, err := tuning.ParseRDMAMax(string(text))
		if err != nil {
			r.fail(fmt.Errorf("/sys/%s/rdma.current: %w", d.dir, err))
			j.Known = false
		}
		for _, l := range lines {
			if !names.Device(l.Device) {
				r.fail(fmt.Errorf("/sys/%s/rdma.current: %q is not an RDMA device name", d.dir, names.Label(l.Device)))
				j.Known = false
				continue
			}
			if l.HCAHandle > 0 || l.HCAObject > 0 {
				add(l.Device)
			}
		}
	} else {
		if !errors.Is(err, fs.ErrNotExist) {
			r.fail(err)
		}
		pids, complete := r.pids(d.dir)
		j.Known = complete
		for _, pid := range pids {
			if ctx.Err() != nil {
				j.Known = false
				break
			}
			devs, ok := r.processDevices(pid)
			if !ok {
				j.Known = false
			}
			for _, dev := range devs {
				add(dev)
			}
		}
	}
	sort.Strings(j.Devices)
	return j
}

// pids lists the processes of the job's cgroup and its descendants (v2
// keeps them in the leaves, task_<n>), at most MaxProcesses; complete is
// false when a file could not be read or the bound was reached.
func (r *reader) pids(jobDir string) (pids []int, complete bool) {
	complete = true
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		text, err := r.h.Sys.ReadFile(dir + "/cgroup.procs")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// the cgroup went away: its processes ended
		case err != nil:
			r.fail(err)
			complete = false
		default:
			for _, f := range strings.Fields(string(text)) {
				pid, err := strconv.Atoi(f)
				if err != nil || pid <= 0 {
					r.fail(fmt.Errorf("/sys/%s/cgroup.procs: %q is not a process id", dir, f))
					complete = false
					continue
				}
				if len(pids) == r.opts.MaxProcesses {
					complete = false
					return
				}
				pids = append(pids, pid)
			}
		}
		if depth == maxDepth {
			return
		}
		for _, sub := range r.list(dir, func(string) bool { return true }) {
			walk(sub, depth+1)
		}
	}
	walk(jobDir, 0)
	return pids, complete
}

// uverbsPrefix is where a verbs context's descriptor points.
const uverbsPrefix = "/dev/infiniband/uverbs"

// processDevices is the devices whose uverbs device the process holds
// open; ok is false when its descriptors could not all be read. A process
// that ended meanwhile holds nothing.
func (r *reader) processDevices(pid int) (devs []string, ok bool) {
	dir := strconv.Itoa(pid) + "/fd"
	fds, err := r.h.Proc.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true
	}
	if err != nil {
		r.fail(err)
		return nil, false
	}
	ok = true
	for _, fd := range fds {
		if r.budget == 0 {
			return devs, false
		}
		r.budget--
		target, err := r.h.Proc.ReadLink(dir + "/" + fd.Name())
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // closed meanwhile
				r.fail(err)
				ok = false
			}
			continue
		}
		node, isVerbs := strings.CutPrefix(target, uverbsPrefix)
		if !isVerbs {
			continue
		}
		dev, known := r.verbsDevice("uverbs" + node)
		if !known {
			ok = false
			continue
		}
		devs = append(devs, dev)
	}
	return devs, ok
}

// verbsDevice is the RDMA device of a uverbs character device, from
// /sys/class/infiniband_verbs/<uverbsN>/ibdev.
func (r *reader) verbsDevice(node string) (string, bool) {
	if r.verbs == nil {
		r.verbs = map[string]string{}
	}
	if dev, ok := r.verbs[node]; ok {
		return dev, dev != ""
	}
	file := "class/infiniband_verbs/" + node + "/ibdev"
	b, err := r.h.Sys.ReadFile(file)
	dev := strings.TrimSpace(string(b))
	switch {
	case err != nil:
		r.fail(err)
		dev = ""
	case !names.Device(dev):
		r.fail(fmt.Errorf("/sys/%s: %q is not an RDMA device name", file, names.Label(dev)))
		dev = ""
	}
	r.verbs[node] = dev
	return dev, dev != ""
}
