// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
)

// TestFabricRoutesOnIbsim: on the simulated fat tree under the real
// opensm, rdma_fabric_port_routes equals, switch by switch and port by
// port, the channel-adapter LIDs that ibroute prints for that switch.
func TestFabricRoutesOnIbsim(t *testing.T) {
	requireTool(t, "ibroute")
	requireTool(t, "dump_fts")
	s := startSimFabric(t)
	addr, logs := serveFabric(t, s)
	body := metricsWhen(t, addr, logs, "a whole route read", func(b string) bool {
		v, ok := sample(b, "rdma_fabric_routes_read_success")
		return ok && v == 1
	})
	if bad := routeMismatches(t, s, body); len(bad) > 0 {
		t.Errorf("rdma_fabric_port_routes differs from ibroute:\n%s\n%s", strings.Join(bad, "\n"), smGrep(body, "rdma_fabric_port_routes"))
	}
}

// ibrouteCAs returns, for the switch at lid, its GUID label and how many
// channel-adapter LIDs ibroute prints per out port.
func ibrouteCAs(t *testing.T, s simFabric, lid int) (string, map[int]int) {
	t.Helper()
	guid, want, err := readIbroute(s, lid)
	if err != nil {
		t.Fatal(err)
	}
	return guid, want
}

// readIbroute is ibrouteCAs with its error: while opensm sweeps after a
// link is pulled, ibroute may fail for a moment (exit 255), which a
// test waiting for the reroute reads as "not yet".
func readIbroute(s simFabric, lid int) (string, map[int]int, error) {
	cmd := exec.Command("ibroute", strconv.Itoa(lid))
	cmd.Env = s.Env
	cmd.Dir = s.Dir
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("ibroute %d: %w", lid, err)
	}
	text := string(out)
	i := strings.Index(text, " guid 0x")
	if i < 0 {
		return "", nil, fmt.Errorf("ibroute %d printed no header:\n%s", lid, text)
	}
	guid := text[i+6 : i+6+18]
	want := map[int]int{}
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) > 3 && strings.HasPrefix(f[0], "0x") && strings.Contains(l, "(Channel Adapter portguid") {
			p, _ := strconv.Atoi(f[1])
			want[p]++
		}
	}
	return guid, want, nil
}

// routeMismatches compares rdma_fabric_port_routes in body with what
// ibroute prints now, on every port of every switch (the switches have
// LIDs 1 to Leaves+Spines under opensm), and lists the differences.
func routeMismatches(t *testing.T, s simFabric, body string) []string {
	t.Helper()
	var bad []string
	for lid := 1; lid <= fabricShape.Leaves+fabricShape.Spines; lid++ {
		guid, want, err := readIbroute(s, lid)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		for port := 1; port <= 8; port++ {
			got, ok := sample(body, portSeries("rdma_fabric_port_routes", guid, port))
			if !ok || int(got) != want[port] {
				bad = append(bad, fmt.Sprintf("switch %s (LID %d) port %d: rdma_fabric_port_routes %v (present %v), ibroute %d", guid, lid, port, got, ok, want[port]))
			}
		}
	}
	return bad
}

// TestFabricReroutedOnIbsim (issue 38, done-when): after leaf002's uplink
// to spine001 is pulled and opensm reroutes (its next sweep), the series
// equal the new tables: leaf002 routes nothing out of port 5, and the
// next reads follow. The wait is bounded by metricsWhen (60 s), not timed.
func TestFabricReroutedOnIbsim(t *testing.T) {
	requireTool(t, "ibroute")
	requireTool(t, "dump_fts")
	s := startSimFabric(t)
	addr, logs := serveFabric(t, s)
	body := metricsWhen(t, addr, logs, "a whole route read", func(b string) bool {
		v, ok := sample(b, "rdma_fabric_routes_read_success")
		return ok && v == 1
	})
	leaf2 := nodeGUIDs(body)["leaf002"]
	v5, _ := sample(body, portSeries("rdma_fabric_port_routes", leaf2, 5))
	t.Logf("before the pull: leaf002 port 5 routes %v", v5)
	if v5 == 0 {
		t.Fatalf("leaf002 routes nothing out of its uplink 5 before the pull:\n%s", smGrep(body, "rdma_fabric_port_routes"))
	}
	s.do(t, `Unlink "S-leaf002"[5]`)
	var last []string
	metricsWhen(t, addr, logs, "the series equal to opensm's new tables", func(b string) bool {
		_, now, err := readIbroute(s, 4) // leaf002
		if err != nil || now[5] != 0 {
			return false // opensm has not rerouted yet
		}
		last = routeMismatches(t, s, b)
		return len(last) == 0
	})
	if t.Failed() {
		t.Log(strings.Join(last, "\n"))
	}
	after := metricsWhen(t, addr, logs, "a scrape", func(string) bool { return true })
	v5, _ = sample(after, portSeries("rdma_fabric_port_routes", leaf2, 5))
	v6, _ := sample(after, portSeries("rdma_fabric_port_routes", leaf2, 6))
	reads, _ := sample(after, "rdma_fabric_routes_reads_total")
	t.Logf("after the pull: leaf002 port 5 routes %v, port 6 %v, %v reads", v5, v6, reads)
	if v5 != 0 || v6 != 12 {
		t.Errorf("leaf002 routes %v out of the pulled port 5 and %v out of port 6, want 0 and its 12 remote hosts", v5, v6)
	}
}

