// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// fabricTopologyMaxFindings is how many missing (and how many added) links
// fabric.topology names one finding each; the rest share one finding, so
// a file of another fabric does not make thousands of findings.
const fabricTopologyMaxFindings = 20

// FabricTopologyChecks registers the checks of fabric_topology.go; checks.All lists every concern's.
func FabricTopologyChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{ID: "fabric.topology", Title: "Fabric cabled as the expected topology file says", Reads: []diagnose.Source{diagnose.SourceFabric},
		Doc: "With diagnose.fabric_topology naming a saved ibnetdiscover output, the links of the latest iblinkinfo scan " +
			"(the one the counter sweep used) against the file's: a link the file lists that the scan lacks (a port " +
			"down, unplugged, or cabled elsewhere) fails, a link the scan has that the file lacks warns, each named by " +
			"both ends. Ends match by the GUIDs ibnetdiscover prints (a switch's port 0 GUID, a CA's port GUID), or by " +
			"node description where the file has none (ibsim's hand-written files). INIT links count as present " +
			"(fabric.init judges them). With --collector.fabric.shard each exporter judges the links with an end it " +
			"sweeps; a link whose two ends are both gone from the scan is reported by every shard.",
		Remedy: "Plug the cable in at both ends (the ports the finding names) and check both ports come up; if the " +
			"fabric was recabled on purpose, save a fresh ibnetdiscover output as the expected topology file.",
		Run: runFabricTopology})
}

// topoPort is how an expected end finds a port of the scan: by GUID and
// port, or by description and port when the file has no GUID.
type topoPort struct {
	guid uint64
	desc string
	port int
}

func topoPortOf(e fabric.TopoEnd) topoPort {
	if e.GUID != 0 {
		return topoPort{guid: e.GUID, port: e.Port}
	}
	return topoPort{desc: e.Desc, port: e.Port}
}

// topoEndText names an expected end: with the scan's LID when the scan has
// the port.
func topoEndText(e fabric.TopoEnd, p *fabric.PortLine) string {
	switch {
	case p != nil:
		return portText(p.Desc, p.GUID, p.LID, p.Port)
	case e.GUID != 0:
		return fmt.Sprintf("%q port %d (GUID 0x%016x)", e.Desc, e.Port, e.GUID)
	}
	return fmt.Sprintf("%q port %d", e.Desc, e.Port)
}

