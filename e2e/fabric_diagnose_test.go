// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
)

// fabricFinding is the part of a /diagnose JSON finding these tests read.
type fabricFinding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Target   string `json:"target"`
	Observed string `json:"observed"`
	Evidence string `json:"evidence"`
	Remedy   string `json:"remedy"`
}

// diagnoseWhen polls /diagnose until ok holds for its findings (60 s at
// most: the bound of a wait, not a timed assertion).
func diagnoseWhen(t *testing.T, addr string, logs *syncBuffer, what string, ok func([]fabricFinding) bool) []fabricFinding {
	t.Helper()
	var doc struct {
		Findings []fabricFinding `json:"findings"`
	}
	var body string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, body = smFetch(t, addr, "/diagnose?format=json", "")
		doc.Findings = nil
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			continue // the first sample is still under way
		}
		if ok(doc.Findings) {
			return doc.Findings
		}
	}
	t.Fatalf("no %s in /diagnose after 60 s:\n%s\nlog:\n%s", what, ibsimtest.Tail(body, 4000), ibsimtest.Tail(logs.String(), 2000))
	return nil
}

// fabricFault is the part of a /diagnose JSON fault these tests read.
type fabricFault struct {
	Class string `json:"class"`
	ID    string `json:"id"`
	Ends  []struct {
		Role   string   `json:"role"`
		Node   string   `json:"node"`
		GUID   string   `json:"guid"`
		Port   int      `json:"port"`
		Status string   `json:"status"`
		Seen   []string `json:"seen"`
	} `json:"ends"`
	Runbook string `json:"runbook"`
}

// faultsWhen polls /diagnose until ok holds for its faults (60 s at most,
// as diagnoseWhen).
func faultsWhen(t *testing.T, addr string, logs *syncBuffer, what string, ok func([]fabricFault) bool) []fabricFault {
	t.Helper()
	var doc struct {
		Faults []fabricFault `json:"faults"`
	}
	var body string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, body = smFetch(t, addr, "/diagnose?format=json", "")
		doc.Faults = nil
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			continue
		}
		if ok(doc.Faults) {
			return doc.Faults
		}
	}
	t.Fatalf("no %s in /diagnose after 60 s:\n%s\nlog:\n%s", what, ibsimtest.Tail(body, 4000), ibsimtest.Tail(logs.String(), 2000))
	return nil
}

func findFault(fs []fabricFault, class, id string) *fabricFault {
	for i := range fs {
		if fs[i].Class == class && fs[i].ID == id {
			return &fs[i]
		}
	}
	return nil
}

func findFabric(fs []fabricFinding, check, target string) *fabricFinding {
	for i := range fs {
		if fs[i].Check == check && fs[i].Target == target {
			return &fs[i]
		}
	}
	return nil
}

