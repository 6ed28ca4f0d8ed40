// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// TestHelp walks the HELP of every family the collectors export: each
// collector on every fixture host (the opt-in series on), the fabric
// collector on the recorded ibsim fabric and rdma_diagnose_status, and
// fails on one that is long, more than a sentence or names an internal
// identifier (testenv.CheckHelp).
func TestHelp(t *testing.T) {
	helps := map[string]string{}
	gather := func(where string, g prometheus.Gatherer) {
		t.Helper()
		mfs, err := g.Gather()
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for _, mf := range mfs {
			helps[mf.GetName()] = mf.GetHelp()
		}
	}
	roots, err := filepath.Glob("../fixtures/hosts/*")
	if err != nil || len(roots) == 0 {
		t.Fatalf("no fixture hosts: %v", err)
	}
	for _, root := range roots {
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			continue
		}
		f := DefaultFlags()
		for _, s := range Table {
			f.SetEnabled(s.Name, s.Name != "fabric")
		}
		f.IRQ.PerIRQ, f.Tuning.CgroupLimits = true, true
		a, err := New(hostEnv(t, root), f, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(a.Bind(context.Background()))
		gather(root, reg)
	}

	opts := FabricOptions{}
	opts.Routes, opts.DumpFTSPath = true, fakeDumpFTS(t, 0)
	gather("fabric", gatherOne(t, "fabric", ibsimFabric(t, opts)))

	rep := &diagnose.Report{Time: time.Unix(1, 0), Findings: []diagnose.Finding{{Check: "port.rate", Severity: diagnose.Fail, Target: "mlx5_0/1"}}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewDiagnoseStatus(func() *diagnose.Report { return rep }))
	gather("diagnose", reg)

	names := make([]string, 0, len(helps))
	for n := range helps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := testenv.CheckHelp(helps[n]); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	t.Logf("%d families checked", len(names))
}