// ibfindnodesusing runs infiniband-diags' ibfindnodesusing script on the
// simulator for switch guid, port, and returns its two lists: the hosts
// the switch routes out of the port ("==>>") and those the far end routes
// into it ("<<=="). The script keeps its ibnetdiscover cache in
// /var/cache/infiniband-diags (IBswcountlimits.pm); it runs unchanged,
// with that directory pointed at the test's own.
func ibfindnodesusing(t *testing.T, s simFabric, guid string, port int) (out, in []string) {
	t.Helper()
	script := requireTool(t, "ibfindnodesusing")
	requireTool(t, "perl")
	cache := t.TempDir()
	cmd := exec.Command("perl", "-MIBswcountlimits", "-e",
		`$IBswcountlimits::cache_dir = shift @ARGV; $0 = shift @ARGV; do $0; die $@ if $@`,
		cache, script, "-R", guid, strconv.Itoa(port))
	cmd.Env, cmd.Dir = s.Env, s.Dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ibfindnodesusing %s %d: %v\n%s", guid, port, err, b)
	}
	text := string(b)
	// Its lists join node descriptions ("host0005 mlx5_0") with spaces.
	name := regexp.MustCompile(`host\d+ mlx5_\d+`)
	var cur *[]string
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.Contains(l, "==>>"):
			cur = &out
		case strings.Contains(l, "<<=="):
			cur = &in
		case cur != nil:
			*cur = append(*cur, name.FindAllString(l, -1)...)
		}
	}
	if !strings.Contains(text, "==>>") || !strings.Contains(text, "<<==") {
		t.Fatalf("ibfindnodesusing printed no lists:\n%s", text)
	}
	slices.Sort(out)
	slices.Sort(in)
	return out, in
}

// blastFinding is the part of a /diagnose JSON finding the blast radius
// tests read.
type blastFinding struct {
	Check       string `json:"check"`
	Target      string `json:"target"`
	Evidence    string `json:"evidence"`
	BlastRadius []struct {
		Port    string `json:"port"`
		Out, In struct {
			Count   int      `json:"count"`
			Hosts   []string `json:"hosts"`
			Unknown bool     `json:"unknown"`
		}
	} `json:"blast_radius"`
}

