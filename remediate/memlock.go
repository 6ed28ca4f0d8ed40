// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// The memlock action's drop-ins. pam_limits reads the first for logins;
// systemd services ignore it, so each named daemon gets a unit drop-in.
const (
	MemlockLimitsDropIn = "etc/security/limits.d/90-rdma-doctor.conf"
	memlockLimits       = "# Written by rdma_doctor remediate; `rdma_doctor remediate rollback` removes it.\n* soft memlock unlimited\n* hard memlock unlimited\n"
	memlockUnit         = "# Written by rdma_doctor remediate; `rdma_doctor remediate rollback` removes it.\n[Service]\nLimitMEMLOCK=infinity\n"
)

// MemlockUnitDropIn is the systemd drop-in for the unit named like the
// process (slurmd -> slurmd.service).
func MemlockUnitDropIn(process string) string {
	return "etc/systemd/system/" + process + ".service.d/90-rdma-doctor-memlock.conf"
}

// memlockAction lifts RLIMIT_MEMLOCK for the configured job launchers
// (tuning.memlock_processes) whose limit is below the policy. It writes
// drop-ins only: the running processes keep their limit until restarted.
type memlockAction struct{}

func (memlockAction) ID() string       { return "memlock" }
func (memlockAction) Checks() []string { return []string{"mem.memlock"} }

func (a memlockAction) Plan(in *Input) ([]Change, []string, error) {
	tun, err := in.Snap.Host.Tuning()
	if tun == nil {
		return nil, nil, fmt.Errorf("tuning state unreadable: %v", err)
	}
	if len(in.Config.Tuning.MemlockProcesses) == 0 {
		return nil, []string{"nothing to do: no job launcher named in tuning.memlock_processes"}, nil
	}
	want := uint64(tuning.Unlimited)
	if m := in.Config.Diagnose.Policies.MemlockMinKiB; m != nil {
		want = *m * 1024
	}
	low := map[string]bool{}
	for _, m := range tun.Memlock {
		if m.Process != "self" && m.Soft < want {
			low[m.Process] = true
		}
	}
	if len(low) == 0 {
		return nil, []string{"nothing to do: every configured process has its memlock limit"}, nil
	}
	names := make([]string, 0, len(low))
	for n := range low {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Change
	add := func(target, path, desired string) error {
		cur, exists, err := readOptional(in.W, AreaRoot, path)
		if err != nil {
			return err
		}
		if c := dropInChange(a.ID(), "mem.memlock", path, cur, exists, desired); c != nil {
			c.Target = target
			out = append(out, *c)
		}
		return nil
	}
	if err := add("/"+MemlockLimitsDropIn, MemlockLimitsDropIn, memlockLimits); err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		if err := add(n+".service", MemlockUnitDropIn(n), memlockUnit); err != nil {
			return nil, nil, err
		}
	}
	notes := []string{fmt.Sprintf("takes effect when %s restart (systemctl daemon-reload && systemctl restart <unit>) and at the next login; until then diagnose still reports the old limit", strings.Join(names, ", "))}
	return out, notes, nil
}
