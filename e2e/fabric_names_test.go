// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// TestFabricNodeNameMapOnIbsim: a node name map naming two switches of
// the live simulated fabric (their GUIDs from the real iblinkinfo): their
// node info and link series carry the names, never the descriptions, and
// a host cable pulled from one of them is a fabric.port_down finding that
// names the switch by its friendly name.
func TestFabricNodeNameMapOnIbsim(t *testing.T) {
	s := startSimFabric(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, requireTool(t, "iblinkinfo"), "--line")
	cmd.Env = s.Env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("iblinkinfo: %v\n%s", err, ibsimtest.Tail(string(out), 2000))
	}
	f, err := fabric.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	guid := map[string]uint64{}
	for _, p := range f.PortLines {
		guid[p.Desc] = p.GUID
	}
	leaf4, spine1 := guid["leaf004"], guid["spine001"]
	if leaf4 == 0 || spine1 == 0 {
		t.Fatalf("no leaf004 or spine001 in iblinkinfo's output:\n%s", ibsimtest.Tail(string(out), 2000))
	}
	nameMap := filepath.Join(t.TempDir(), "ib-node-name-map")
	if err := os.WriteFile(nameMap, fmt.Appendf(nil, "# rack 4\n0x%016x \"rack4-leaf QM8790\"\n\n0x%x core-spine-1 # unquoted\n", leaf4, spine1), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, logs := serveFabric(t, s, "--config.file="+cfg, "--collector.fabric.node-name-map="+nameMap)
	body := metricsWhen(t, addr, logs, "a sweep", func(b string) bool { return sweeps(b) >= 1 })
	g := nodeGUIDs(body)
	leaf4s, spine1s := fmt.Sprintf("0x%016x", leaf4), fmt.Sprintf("0x%016x", spine1)
	if g["rack4-leaf QM8790"] != leaf4s || g["core-spine-1"] != spine1s {
		t.Errorf("rdma_fabric_node_info of the named switches: %v", g)
	}
	if _, ok := g["leaf004"]; ok {
		t.Error("leaf004 still exported under its node description")
	}
	if g["leaf003"] == "" {
		t.Error("an unnamed switch lost its node description")
	}
	// The spine-to-leaf link carries both names (exported from the end
	// with the lower GUID, the spine's).
	both := false
	for _, l := range strings.Split(body, "\n") {
		both = both || strings.HasPrefix(l, "rdma_fabric_link_info{") && strings.Contains(l, `node="core-spine-1"`) &&
			strings.Contains(l, `remote_node="rack4-leaf QM8790"`)
	}
	if !both {
		t.Errorf("no spine001 to leaf004 link with both names:\n%s", smGrep(body, "rdma_fabric_link_info{guid=\""+spine1s))
	}
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, `node="leaf004"`) || strings.Contains(l, `node="spine001"`) {
			t.Errorf("a series with a mapped node's description: %s", l)
		}
	}

	s.do(t, `Unlink "S-leaf004"[4]`)
	down := leaf4s + "/4"
	fs := diagnoseWhen(t, addr, logs, "a fabric.port_down finding", func(fs []fabricFinding) bool {
		return findFabric(fs, "fabric.port_down", down) != nil
	})
	d := findFabric(fs, "fabric.port_down", down)
	if !strings.Contains(d.Evidence, `"rack4-leaf QM8790" port 4`) || strings.Contains(d.Evidence+d.Observed, `"leaf004"`) {
		t.Errorf("fabric.port_down %s does not name the switch by its map name: %+v", down, *d)
	}
}

// TestNodeNameMapBadLine: a node name map with a bad line stops start-up
// and fails --config.check, each with one line naming the file and line.
func TestNodeNameMapBadLine(t *testing.T) {
	root := filepath.Join(repoRoot(t), "fixtures", "hosts", "cx6-hdr-fdr")
	nameMap := filepath.Join(t.TempDir(), "ib-node-name-map")
	if err := os.WriteFile(nameMap, []byte("0x0002c90300a1b2c0 \"leaf-1\"\nleaf-2 0x0002c90300a1b2c1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "rdma_doctor: error: --collector.fabric.node-name-map: node name map " + nameMap + `: line 2: "leaf-2" is not a GUID`
	for _, extra := range [][]string{{"--config.check"}, {"--web.listen-address=127.0.0.1:0"}} {
		args := append([]string{"--path.rootfs=" + root, "--collector.fabric", "--collector.fabric.node-name-map=" + nameMap}, extra...)
		out, err := exec.Command(binary(t), args...).CombinedOutput()
		msg := strings.TrimSpace(string(out))
		if code := exitCode(t, err); code != 1 || !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: exit %d, want 1 with one line %q:\n%s", extra, code, want, out)
		}
	}
}
