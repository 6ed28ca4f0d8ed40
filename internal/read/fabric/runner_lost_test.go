// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
)

// TestRunnerKeepsCutSwitch: iblinkinfo (recorded on ibsim, testdata
// README) prints nothing of leaf004 once every link of it is cut, and
// exits 0. The scan is not clean (success 0, counted), and leaf004's eight
// ports stay, Stale (the sweep marks them unknown), for KeepLost from the
// first scan that missed it; then it is forgotten and the scans are clean
// again. A scan taken at its word would read clean with leaf004's ports
// gone: a cut switch would look like a removed one.
func TestRunnerKeepsCutSwitch(t *testing.T) {
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut")
	p := fakeIblinkinfo(t, `if [ -e `+cut+` ]; then cat `+iqeFixture("ibsim16-iblinkinfo-leaf004-cut.stdout")+`; else cat `+iqeFixture("ibsim16-iblinkinfo.stdout")+`; fi
`)
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	now := t0
	r := NewRunner(RunnerConfig{Path: p, Now: func() time.Time { return now }})
	scan := func(at time.Duration) Status {
		t.Helper()
		now = t0.Add(at)
		r.RunOnce(context.Background())
		return r.Status()
	}
	leaf4Lines := func(st Status) (n, stale int) {
		for _, l := range st.Fabric.PortLines {
			if l.GUID == leaf4 {
				n++
				if l.Stale && l.Switch {
					stale++
				}
			}
		}
		return n, stale
	}

	st := scan(0)
	if n, stale := leaf4Lines(st); !st.OK || n != 8 || stale != 0 {
		t.Fatalf("full scan: OK %v, leaf004 %d lines (%d stale)", st.OK, n, stale)
	}
	if err := os.WriteFile(cut, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{5 * time.Minute, 10 * time.Minute, 5*time.Minute + DefaultKeepLost} {
		st = scan(at)
		if n, stale := leaf4Lines(st); st.OK || n != 8 || stale != 8 {
			t.Fatalf("scan at +%v with leaf004 cut: OK %v, leaf004 %d lines (%d stale), want 8 stale and a failed scan", at, st.OK, n, stale)
		}
		if st.Err == nil || !strings.Contains(st.Err.Error(), "1 switches") || !st.LastSuccess.Equal(t0) {
			t.Errorf("scan at +%v: err %v, last success %v", at, st.Err, st.LastSuccess)
		}
	}
	if st.Failures != 3 {
		t.Errorf("%d failed scans counted, want 3", st.Failures)
	}
	// Missed for longer than KeepLost: taken as removed, and not brought
	// back by the scan after.
	for _, at := range []time.Duration{6*time.Minute + DefaultKeepLost, 11*time.Minute + DefaultKeepLost} {
		st = scan(at)
		if n, _ := leaf4Lines(st); !st.OK || n != 0 {
			t.Fatalf("scan at +%v: OK %v (%v), leaf004 %d lines; want it forgotten", at, st.OK, st.Err, n)
		}
	}
	if len(r.lost) != 0 {
		t.Errorf("%d switches still remembered as lost", len(r.lost))
	}
	// Cabled again: printed, fresh.
	if err := os.Remove(cut); err != nil {
		t.Fatal(err)
	}
	st = scan(12*time.Minute + DefaultKeepLost)
	if n, stale := leaf4Lines(st); !st.OK || n != 8 || stale != 0 {
		t.Fatalf("recabled: OK %v, leaf004 %d lines (%d stale)", st.OK, n, stale)
	}
}

// TestSweepCutSwitchUnknown: the sweep over a scan that kept a cut
// switch (leaf004, Stale) against the cache the discovery then writes
// (recorded with leaf004's links cut: no leaf004) marks its eight ports
// unknown and counts them; the sweep is not OK.
func TestSweepCutSwitchUnknown(t *testing.T) {
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut")
	p := fakeIblinkinfo(t, `if [ -e `+cut+` ]; then cat `+iqeFixture("ibsim16-iblinkinfo-leaf004-cut.stdout")+`; else cat `+iqeFixture("ibsim16-iblinkinfo.stdout")+`; fi
`)
	r := NewRunner(RunnerConfig{Path: p})
	r.RunOnce(context.Background())
	if err := os.WriteFile(cut, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.RunOnce(context.Background())
	topo := r.Status().Fabric
	tools := fabrictest.InstallWith(t, fabrictest.Answers{Cache: iqeFixture("ibsim16-leaf004-cut.cache")})
	sw := sweepWith(t, SweeperConfig{IBQueryErrors: tools.IBQueryErrors, IBNetDiscover: tools.IBNetDiscover, SMInfo: tools.SMInfo,
		Dir: t.TempDir(), Loop: Loop{Topology: func() *Fabric { return topo }}})
	if sw.OK() || sw.Unknown != 8 || sw.Failures[ReasonMAD] != 1 {
		t.Fatalf("sweep: OK %v, %d unknown of %d, failures %v; want leaf004's 8 unknown", sw.OK(), sw.Unknown, len(sw.Ports), sw.Failures)
	}
	for port := 1; port <= 8; port++ {
		if p := mustFind(t, sw, leaf4, port); !p.Unknown || p.Values[SymbolErrors].Present {
			t.Errorf("leaf004/%d: unknown %v, symbol errors present %v", port, p.Unknown, p.Values[SymbolErrors].Present)
		}
	}
}
