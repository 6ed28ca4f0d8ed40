// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
)

// TestFabricTopologyOnIbsim: fabric.topology with the real ibnetdiscover's
// output of the live simulated fabric as diagnose.fabric_topology: the
// cabled fabric matches it, and a host cable pulled after start is a
// missing link named by both ends, with no link reported as added.
func TestFabricTopologyOnIbsim(t *testing.T) {
	s := startSimFabric(t)
	ibnetdiscover := requireTool(t, "ibnetdiscover")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ibnetdiscover)
	cmd.Env = s.Env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ibnetdiscover: %v\n%s", err, ibsimtest.Tail(string(out), 2000))
	}
	topo := filepath.Join(t.TempDir(), "fabric.topo")
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(topo, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n  fabric_topology: "+topo+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, logs := serveFabric(t, s, "--config.file="+cfg)
	links := fabricShape.Hosts + fabricShape.Leaves*fabricShape.Spines
	fs := diagnoseWhen(t, addr, logs, "a fabric.topology pass", func(fs []fabricFinding) bool {
		return findFabric(fs, "fabric.topology", "fabric") != nil
	})
	for _, f := range fs {
		if f.Check == "fabric.topology" && f.Severity != "pass" {
			t.Errorf("the cabled fabric does not match its own ibnetdiscover output: %+v", f)
		}
	}
	if p := findFabric(fs, "fabric.topology", "fabric"); !strings.Contains(p.Observed, strconv.Itoa(links)+" links") {
		t.Errorf("pass %q, want all %d links present", p.Observed, links)
	}

	body := metricsWhen(t, addr, logs, "a sweep", func(b string) bool { return sweeps(b) >= 1 })
	leaf4 := nodeGUIDs(body)["leaf004"]
	s.do(t, `Unlink "S-leaf004"[4]`)
	fs = diagnoseWhen(t, addr, logs, "a missing link", func(fs []fabricFinding) bool {
		f := findFabric(fs, "fabric.topology", leaf4+"/4")
		return f != nil && f.Severity == "fail"
	})
	f := findFabric(fs, "fabric.topology", leaf4+"/4")
	for _, want := range []string{`"leaf004" port 4 (GUID ` + leaf4, `"host0016 mlx5_0" port 1 (GUID 0x`, "DOWN"} {
		if !strings.Contains(f.Observed, want) {
			t.Errorf("observed %q lacks %q", f.Observed, want)
		}
	}
	if !strings.Contains(f.Remedy, "plugged in at both ends") {
		t.Errorf("remedy %q", f.Remedy)
	}
	for _, g := range fs {
		if g.Check == "fabric.topology" && g.Severity != "pass" && g.Target != leaf4+"/4" {
			t.Errorf("another fabric.topology finding: %+v", g)
		}
	}
}

// TestFabricTopologyUnreadableOnIbsim: a diagnose.fabric_topology file
// that is not a topology (iblinkinfo's output) does not stop the server:
// it logs one line, /diagnose's fabric.topology is an unknown warning with
// the file's line, and --config.check fails naming it.
func TestFabricTopologyUnreadableOnIbsim(t *testing.T) {
	s := startSimFabric(t)
	topo := filepath.Join(repoRoot(t), "fixtures", "tools", "iblinkinfo-l-ibsim.txt")
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n  fabric_topology: "+topo+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "--path.rootfs="+filepath.Join(repoRoot(t), "fixtures", "hosts", "cx6-hdr-fdr"),
		"--config.file="+cfg, "--config.check").CombinedOutput()
	if code := exitCode(t, err); code != 1 || !strings.HasPrefix(string(out), "rdma_doctor: error: config diagnose.fabric_topology: "+topo+": line 1") {
		t.Errorf("--config.check: exit %d, want 1 naming the file and line:\n%s", code, out)
	}
	addr, logs := serveFabric(t, s, "--config.file="+cfg)
	fs := diagnoseWhen(t, addr, logs, "a fabric.topology finding", func(fs []fabricFinding) bool {
		return findFabric(fs, "fabric.topology", "fabric") != nil
	})
	f := findFabric(fs, "fabric.topology", "fabric")
	if f.Severity != "warn" || !strings.Contains(f.Evidence, topo+": line 1") || !strings.Contains(f.Observed, "could not be read") {
		t.Errorf("fabric.topology with an unreadable file: %+v", *f)
	}
	if n := strings.Count(logs.String(), "expected topology file is fixed"); n != 1 {
		t.Errorf("%d log lines about the topology file, want 1:\n%s", n, ibsimtest.Tail(logs.String(), 3000))
	}
}
