// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
)

// smTools is the recorded fabric's tools with sminfo answering smRun
// ($N: the run's number).
func smTools(t *testing.T, smRun string) (*Sweeper, string) {
	t.Helper()
	tools := fabrictest.InstallWith(t, fabrictest.Answers{SMInfo: smRun})
	topo := ibsimTopology(t)
	return NewSweeper(SweeperConfig{IBQueryErrors: tools.IBQueryErrors, IBNetDiscover: tools.IBNetDiscover, SMInfo: tools.SMInfo,
		Dir: t.TempDir(), Loop: Loop{Topology: func() *Fabric { return topo }}}), tools.Dir
}

// count is the number of logged runs of tool.
func count(t *testing.T, dir, tool string) int {
	n := 0
	for _, r := range runs(t, dir) {
		if strings.HasPrefix(r, tool+" ") {
			n++
		}
	}
	return n
}

// sweepAgain runs one sweep and returns it.
func sweepAgain(t *testing.T, s *Sweeper) *Sweep {
	t.Helper()
	s.SweepOnce(context.Background())
	return s.Status().Last
}

// allUnknown fails unless every port of sw is unknown for r with no value.
func allUnknown(t *testing.T, sw *Sweep, r Reason) {
	t.Helper()
	if sw.OK() || sw.Unknown != len(sw.Ports) || sw.Failures[r] != 1 {
		t.Fatalf("sweep: OK %v, %d of %d ports unknown, failures %v; want every port unknown, one %s", sw.OK(), sw.Unknown, len(sw.Ports), sw.Failures, r)
	}
	for _, p := range sw.Ports {
		if p.Reason != r {
			t.Fatalf("port 0x%x/%d: reason %q, want %q", p.GUID, p.Port, p.Reason, r)
		}
		for id, v := range p.Values {
			if v.Present {
				t.Fatalf("port 0x%x/%d exports %s from a sweep whose LIDs are not verified", p.GUID, p.Port, Counters[id].Field)
			}
		}
	}
}

// TestSweepSMChangedDuringSweep: the master SM changes between the
// sminfo before a sweep's runs and the one after (here another SM takes
// over: recorded on ibsim), so the LIDs the runs queried may name other
// nodes. Not one value is exported; every port is unknown for
// sm_changed, and the next sweep discovers the cache again and reads.
// Exported as read, one node's counters could carry another's labels.
func TestSweepSMChangedDuringSweep(t *testing.T) {
	s, dir := smTools(t, `if [ $N -le 1 ]; then cat `+fabrictest.SMInfo("master")+`; else cat `+fabrictest.SMInfo("failover")+`; fi`)
	allUnknown(t, sweepAgain(t, s), ReasonSMChanged)
	if n := count(t, dir, "ibnetdiscover"); n != 1 {
		t.Fatalf("%d discoveries after the first sweep, want 1", n)
	}
	sw := sweepAgain(t, s)
	if !sw.OK() {
		t.Fatalf("the sweep after the change: %d unknown, failures %v", sw.Unknown, sw.Failures)
	}
	if n := count(t, dir, "ibnetdiscover"); n != 2 {
		t.Errorf("%d discoveries, want 2: the cache of the old SM's LIDs is not read against again", n)
	}
	if p := mustFind(t, sw, leaf1, 1); !p.Values[SymbolErrors].Present {
		t.Error("leaf001/1 unread in the sweep after the change")
	}
}

// TestSweepSMChangedBetweenSweeps: a change of master SM between two
// sweeps makes the second discover the cache again before it reads
// (every port known), not read against the old LIDs.
func TestSweepSMChangedBetweenSweeps(t *testing.T) {
	s, dir := smTools(t, `if [ $N -le 2 ]; then cat `+fabrictest.SMInfo("master")+`; else cat `+fabrictest.SMInfo("failover")+`; fi`)
	for i := range 3 {
		if sw := sweepAgain(t, s); !sw.OK() {
			t.Fatalf("sweep %d: %d unknown, failures %v", i+1, sw.Unknown, sw.Failures)
		}
	}
	if n := count(t, dir, "ibnetdiscover"); n != 2 {
		t.Errorf("%d discoveries in three sweeps with one change of SM, want 2", n)
	}
}

// TestSweepSMUnreadable: sminfo failing (the master stopped, recorded on
// ibsim) or naming an SM that is not master (a standby) leaves the sweep
// unverified: every port unknown, the failure counted, and no
// ibqueryerrors run when it fails before them.
func TestSweepSMUnreadable(t *testing.T) {
	stopped := filepath.Join(filepath.Dir(fabrictest.SMInfo("master")), "sminfo-sm-stopped-ibsim.combined.txt")
	standby := filepath.Join(filepath.Dir(fabrictest.SMInfo("master")), "sminfo-standby-ibsim.txt")
	for _, c := range []struct {
		name, run string
		want      Reason
	}{
		{"stopped", `cat ` + stopped + `; exit 255`, ReasonMAD},
		{"standby", `cat ` + standby, ReasonSMChanged},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, dir := smTools(t, c.run)
			allUnknown(t, sweepAgain(t, s), c.want)
			if n := count(t, dir, "ibqueryerrors"); n != 0 {
				t.Errorf("%d ibqueryerrors runs without a verified SM", n)
			}
		})
	}
}

// TestSMChanged: the same master is the same GUID and LID with an
// activity count that did not go back (opensm counts the SMPs it sent: a
// restarted one starts again from 0).
func TestSMChanged(t *testing.T) {
	was := sm.Info{LID: 4, GUID: "0x0000000000100001", ActivityCount: 411, State: sm.StateMaster}
	for _, c := range []struct {
		name string
		now  func(i *sm.Info)
		want bool
	}{
		{"same", func(*sm.Info) {}, false},
		{"counted on", func(i *sm.Info) { i.ActivityCount = 500 }, false},
		{"restarted", func(i *sm.Info) { i.ActivityCount = 326 }, true},
		{"other SM", func(i *sm.Info) { i.GUID = "0x0000000000100003" }, true},
		{"other LID", func(i *sm.Info) { i.LID = 5 }, true},
	} {
		now := was
		c.now(&now)
		if got := smChanged(was, now); got != c.want {
			t.Errorf("%s: smChanged %v, want %v", c.name, got, c.want)
		}
	}
}