// TestFabricBlastRadiusOnIbsim (issue 38 item 2): errors on leaf002's
// uplink to spine001 are a finding that names exactly the hosts the real
// ibfindnodesusing lists for that link, both ways, with their counts.
func TestFabricBlastRadiusOnIbsim(t *testing.T) {
	requireTool(t, "dump_fts")
	requireTool(t, "ibroute")
	s := startSimFabric(t)
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, logs := serveFabric(t, s, "--config.file="+cfg)
	body := metricsWhen(t, addr, logs, "two sweeps and a whole route read", func(b string) bool {
		v, _ := sample(b, "rdma_fabric_counter_sweep_success")
		r, _ := sample(b, "rdma_fabric_routes_read_success")
		return v == 1 && r == 1 && sweeps(b) >= 2
	})
	leaf2 := nodeGUIDs(body)["leaf002"]
	if leaf2 == "" {
		t.Fatalf("no leaf002 in rdma_fabric_node_info:\n%s", smGrep(body, "rdma_fabric_node_info"))
	}
	wantOut, wantIn := ibfindnodesusing(t, s, leaf2, 5)
	t.Logf("ibfindnodesusing %s 5: out %v, in %v", leaf2, wantOut, wantIn)
	if len(wantOut) == 0 || len(wantIn) == 0 {
		t.Fatalf("ibfindnodesusing lists nothing for leaf002 port 5: out %v, in %v", wantOut, wantIn)
	}

	s.set(t, "S-leaf002", 5, "SymbolErrorCounter", 60, 60)
	target := leaf2 + "/5"
	var doc struct {
		Findings []blastFinding `json:"findings"`
		Faults   []struct {
			Class       string            `json:"class"`
			BlastRadius []json.RawMessage `json:"blast_radius"`
		} `json:"faults"`
	}
	var text string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, text = smFetch(t, addr, "/diagnose?format=json", "")
		doc.Findings = nil
		if json.Unmarshal([]byte(text), &doc) == nil && slices.ContainsFunc(doc.Findings, func(f blastFinding) bool {
			return f.Check == "fabric.errors" && f.Target == target
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fabric.errors finding for %s after 60 s:\n%s\nlog:\n%s", target, ibsimtest.Tail(text, 3000), ibsimtest.Tail(logs.String(), 2000))
		}
	}
	for _, f := range doc.Findings {
		if f.Check != "fabric.errors" || f.Target != target {
			continue
		}
		if len(f.BlastRadius) != 1 {
			t.Fatalf("finding %s: blast radius %+v", target, f.BlastRadius)
		}
		br := f.BlastRadius[0]
		if br.Port != target || br.Out.Unknown || br.In.Unknown ||
			br.Out.Count != len(wantOut) || !slices.Equal(br.Out.Hosts, wantOut) ||
			br.In.Count != len(wantIn) || !slices.Equal(br.In.Hosts, wantIn) {
			t.Errorf("blast radius of %s: %+v; ibfindnodesusing: out %v, in %v", target, br, wantOut, wantIn)
		}
		if !strings.Contains(f.Evidence, fmt.Sprintf("into it, to %d hosts (%s)", len(wantIn), strings.Join(wantIn, ", "))) {
			t.Errorf("evidence %q does not name the hosts routed into the port", f.Evidence)
		}
	}
	found := false
	for _, fl := range doc.Faults {
		found = found || (fl.Class == "cable" && len(fl.BlastRadius) == 1)
	}
	if !found {
		t.Errorf("no cable fault carries the blast radius:\n%s", ibsimtest.Tail(text, 3000))
	}
}

// TestFabricRoutingDisabledUplinkOnIbsim (issue 38, done-when): leaf002's
// parallel uplink 6 disabled with the real ibportstate is found by
// fabric.routing. What ibsim and opensm do (observed 2026-12-07): the port
// reads "Active/Disabled" in iblinkinfo, its peer "Port not available",
// and opensm does not reroute: leaf002 keeps sending six hosts out of it,
// traffic to them is dropped. The wait is bounded (diagnoseWhen, 60 s).
func TestFabricRoutingDisabledUplinkOnIbsim(t *testing.T) {
	requireTool(t, "dump_fts")
	requireTool(t, "ibroute")
	requireTool(t, "ibportstate")
	s := startSimFabric(t)
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, logs := serveFabric(t, s, "--config.file="+cfg)
	body := metricsWhen(t, addr, logs, "a whole route read", func(b string) bool {
		v, ok := sample(b, "rdma_fabric_routes_read_success")
		return ok && v == 1
	})
	leaf2 := nodeGUIDs(body)["leaf002"]
	// opensm gives leaf002 LID 4 (the recorded scan, internal/read/fabric/testdata/lft).
	guid, before := ibrouteCAs(t, s, 4)
	if guid != leaf2 || before[6] == 0 {
		t.Fatalf("LID 4 is %s, routing %v; want leaf002 (%s) with hosts out of port 6", guid, before, leaf2)
	}
	cmd := exec.Command("ibportstate", "4", "6", "disable")
	cmd.Env, cmd.Dir = s.Env, s.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ibportstate 4 6 disable: %v\n%s", err, out)
	}
	target := leaf2 + "/6"
	fs := diagnoseWhen(t, addr, logs, "a fabric.routing failure for leaf002 port 6", func(fs []fabricFinding) bool {
		f := findFabric(fs, "fabric.routing", target)
		return f != nil && f.Severity == "fail"
	})
	f := findFabric(fs, "fabric.routing", target)
	if !strings.Contains(f.Observed, "leaf002") || !strings.Contains(f.Observed, "out of port 6") || !strings.Contains(f.Evidence, "host00") {
		t.Errorf("fabric.routing %s: %+v", target, *f)
	}
	_, after := ibrouteCAs(t, s, 4)
	t.Logf("leaf002 routes out of port 6: %d before the disable, %d now; finding: %s", before[6], after[6], f.Observed)
}
