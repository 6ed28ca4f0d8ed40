// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/placement"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// rdmaCgroupAction writes the rdma.max lines of
// diagnose.policies.rdma_cgroup_limits, one device per write as the kernel
// takes them; rollback writes back each device's former line. It never
// creates a cgroup or enables the controller: that is the cgroup manager's
// (systemd, Slurm), and a cgroup it does not have is a note. Runtime only:
// the cgroup manager recreates cgroups with its own limits.
type rdmaCgroupAction struct{}

func (rdmaCgroupAction) ID() string       { return "rdma-cgroup" }
func (rdmaCgroupAction) Checks() []string { return []string{"cgroup.rdma"} }

// rdmaMaxPath is a cgroup's rdma.max below the sysfs root.
func rdmaMaxPath(cgroup string) string {
	return tuning.CgroupRoot + cgroup + "/rdma.max"
}

func (a rdmaCgroupAction) Plan(in *Input) ([]Change, []string, error) {
	if len(in.Config.Diagnose.Policies.RDMACgroupLimits) == 0 {
		return nil, []string{"nothing to do: no limits configured (diagnose.policies.rdma_cgroup_limits)"}, nil
	}
	var out []Change
	var notes []string
	files := map[string]string{} // cgroup -> rdma.max content, read once
	missing := map[string]bool{}
	for _, w := range placement.RDMACgroupWants(in.Snap, in.Config) {
		p := rdmaMaxPath(w.Cgroup)
		if missing[w.Cgroup] {
			continue // noted once
		}
		content, read := files[w.Cgroup]
		if !read {
			b, err := in.W.ReadFile(AreaSys, p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				notes = append(notes, fmt.Sprintf("%s: no rdma.max (the cgroup does not exist or its parent does not enable rdma); not changed: the cgroup manager creates cgroups", w.Cgroup))
				missing[w.Cgroup] = true
				continue
			case err != nil:
				return nil, nil, fmt.Errorf("read /sys/%s: %w", p, err)
			}
			content = string(b)
			files[w.Cgroup] = content
		}
		line, ok := RecordLine(content, w.Limit.Device)
		if !ok {
			notes = append(notes, fmt.Sprintf("%s: rdma.max has no line for %s (not an RDMA device of this host); not changed", w.Cgroup, w.Limit.Device))
			continue
		}
		cur, err := tuning.ParseRDMAMax(line)
		if err != nil || len(cur) != 1 {
			notes = append(notes, fmt.Sprintf("%s: the line for %s is not in the kernel's format (%q); not changed", w.Cgroup, w.Limit.Device, line))
			continue
		}
		if cur[0] == w.Limit {
			continue
		}
		out = append(out, Change{Action: a.ID(), Check: "cgroup.rdma", Target: w.Cgroup + " " + w.Limit.Device, Area: AreaSys, Path: p,
			Current: line + "\n", Exists: true, Desired: tuning.FormatRDMALimit(w.Limit) + "\n", InPlace: true, Key: w.Limit.Device})
	}
	if len(out) > 0 {
		notes = append(notes, "runtime only: the cgroup manager (systemd, Slurm's cgroup.conf) sets the limits of the cgroups it creates; persist the policy there")
	} else if len(notes) == 0 {
		notes = append(notes, "nothing to do: every configured rdma.max line has its limits")
	}
	return out, notes, nil
}