func runFabricTopology(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	if err := s.ExpectedTopologyErr; err != nil {
		// Unknown, never "no file" nor a pass: the operator asked for a
		// comparison, so it is a problem to fix (warn), not a skip.
		return []diagnose.Finding{{Severity: diagnose.Warn, Target: "fabric", Unknown: true,
			Observed: "the expected topology file could not be read",
			Evidence: err.Error(),
			Remedy:   "fix or replace the file (a saved ibnetdiscover output: ibnetdiscover > FILE), then restart; rdma_doctor --config.check names the line"}}, nil
	}
	want := s.ExpectedTopology
	if want == nil {
		return kit.NoTargets("no expected topology file: set diagnose.fabric_topology to a saved ibnetdiscover output to compare the fabric's cabling with"), nil
	}
	sw := s.SweepStatus().Last
	scan := sw.Topology
	if scan == nil {
		return kit.NoTargets("the latest sweep has no topology scan"), nil
	}
	file := kit.OrText(kit.NonEmpty(s.ExpectedTopologyFile), "diagnose.fabric_topology")
	ports := make(map[topoPort]*fabric.PortLine, 2*len(scan.PortLines))
	for i := range scan.PortLines {
		p := &scan.PortLines[i]
		ports[topoPort{guid: p.GUID, port: p.Port}] = p
		if k := (topoPort{desc: p.Desc, port: p.Port}); ports[k] == nil {
			ports[k] = p
		}
	}
	// The expected peer of each port, to say where a surplus link's port
	// should be cabled.
	wantPeer := make(map[topoPort]fabric.TopoEnd, 2*len(want.Links))
	for _, l := range want.Links {
		wantPeer[topoPortOf(l.A)], wantPeer[topoPortOf(l.B)] = l.B, l.A
	}

	matched := make([]bool, len(want.Links))
	var added []*fabric.Link
	sweptLinks(sw, func(l *fabric.Link) {
		if i := want.Find(l.A, l.B); i >= 0 {
			matched[i] = true
			return
		}
		added = append(added, l)
	})
	var missing []int
	present := 0
	for i, l := range want.Links {
		if matched[i] {
			present++
			continue
		}
		pa, pb := ports[topoPortOf(l.A)], ports[topoPortOf(l.B)]
		swept := pa != nil && sw.Find(pa.GUID, pa.Port) != nil || pb != nil && sw.Find(pb.GUID, pb.Port) != nil
		if !swept && (pa != nil || pb != nil) {
			continue // another shard's link, or a CA-to-CA link not swept
		}
		missing = append(missing, i)
	}

	var out []diagnose.Finding
	var rest []string
	for n, i := range missing {
		l := want.Links[i]
		pa, pb := ports[topoPortOf(l.A)], ports[topoPortOf(l.B)]
		a, b := topoEndText(l.A, pa), topoEndText(l.B, pb)
		if n >= fabricTopologyMaxFindings {
			rest = append(rest, a+" <-> "+b)
			continue
		}
		f := diagnose.Finding{Severity: diagnose.Fail, Target: "fabric",
			Observed: fmt.Sprintf("link missing: %s is %s, %s is %s", a, portNow(scan, pa), b, portNow(scan, pb)),
			Expected: "cabled and up: " + a + " <-> " + b + " (" + file + ")",
			Evidence: fmt.Sprintf("the expected topology file %s lists this link; the latest iblinkinfo scan (%d links) has no link between these ports", file, len(scan.Links)),
			Remedy: fmt.Sprintf("check the cable between %s and %s is plugged in at both ends and both ports come up (%s); "+
				"if the fabric was recabled on purpose, update the expected topology file: ibnetdiscover > %s", a, b, topoCommands(pa, pb), file),
		}
		if p := orPort(pa, pb); p != nil {
			f.Target = diagnose.FabricTarget(p.GUID, p.Port)
		}
		out = append(out, f)
	}
	if len(rest) > 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Fail, Target: "fabric",
			Observed: fmt.Sprintf("%d more links of %s missing from the scan", len(rest), file),
			Evidence: "among them: " + strings.Join(firstN(rest, diagnose.FabricTopPorts), "; "),
			Remedy:   "check those cables at both ends; if most of the file's links are missing, it describes another fabric: update it (ibnetdiscover > " + file + ")"})
	}
	rest = nil
	for n, l := range added {
		if n >= fabricTopologyMaxFindings {
			rest = append(rest, linkText(l))
			continue
		}
		out = append(out, diagnose.Finding{Severity: diagnose.Warn, Target: linkTarget(l),
			Observed: "link not in the expected topology: " + linkText(l),
			Expected: fmt.Sprintf("%s; %s", expectedAt(wantPeer, l.A), expectedAt(wantPeer, l.B)) + " (" + file + ")",
			Evidence: fmt.Sprintf("the latest iblinkinfo scan has this link, the expected topology file %s (%d links) does not", file, len(want.Links)),
			Remedy: fmt.Sprintf("if this cable is where it should be, update the expected topology file (ibnetdiscover > %s); otherwise "+
				"move it to the ports the file names; %s", file, linkCommands(l)),
		})
	}
	if len(rest) > 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Warn, Target: "fabric",
			Observed: fmt.Sprintf("%d more links not in %s", len(rest), file),
			Evidence: "among them: " + strings.Join(firstN(rest, diagnose.FabricTopPorts), "; "),
			Remedy:   "update the expected topology file if the fabric was recabled on purpose (ibnetdiscover > " + file + ")"})
	}
	if present > 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Pass, Target: "fabric",
			Observed: fmt.Sprintf("%d links of the expected topology present", present),
			Evidence: fmt.Sprintf("%s: %d links, %d nodes", file, len(want.Links), want.Nodes)})
	}
	if len(out) == 0 {
		return kit.NoTargets("no link of the expected topology has an end among this exporter's swept ports"), nil
	}
	return out, nil
}

func orPort(a, b *fabric.PortLine) *fabric.PortLine {
	if a != nil && a.Switch || b == nil {
		return a
	}
	return b
}

// portNow says what the scan shows at an expected end.
func portNow(scan *fabric.Fabric, p *fabric.PortLine) string {
	if p == nil {
		return "not in the scan"
	}
	if p.State == infiniband.StateDown {
		return "DOWN (physical state " + physStateText(p.PhysState) + ")"
	}
	if l, peer := scan.LinkAt(p.GUID, p.Port); l != nil {
		return "cabled to " + endText(peer)
	}
	return "up without a peer in the scan"
}

// expectedAt says what the file expects at a scanned end.
func expectedAt(wantPeer map[topoPort]fabric.TopoEnd, e fabric.End) string {
	for _, k := range []topoPort{{guid: e.GUID, port: e.Port}, {desc: e.Desc, port: e.Port}} {
		if peer, ok := wantPeer[k]; ok {
			return fmt.Sprintf("the file cables %q port %d to %s", e.Desc, e.Port, topoEndText(peer, nil))
		}
	}
	return fmt.Sprintf("the file has no link on %q port %d", e.Desc, e.Port)
}

func topoCommands(a, b *fabric.PortLine) string {
	var cmds []string
	for _, p := range []*fabric.PortLine{a, b} {
		if p != nil {
			cmds = append(cmds, fmt.Sprintf("ibportstate %d %d query", p.LID, p.Port))
		}
	}
	if p := orPort(a, b); p != nil {
		cmds = append(cmds, fmt.Sprintf("iblinkinfo --line -G 0x%016x", p.GUID))
	}
	if len(cmds) == 0 {
		return "ibnetdiscover shows whether the nodes are in the fabric at all"
	}
	return strings.Join(cmds, "; ")
}