// TestFabricDiagnoseOnIbsim: the fabric.* checks on the live simulated
// fabric (ibsim, OpenSM, the real iblinkinfo and ibqueryerrors): a symbol
// error burst on a leaf's host port after start is named by both ends of
// its cable while a clean link gets no finding, and a host cable pulled
// after start is a port that went down, named with the host it had.
func TestFabricDiagnoseOnIbsim(t *testing.T) {
	s := startSimFabric(t)
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, logs := serveFabric(t, s, "--config.file="+cfg)
	body := metricsWhen(t, addr, logs, "two successful sweeps", func(b string) bool {
		v, _ := sample(b, "rdma_fabric_counter_sweep_success")
		return v == 1 && sweeps(b) >= 2
	})
	g := nodeGUIDs(body)
	leaf1, leaf3, leaf4 := g["leaf001"], g["leaf003"], g["leaf004"]
	if leaf1 == "" || leaf3 == "" || leaf4 == "" {
		t.Fatalf("no rdma_fabric_node_info for the leaves:\n%s", smGrep(body, "rdma_fabric_node_info"))
	}

	// After two sweeps: new errors on leaf001 port 1 (host0001's cable),
	// host0016's cable pulled (leaf004 port 4).
	s.set(t, "S-leaf001", 1, "SymbolErrorCounter", 4200, 4200)
	s.do(t, `Unlink "S-leaf004"[4]`)
	bad, down := leaf1+"/1", leaf4+"/4"
	fs := diagnoseWhen(t, addr, logs, "fabric.errors and fabric.port_down findings", func(fs []fabricFinding) bool {
		return findFabric(fs, "fabric.errors", bad) != nil && findFabric(fs, "fabric.port_down", down) != nil
	})

	f := findFabric(fs, "fabric.errors", bad)
	if f.Severity != "fail" {
		t.Errorf("fabric.errors %s: severity %s, want fail (symbol_error +4200)", bad, f.Severity)
	}
	for _, want := range []string{"symbol_error +4200", `"leaf001" port 1 (GUID ` + leaf1, `"host0001 mlx5_0" port 1 (GUID 0x`} {
		if !strings.Contains(f.Observed, want) {
			t.Errorf("fabric.errors observed %q lacks %q", f.Observed, want)
		}
	}
	for _, want := range []string{"reseat", "perfquery ", "iblinkinfo --line -G " + leaf1} {
		if !strings.Contains(f.Remedy, want) {
			t.Errorf("fabric.errors remedy %q lacks %q", f.Remedy, want)
		}
	}
	// A clean link (leaf003 port 1, host0009's cable) gets no finding from
	// any fabric check.
	for _, c := range fs {
		if strings.HasPrefix(c.Check, "fabric.") && c.Target == leaf3+"/1" {
			t.Errorf("the clean link %s/1 has a finding: %+v", leaf3, c)
		}
	}

	d := findFabric(fs, "fabric.port_down", down)
	if d.Severity != "fail" || !strings.Contains(d.Evidence, `"host0016 mlx5_0" port 1`) || !strings.Contains(d.Evidence, `"leaf004" port 4`) {
		t.Errorf("fabric.port_down %s: %+v", down, *d)
	}
	// Ports never cabled (7 and 8) are down in every sweep: not findings.
	if x := findFabric(fs, "fabric.port_down", leaf4+"/7"); x != nil {
		t.Errorf("a never-cabled port is reported as gone down: %+v", *x)
	}

	// The same two faults as the pages tell them (issue 36): one cable
	// fault per link, both ends named, what the switch end saw.
	faults := faultsWhen(t, addr, logs, "the two cable faults", func(fs []fabricFault) bool {
		return findFault(fs, "cable", bad) != nil && findFault(fs, "cable", down) != nil
	})
	for _, c := range []struct{ id, sw, host, seen string }{
		{bad, "leaf001", "host0001 mlx5_0", "symbol_error +4200"},
		{down, "leaf004", "host0016 mlx5_0", "DOWN, ACTIVE in the sweep of "},
	} {
		f := findFault(faults, "cable", c.id)
		if len(f.Ends) != 2 || f.Ends[0].Role != "switch" || f.Ends[0].Node != c.sw || f.Ends[1].Node != c.host ||
			!strings.HasPrefix(f.Ends[1].GUID, "0x") || len(f.Ends[0].Seen) != 1 || !strings.HasPrefix(f.Ends[0].Seen[0], c.seen) ||
			f.Runbook != "docs/runbook.md#cable" {
			t.Errorf("cable fault %s: %+v", c.id, *f)
		}
	}
	for _, f := range faults {
		for _, e := range f.Ends {
			if e.Node == "leaf003" && e.Port == 1 {
				t.Errorf("the clean link leaf003/1 is in a fault: %+v", f)
			}
		}
	}
	// The text leads with them.
	_, text := smFetch(t, addr, "/diagnose", "")
	if fi, pi := strings.Index(text, "\nFaults ("), strings.Index(text, "\nProblems ("); fi < 0 || pi < fi ||
		!strings.Contains(text[fi:pi], "FAIL cable: \"leaf001\" port 1 (GUID "+leaf1) {
		t.Errorf("/diagnose text does not lead with the faults:\n%s", ibsimtest.Tail(text, 3000))
	}
}
