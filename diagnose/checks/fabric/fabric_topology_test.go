// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// fabric.topology is tested with the recorded ibnetdiscover output of the
// ibsim fabric (fixtures/tools/ibnetdiscover-ibsim.txt) as the expected
// file, against the recorded iblinkinfo --line scan of the same fabric,
// each test editing one of them as it says.

const (
	ibnetdiscoverIbsim = "../../../fixtures/tools/ibnetdiscover-ibsim.txt"
	iblinkinfoIbsim    = "../../../fixtures/tools/iblinkinfo-l-ibsim.txt"
)

// evalTopology runs fabric.topology with file as diagnose.fabric_topology
// ("" for none) on one sweep of scan.
func evalTopology(t *testing.T, file string, scan *fabric.Fabric) []diagnose.Finding {
	t.Helper()
	e, err := testEvaluator(&config.Config{Diagnose: config.Diagnose{FabricTopology: file}}, []string{"fabric.topology"})
	if err != nil {
		t.Fatal(err)
	}
	sw := diagnosetest.RecordedSweep(t, time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), scan)
	snap := &diagnose.Reading{Time: sw.Start.Add(time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: sw, Sweeps: 1}}}
	fs := e.Evaluate(snap, nil).Findings
	if snap.ExpectedTopology != nil {
		t.Error("Evaluate changed the caller's snapshot")
	}
	return fs
}

