// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFabricDiagnoseJudgesEverySweep (issue 35 item 14): on the live
// simulated fabric, sweeps every second and diagnose samples every 20 s.
// The first sample runs at start, before any sweep; errors set on leaf001
// port 1 after the second sweep rise before the next sample, the first to
// read a sweep. That sample judges the rise because every published sweep
// entered its window; when the window held only the sweeps samples read,
// it started at that sample's sweep and the rise was never judged.
func TestFabricDiagnoseJudgesEverySweep(t *testing.T) {
	s := startSimFabric(t)
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 20s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, logs := serveFabric(t, s, "--config.file="+cfg)
	body := metricsWhen(t, addr, logs, "two sweeps", func(b string) bool { return sweeps(b) >= 2 })
	leaf1 := nodeGUIDs(body)["leaf001"]
	if leaf1 == "" {
		t.Fatalf("no rdma_fabric_node_info for leaf001:\n%s", smGrep(body, "rdma_fabric_node_info"))
	}
	s.set(t, "S-leaf001", 1, "SymbolErrorCounter", 4200, 4200)
	bad := leaf1 + "/1"
	fs := diagnoseWhen(t, addr, logs, "fabric.errors finding for "+bad, func(fs []fabricFinding) bool {
		return findFabric(fs, "fabric.errors", bad) != nil
	})
	if f := findFabric(fs, "fabric.errors", bad); f.Severity != "fail" || !strings.Contains(f.Observed, "symbol_error +4200") {
		t.Errorf("fabric.errors %s: %s, observed %q; want fail, symbol_error +4200", bad, f.Severity, f.Observed)
	}
}
