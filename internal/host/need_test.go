// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hwmon"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/read/kmsg"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/opensm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/roce"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// Each Need names its source once, says why where nothing was read (a
// consumer without a host passes the zero reading), why an error, and
// nothing for a usable reading.
func TestNeedsSayWhy(t *testing.T) {
	boom := errors.New("boom")
	type judged struct{ name, none, failed, usable string }
	seen := map[string]bool{}
	for _, j := range []judged{
		{NeedClass.Name(), NeedClass.Unavailable(nil, nil), NeedClass.Unavailable(nil, boom), NeedClass.Unavailable(&infiniband.Class{}, nil)},
		{NeedPCI.Name(), NeedPCI.Unavailable(nil, nil), NeedPCI.Unavailable(nil, boom), NeedPCI.Unavailable(&irq.Snapshot{}, nil)},
		{NeedIRQ.Name(), NeedIRQ.Unavailable(nil, nil), NeedIRQ.Unavailable(&irq.Snapshot{Errors: []error{boom}}, nil),
			NeedIRQ.Unavailable(&irq.Snapshot{Interrupts: &irq.Interrupts{}}, nil)},
		{NeedTuning.Name(), NeedTuning.Unavailable(nil, nil), NeedTuning.Unavailable(nil, boom), NeedTuning.Unavailable(&tuning.Snapshot{}, nil)},
		{NeedOpenSM.Name(), NeedOpenSM.Unavailable(nil, nil), NeedOpenSM.Unavailable(nil, boom), NeedOpenSM.Unavailable(&opensm.State{}, nil)},
		{NeedNetdevs.Name(), NeedNetdevs.Unavailable(nil, nil), NeedNetdevs.Unavailable(nil, boom), NeedNetdevs.Unavailable(&netdev.Snapshot{}, nil)},
		{NeedGPUs.Name(), NeedGPUs.Unavailable(nil, nil), NeedGPUs.Unavailable(nil, boom), NeedGPUs.Unavailable(&gpu.Snapshot{}, nil)},
		{NeedTemperatures.Name(), NeedTemperatures.Unavailable(nil, nil), NeedTemperatures.Unavailable(nil, boom), NeedTemperatures.Unavailable(&hwmon.Snapshot{}, nil)},
		{NeedRoCE.Name(), NeedRoCE.Unavailable(nil, nil), NeedRoCE.Unavailable(nil, boom), NeedRoCE.Unavailable(&roce.Snapshot{}, nil)},
		{NeedDevlink.Name(), NeedDevlink.Unavailable(nil, ErrNotLive), NeedDevlink.Unavailable(nil, boom), NeedDevlink.Unavailable(&Devlink{}, nil)},
		{NeedSM.Name(), NeedSM.Unavailable(nil, nil), NeedSM.Unavailable(&sm.Status{TargetsErr: boom}, nil), NeedSM.Unavailable(&sm.Status{Rounds: 1}, nil)},
		{NeedFabricSweep.Name(), NeedFabricSweep.Unavailable(nil, nil), NeedFabricSweep.Unavailable(&fabric.SweepStatus{}, nil),
			NeedFabricSweep.Unavailable(&fabric.SweepStatus{Last: &fabric.Sweep{}}, nil)},
		{NeedModule.Name(), NeedModule.Unavailable(false, nil), NeedModule.Unavailable(false, nil), NeedModule.Unavailable(true, nil)},
		{NeedPortHistory.Name(), NeedPortHistory.Unavailable(false, nil), NeedPortHistory.Unavailable(false, nil), NeedPortHistory.Unavailable(true, nil)},
		{NeedKernelLog.Name(), NeedKernelLog.Unavailable(nil, nil), NeedKernelLog.Unavailable(&KernelLog{Status: kmsg.Status{Err: boom}}, nil),
			NeedKernelLog.Unavailable(&KernelLog{Status: kmsg.Status{Reading: true}}, nil)},
	} {
		if j.name == "" || seen[j.name] {
			t.Errorf("a Need named %q: empty or twice", j.name)
		}
		seen[j.name] = true
		if j.none == "" || j.failed == "" {
			t.Errorf("%s: no reason for a missing (%q) or failed (%q) reading", j.name, j.none, j.failed)
		}
		if j.usable != "" {
			t.Errorf("%s: a usable reading is unavailable: %q", j.name, j.usable)
		}
	}
	if r := NeedTuning.Unavailable(nil, boom); !strings.Contains(r, "boom") {
		t.Errorf("a reason leaves out the error: %q", r)
	}
}