// writeEdited writes the recorded ibnetdiscover output without the lines
// drop returns true for.
func writeEdited(t *testing.T, drop func(line string) bool) string {
	t.Helper()
	b, err := os.ReadFile(ibnetdiscoverIbsim)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !drop(l) {
			out = append(out, l)
		}
	}
	p := filepath.Join(t.TempDir(), "fabric.topo")
	if err := os.WriteFile(p, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFabricTopologyMatches(t *testing.T) {
	scan := diagnosetest.ReadTopology(t, iblinkinfoIbsim, nil)
	// By GUID (ibnetdiscover's output) and by description (ibsim's
	// hand-written file of the same fabric).
	for _, file := range []string{ibnetdiscoverIbsim, "../../../fixtures/tools/ibsim-fabric.net"} {
		fs := evalTopology(t, file, scan)
		if len(fs) != 1 || fs[0].Severity != diagnose.Pass || !strings.Contains(fs[0].Observed, "8 links") {
			t.Errorf("%s: %+v; want one pass with 8 links", file, fs)
		}
	}
}

func TestFabricTopologyMissingLink(t *testing.T) {
	// The scan after node03's cable was pulled (as TestFabricPortDown):
	// leaf2 port 1 Down, node03's line gone.
	scan := diagnosetest.ReadTopology(t, iblinkinfoIbsim, func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			switch {
			case strings.Contains(l, `node03 mlx5_0"      6    1[  ] ==(`):
				continue
			case strings.HasPrefix(l, "0x0000000000200002 ") && strings.Contains(l, `      3    1[  ] ==(`):
				l = `0x0000000000200002 "                         leaf2"      3    1[  ] ==(                Down/ Polling)==>             [  ] "" ( )`
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	})
	fs := evalTopology(t, ibnetdiscoverIbsim, scan)
	f := diagnosetest.FindingFor(fs, "fabric.topology", "0x0000000000200002/1")
	if f == nil || f.Severity != diagnose.Fail {
		t.Fatalf("missing leaf2[1]-node03 link: %+v", fs)
	}
	for _, want := range []string{`"leaf2" port 1 (GUID 0x0000000000200002, LID 3)`, `"node03 mlx5_0" port 1 (GUID 0x0000000000100005)`,
		"DOWN (physical state 2: Polling)", "not in the scan"} {
		if !strings.Contains(f.Observed, want) {
			t.Errorf("observed lacks %q: %q", want, f.Observed)
		}
	}
	for _, want := range []string{"plugged in at both ends", "ibportstate 3 1 query", "ibnetdiscover > " + ibnetdiscoverIbsim} {
		if !strings.Contains(f.Remedy, want) {
			t.Errorf("remedy lacks %q: %q", want, f.Remedy)
		}
	}
	if n := len(fs); n != 2 || fs[1].Severity != diagnose.Pass || !strings.Contains(fs[1].Observed, "7 links") {
		t.Errorf("want the failure and a pass for the 7 other links: %+v", fs)
	}
}

func TestFabricTopologyAddedLink(t *testing.T) {
	// The expected file without node04: its section and leaf2's port 2.
	inNode04 := false
	file := writeEdited(t, func(l string) bool {
		switch {
		case strings.HasPrefix(l, "vendid="):
			inNode04 = false
		case strings.Contains(l, `Ca	1 "H-0000000000100006"`):
			inNode04 = true
		}
		return inNode04 || strings.HasPrefix(l, "[2]\t\"H-0000000000100006\"")
	})
	// The section's header lines before "Ca" stay: they are not links.
	fs := evalTopology(t, file, diagnosetest.ReadTopology(t, iblinkinfoIbsim, nil))
	f := diagnosetest.FindingFor(fs, "fabric.topology", "0x0000000000200002/2")
	if f == nil || f.Severity != diagnose.Warn {
		t.Fatalf("added leaf2[2]-node04 link: %+v", fs)
	}
	for _, want := range []string{`"leaf2" port 2 (GUID 0x0000000000200002, LID 3)`, `"node04 mlx5_0" port 1 (GUID 0x0000000000100007, LID 7)`} {
		if !strings.Contains(f.Observed, want) {
			t.Errorf("observed lacks %q: %q", want, f.Observed)
		}
	}
	if !strings.Contains(f.Expected, `the file has no link on "leaf2" port 2`) || !strings.Contains(f.Remedy, "update the expected topology file") {
		t.Errorf("finding %+v", *f)
	}
	if n := len(diagnosetest.FindingsOf(fs, "fabric.topology")); n != 2 {
		t.Errorf("%d findings, want the warning and a pass: %+v", n, fs)
	}
}

func TestFabricTopologyMovedCable(t *testing.T) {
	// node01's cable moved from leaf1 port 1 to port 3: the expected link
	// fails (leaf1 port 1 Down), the new one warns and says where the file
	// cables node01.
	scan := diagnosetest.ReadTopology(t, iblinkinfoIbsim, func(s string) string {
		s = strings.ReplaceAll(s, `      2    1[  ] ==( 4X`, `      2    3[  ] ==( 4X`)
		s = strings.ReplaceAll(s, `0x0000000000200001      2    1[  ] "leaf1"`, `0x0000000000200001      2    3[  ] "leaf1"`)
		return strings.Replace(s, `"                         leaf1"      2    3[  ] ==(                Down/ Polling)==>             [  ] "" ( )`,
			`"                         leaf1"      2    1[  ] ==(                Down/ Polling)==>             [  ] "" ( )`, 1)
	})
	fs := evalTopology(t, ibnetdiscoverIbsim, scan)
	miss, add := diagnosetest.FindingFor(fs, "fabric.topology", "0x0000000000200001/1"), diagnosetest.FindingFor(fs, "fabric.topology", "0x0000000000200001/3")
	if miss == nil || miss.Severity != diagnose.Fail || add == nil || add.Severity != diagnose.Warn {
		t.Fatalf("moved cable: %+v", fs)
	}
	if want := `the file cables "node01 mlx5_0" port 1 to "leaf1" port 1 (GUID 0x0000000000200001)`; !strings.Contains(add.Expected, want) {
		t.Errorf("expected %q lacks %q", add.Expected, want)
	}
	if want := `"node01 mlx5_0" port 1 (GUID 0x0000000000100001, LID 4) is cabled to "leaf1" port 3`; !strings.Contains(miss.Observed, want) {
		t.Errorf("observed %q lacks %q", miss.Observed, want)
	}
}

func TestFabricTopologySkipsAndErrors(t *testing.T) {
	fs := evalTopology(t, "", diagnosetest.ReadTopology(t, iblinkinfoIbsim, nil))
	if len(fs) != 1 || fs[0].Severity != diagnose.Skip || !strings.Contains(fs[0].Evidence, "diagnose.fabric_topology") {
		t.Errorf("no file: %+v", fs)
	}
	// No sweep: the fabric source's reason.
	e, err := testEvaluator(&config.Config{Diagnose: config.Diagnose{FabricTopology: ibnetdiscoverIbsim}}, []string{"fabric.topology"})
	if err != nil {
		t.Fatal(err)
	}
	fs = e.Evaluate(&diagnose.Reading{Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{}}}, nil).Findings
	if len(fs) != 1 || fs[0].Severity != diagnose.Skip || !strings.Contains(fs[0].Evidence, "no fabric counter sweep") {
		t.Errorf("no sweep: %+v", fs)
	}
	// A file that is not ibnetdiscover's output does not stop the
	// evaluator: TopologyErr names the key and the line, and
	// fabric.topology is unknown with that reason, never "no file".
	e, err = testEvaluator(&config.Config{Diagnose: config.Diagnose{FabricTopology: iblinkinfoIbsim}}, []string{"fabric.topology"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.TopologyErr(); err == nil || !strings.Contains(err.Error(), "diagnose.fabric_topology") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("iblinkinfo output as the topology file: %v", err)
	}
	sw := diagnosetest.RecordedSweep(t, time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), diagnosetest.ReadTopology(t, iblinkinfoIbsim, nil))
	fs = e.Evaluate(&diagnose.Reading{Time: sw.Start.Add(time.Second), Host: &diagnosetest.Host{Sweep: &fabric.SweepStatus{Last: sw, Sweeps: 1}}}, nil).Findings
	if len(fs) != 1 || fs[0].Severity != diagnose.Warn || !fs[0].Unknown || !strings.Contains(fs[0].Evidence, "line 1") {
		t.Errorf("unreadable topology file: %+v", fs)
	}
	e, err = testEvaluator(&config.Config{Diagnose: config.Diagnose{FabricTopology: filepath.Join(t.TempDir(), "none")}}, nil)
	if err != nil || e.TopologyErr() == nil || !strings.Contains(e.TopologyErr().Error(), "no such file") {
		t.Errorf("missing file: %v, %v", err, e.TopologyErr())
	}
}
