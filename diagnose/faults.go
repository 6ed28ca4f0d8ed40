// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// FabricTopPorts is how many ports a fabric finding lists at most.
const FabricTopPorts = 10

// FabricState is what the fabric checks read: the latest sweep and the
// Sweeps held.
type FabricState struct {
	Last   *fabric.Sweep
	Sweeps []*fabric.Sweep
}

// FabricOf is what the fabric checks and the fault grouping judge: the
// reading's sweep and the sweeps the history holds up to it.
func FabricOf(s *Reading, h *History) FabricState {
	st := FabricState{Last: s.SweepStatus().Last}
	st.Sweeps = sweepsTo(h.Sweeps(), st.Last)
	return st
}

// sweepsTo returns the held sweeps up to last, the sweep the reading
// judges, ending with it: the sweeper adds each sweep as it publishes it
// (History.AddSweep), so the history may already hold one newer than the
// reading's, which the next sample judges. A history that has not seen
// last (a report evaluated without the sampler) judges it after the older
// ones it holds.
func sweepsTo(held []*fabric.Sweep, last *fabric.Sweep) []*fabric.Sweep {
	if i := slices.Index(held, last); i >= 0 {
		return held[:i+1]
	}
	out := held[:0]
	for _, sw := range held {
		if last != nil && sw.Start.Before(last.Start) {
			out = append(out, sw)
		}
	}
	return append(out, last)
}

// FabricTarget is a port's target: its series' guid and port labels.
func FabricTarget(guid uint64, port int) string { return fmt.Sprintf("0x%016x/%d", guid, port) }

// HostList is the hosts routed one way over a link: how many, and the
// first blastHosts of them by name. Unknown marks a list the tables
// cannot give (the switch's table was not read): never "none".
type HostList struct {
	Count   int      `json:"count"`
	Hosts   []string `json:"hosts,omitempty"`
	Unknown bool     `json:"unknown,omitempty"`
}

// BlastRadius is whose traffic crosses the link of a switch port.
type BlastRadius struct {
	// Port is the switch port ("<guid>/<port>", a finding's target).
	Port string `json:"port"`
	// Out are the channel adapters whose LIDs the switch forwards out of
	// the port: traffic to them leaves through it.
	Out HostList `json:"out"`
	// In are the channel adapters whose LIDs the far end forwards over
	// the link into the port: the far switch's port's Out. Where the far
	// end is a host, its own port: all its traffic enters there.
	In HostList `json:"in"`
	// RoutesRead is when the tables were read (after the SM rerouted
	// around a port that went down, they route nothing over it).
	RoutesRead time.Time `json:"routes_read"`
}

// Text is the hosts in a finding's words.
func (l HostList) Text() string {
	if l.Unknown {
		return "unknown (the switch's forwarding table was not read)"
	}
	if l.Count == 0 {
		return "no host"
	}
	s := fmt.Sprintf("%d hosts (%s", l.Count, strings.Join(l.Hosts, ", "))
	if l.Count > len(l.Hosts) {
		s += fmt.Sprintf(", and %d more", l.Count-len(l.Hosts))
	}
	return s + ")"
}

// Text is the blast radius in a finding's words.
func (br BlastRadius) Text() string {
	return fmt.Sprintf("traffic over the link (forwarding tables read at %s): out of %s to %s; into it, to %s",
		br.RoutesRead.UTC().Format(time.RFC3339), br.Port, br.Out.Text(), br.In.Text())
}

// Faults tell the story the pages tell (alerts/alertmanager.yml groups them the same way):
// the failures and warnings about the fabric's links and this host's own
// ports and NICs, grouped into one fault per physical link and class of
// fault, whichever end saw it. A bad cable whose switch end the fabric
// sweep reads and whose host end is this host's port is one fault naming
// both ends, not a fabric.errors and a ctr.symbol problem apart; a switch
// with many bad links is one fault, not one per link. The findings keep
// every detail; a fault lists the ones it groups.

// FaultClass is the class of a fault: what is broken and so what to do.
// The alert rules carry the same names as their fault_class label.
type FaultClass string

// The fault classes, in the order reports list them.
const (
	// FaultSwitch: errors or downs on switchFaultLinks or more links of
	// one switch.
	FaultSwitch FaultClass = "switch"
	// FaultCable: errors on one or both ends of one link, or a link that
	// went down.
	FaultCable FaultClass = "cable"
	// FaultHostNIC: a firmware fatal event, a NIC health reporter in
	// error, or errors the host counts while the switch end is clean.
	FaultHostNIC FaultClass = "host_nic"
	// FaultSubnetManager: no working subnet manager (ports without SM,
	// links in INIT).
	FaultSubnetManager FaultClass = "subnet_manager"
	// FaultCongestion: links waiting for credits (XmitWait).
	FaultCongestion FaultClass = "congestion"
)

// FaultClasses are the classes in report order.
var FaultClasses = []FaultClass{FaultSwitch, FaultCable, FaultHostNIC, FaultSubnetManager, FaultCongestion}

// Action is what to do about a fault of the class; the runbook section
// (Runbook) says more.
func (c FaultClass) Action() string {
	switch c {
	case FaultSwitch:
		return "check the switch itself (power, fans, its management interface, a reboot or firmware upgrade in progress) " +
			"before touching the cables of its links"
	case FaultCable:
		return "reseat the cable at both ends, clean or replace the optics, replace the cable if the errors keep rising or " +
			"the link stays down; compare both ends' counters (perfquery <lid> <port> on the switch end, rdma_doctor " +
			"diagnose on the host)"
	case FaultHostNIC:
		return "the NIC, not the cable: drain the node, reset the firmware (mlxfwreset) or reseat or replace the adapter; " +
			"do not replace the cable first"
	case FaultSubnetManager:
		return "start or fail over the subnet manager (systemctl status opensm, or the switch's or UFM's SM); sminfo shows " +
			"which SM answers"
	case FaultCongestion:
		return "not a broken part: find the traffic pattern (incast, an uneven routing engine, a slower link downstream), " +
			"spread the traffic (adaptive routing) or add uplinks"
	}
	return ""
}

// Runbook is the runbook section of the class: docs/runbook.md has an
// anchor named after each class.
func (c FaultClass) Runbook() string { return "docs/runbook.md#" + string(c) }

// SwitchFaultLinks is how many links of one switch, down or counting
// errors at once, are one switch fault rather than that many cables: the
// alerts' switch_fault_links (mixin.Thresholds.SwitchFaultLinks) default,
// which TestSwitchFaultLinksIsTheAlerts keeps equal.
// Two bad cables on one switch happen; three at once point at the switch.
const SwitchFaultLinks = 3

// MaxFaultEnds bounds the ends a fault lists: a fabric without a subnet
// manager has every link in INIT, a director switch hundreds of links.
// The summary says how many there were; the findings name every one.
const MaxFaultEnds = 2 * FabricTopPorts

// Fault is one physical fault: its class, where it is (both ends of the
// link), what each end saw, what to do, and the findings it groups.
type Fault struct {
	Class FaultClass `json:"class"`
	// ID is the fault's identity, as the alerts' fault label has it: the
	// link ("<guid>/<port>" of its switch end), "<host>/<device>" for a
	// NIC, the switch's GUID, "subnet_manager".
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	// Summary names the fault in one line.
	Summary string `json:"summary"`
	// Ends are the link's ends (the switch end first), the NIC and its
	// link's far end, or the switch and its links' far ends.
	Ends     []FaultEnd   `json:"ends"`
	Action   string       `json:"action"`
	Runbook  string       `json:"runbook"`
	Findings []FindingRef `json:"findings"`
	// BlastRadius is whose traffic crosses the fault's links, from the
	// forwarding tables (its findings' blast radii; at most
	// fabricTopPorts links).
	BlastRadius []BlastRadius `json:"blast_radius,omitempty"`
	// CongestionRole is a congestion fault's link's role: root, victim
	// or unknown (fabric.congestion).
	CongestionRole string `json:"congestion_role,omitempty"`
}

// End statuses: something was seen there; it was read and is clean; it
// was not read by this report (not swept, not this host): never clean.
const (
	EndSeen    = "seen"
	EndClean   = "clean"
	EndUnknown = "unknown"
)

// FaultEnd is one end of a fault's link.
type FaultEnd struct {
	// Role is "switch" (a switch port) or "host" (a channel adapter's port).
	Role string `json:"role"`
	// Node is the node description (a switch's name; a host's "node01
	// mlx5_0").
	Node string `json:"node,omitempty"`
	GUID string `json:"guid,omitempty"`
	Port int    `json:"port,omitempty"`
	LID  int    `json:"lid,omitempty"`
	// Host and Device are set when the end is this host's own port.
	Host   string `json:"host,omitempty"`
	Device string `json:"device,omitempty"`
	// Status is seen, clean or unknown; Seen what was seen there.
	Status string   `json:"status"`
	Seen   []string `json:"seen,omitempty"`
}

// FindingRef names a finding of the report: its check and target.
type FindingRef struct {
	Check  string `json:"check"`
	Target string `json:"target"`
}

// faultPort is a port of the fabric scan.
type faultPort struct {
	fabric.End
	sw bool
}

// FaultSeen is what one fabric finding saw on one port of a link.
type FaultSeen struct {
	class FaultClass
	// a and b are the link's ends as the scan has them (a the switch
	// end); b.GUID is 0 when the scan has no peer for the port.
	a, b faultPort
	onB  bool
	what string
	// role is a congested port's (CongestionRoot, ...), "" for others.
	Role string
}

// IsSwitch reports whether the scan prints guid as a switch's.
func IsSwitch(topo *fabric.Fabric, guid uint64) bool {
	ls := topo.PortLines
	i := sort.Search(len(ls), func(i int) bool { return ls[i].GUID >= guid })
	return i < len(ls) && ls[i].GUID == guid && ls[i].Switch
}

// SeenAt is what a finding saw at port p, with the link the scan topo has
// there.
func SeenAt(topo *fabric.Fabric, p *fabric.PortLine, class FaultClass, what string) FaultSeen {
	s := FaultSeen{class: class, what: what,
		a: faultPort{End: fabric.End{GUID: p.GUID, Desc: p.Desc, LID: p.LID, Port: p.Port}, sw: p.Switch}}
	if topo == nil {
		return s
	}
	l, _ := topo.LinkAt(p.GUID, p.Port)
	if l == nil {
		return s
	}
	s.a, s.b = faultPort{l.A, IsSwitch(topo, l.A.GUID)}, faultPort{l.B, IsSwitch(topo, l.B.GUID)}
	s.onB = l.B.GUID == p.GUID && l.B.Port == p.Port
	return s
}

// SeenOnLink is what a finding saw on the link l of the scan topo.
func SeenOnLink(topo *fabric.Fabric, l *fabric.Link, class FaultClass, what string) FaultSeen {
	return FaultSeen{class: class, what: what, a: faultPort{l.A, IsSwitch(topo, l.A.GUID)}, b: faultPort{l.B, IsSwitch(topo, l.B.GUID)}}
}

// The host checks a fault groups, by class: physical errors and downs of
// the host's own port (a cable, or the NIC when the switch end is clean),
// its transmit wait, the NIC itself, the subnet manager.
var (
	hostErrorChecks = []string{"ctr.symbol", "ctr.recovery", "ctr.rcv_err", "ctr.integrity"}
	hostDownChecks  = []string{"ctr.downed", "port.flap", "port.drop"}
	hostNICChecks   = []string{"kernel.events", "devlink.health"}
	smFaultChecks   = []string{"sm.present", "sm.master", "fabric.init"}
)

// faultContext is what the grouping knows besides the findings: this
// host's name and its devices' node GUIDs (the CA end of its links), the
// latest fabric scan and sweep.
type faultContext struct {
	host    string
	devices map[string]hostDevice
	// topos are the scans of the sweeps held, newest first: a link that
	// went down is in the older ones only.
	topos  []*fabric.Fabric
	sweep  *fabric.Sweep
	sweeps int
}

type hostDevice struct {
	guid  uint64
	desc  string
	ports []int
}

func newFaultContext(s *Reading, h *History) faultContext {
	c := faultContext{host: s.Hostname, devices: map[string]hostDevice{}}
	if ib := s.IB(); ib != nil {
		for _, d := range ib.Devices {
			if !d.NodeGUID.OK {
				continue
			}
			g, err := strconv.ParseUint(strings.TrimPrefix(d.NodeGUID.V, "0x"), 16, 64)
			if err != nil {
				continue
			}
			hd := hostDevice{guid: g, desc: d.NodeDesc.V}
			for _, p := range d.Ports {
				hd.ports = append(hd.ports, p.Num)
			}
			c.devices[d.Name] = hd
		}
	}
	if st := s.SweepStatus(); st != nil && st.Last != nil {
		f := FabricOf(s, h)
		c.sweep, c.sweeps = f.Last, len(f.Sweeps)
		for i := len(f.Sweeps) - 1; i >= 0; i-- {
			if t := f.Sweeps[i].Topology; t != nil && (len(c.topos) == 0 || c.topos[len(c.topos)-1] != t) {
				c.topos = append(c.topos, t)
			}
		}
	}
	return c
}

// hostLink is the link of the scan whose CA end is this host's device
// and port (its node GUID: the port GUID on ConnectX-4 and later, as the
// alerts' link identity joins it), and which end that is.
func (c *faultContext) hostLink(device string, port int) (a, b faultPort, onB, ok bool) {
	d, known := c.devices[device]
	if !known || d.guid == 0 {
		return a, b, false, false
	}
	for _, t := range c.topos {
		if l, _ := t.LinkAt(d.guid, port); l != nil {
			a, b = faultPort{l.A, IsSwitch(t, l.A.GUID)}, faultPort{l.B, IsSwitch(t, l.B.GUID)}
			return a, b, l.B.GUID == d.guid && l.B.Port == port, true
		}
	}
	return a, b, false, false
}

// nicEnds adds this host's device to a NIC fault with what was seen: as
// the end of its link, and the link's far end, where the fabric scan has
// the link (the page names both ends), else the device alone.
func (c *faultContext) nicEnds(g *faultGroup, dev, what string) {
	joined := false
	for _, port := range c.devices[dev].ports {
		a, b, onB, ok := c.hostLink(dev, port)
		if !ok {
			continue
		}
		here, far := a, b
		if onB {
			here, far = b, a
		}
		see(g.end(dev, func() FaultEnd {
			e := portEnd(here)
			e.Host, e.Device = c.host, dev
			return e
		}), what)
		g.end(endKey(far.GUID, far.Port), func() FaultEnd { return portEnd(far) })
		joined = true
	}
	if !joined {
		see(g.end(dev, func() FaultEnd { return c.hostEnd(dev, 0) }), what)
	}
}

// sweptClean reports whether the fabric sweep read port guid/port and
// judged it clean: in the latest sweep, readable, over two sweeps or
// more, ACTIVE, and no fabric.errors or fabric.port_down finding but a
// pass. notClean are the targets with any other finding.
func (c *faultContext) sweptClean(guid uint64, port int, notClean map[string]bool) bool {
	if c.sweep == nil || c.sweeps < 2 || notClean[FabricTarget(guid, port)] {
		return false
	}
	p := c.sweep.Find(guid, port)
	return p != nil && !p.Unknown && p.State == infiniband.StateActive
}

// faultGroup is a fault being built.
type faultGroup struct {
	Fault
	ends  []*FaultEnd
	index map[string]*FaultEnd // by the end's key
	// hostErrors is set when this host's error counters rose on the
	// link, other when anything else was seen (a down, the fabric's
	// findings): errors with nothing else may be the NIC's.
	hostErrors, other bool
	// link is the fault's link, when it has one.
	link *[2]faultPort
}

func endKey(guid uint64, port int) string { return FabricTarget(guid, port) }

func (g *faultGroup) end(key string, mk func() FaultEnd) *FaultEnd {
	if e := g.index[key]; e != nil {
		return e
	}
	e := mk()
	g.ends = append(g.ends, &e)
	g.index[key] = &e
	return &e
}

func (g *faultGroup) add(f *Finding) {
	if f.Severity.Worse(g.Severity) {
		g.Severity = f.Severity
	}
	ref := FindingRef{Check: f.Check, Target: f.Target}
	if !slices.Contains(g.Findings, ref) {
		g.Findings = append(g.Findings, ref)
	}
}

// addBlast adds br to the fault's blast radii, once per port, at most
// fabricTopPorts.
func (g *faultGroup) addBlast(br BlastRadius) {
	if len(g.BlastRadius) >= FabricTopPorts || slices.ContainsFunc(g.BlastRadius, func(b BlastRadius) bool { return b.Port == br.Port }) {
		return
	}
	g.BlastRadius = append(g.BlastRadius, br)
}

// merge moves g's findings into f; g is dropped.
func (f *faultGroup) merge(g *faultGroup) {
	for _, br := range g.BlastRadius {
		f.addBlast(br)
	}
	for _, r := range g.Findings {
		if !slices.Contains(f.Findings, r) {
			f.Findings = append(f.Findings, r)
		}
	}
	if g.Severity.Worse(f.Severity) {
		f.Severity = g.Severity
	}
	g.Class = ""
}

func see(e *FaultEnd, what string) {
	e.Status = EndSeen
	if what != "" && !slices.Contains(e.Seen, what) {
		e.Seen = append(e.Seen, what)
	}
}

func portEnd(p faultPort) FaultEnd {
	role := "host"
	if p.sw {
		role = "switch"
	}
	return FaultEnd{Role: role, Node: p.Desc, GUID: fmt.Sprintf("0x%016x", p.GUID), Port: p.Port, LID: p.LID, Status: EndUnknown}
}

// groupFaults groups a report's failures and warnings into faults.
func groupFaults(findings []Finding, c faultContext) []Fault {
	groups := map[string]*faultGroup{}
	var order []*faultGroup
	group := func(class FaultClass, id string) *faultGroup {
		k := string(class) + " " + id
		if g := groups[k]; g != nil {
			return g
		}
		g := &faultGroup{Fault: Fault{Class: class, ID: id, Severity: Skip}, index: map[string]*FaultEnd{}}
		groups[k] = g
		order = append(order, g)
		return g
	}
	// linkGroup is the group of a link (a the switch end) and its ends.
	linkGroup := func(class FaultClass, a, b faultPort) *faultGroup {
		g := group(class, FabricTarget(a.GUID, a.Port))
		if g.link == nil {
			g.link = &[2]faultPort{a, b}
			g.end(endKey(a.GUID, a.Port), func() FaultEnd { return portEnd(a) })
			if b.GUID != 0 {
				g.end(endKey(b.GUID, b.Port), func() FaultEnd { return portEnd(b) })
			}
		}
		return g
	}
	// The ports judged and not clean: a swept port or this host's port
	// is clean only when judged (a pass) and no other finding says more.
	notClean := map[string]bool{}
	hostClean := map[string]bool{}
	for _, f := range findings {
		switch {
		case (f.Check == "fabric.errors" || f.Check == "fabric.port_down") && f.Severity != Pass:
			notClean[f.Target] = true
		case f.Check == "ctr.symbol" && f.Severity == Pass:
			hostClean[f.Target] = true
		}
	}
	for _, f := range findings {
		if slices.Contains(hostErrorChecks, f.Check) && f.Severity != Pass {
			hostClean[f.Target] = false
		}
	}

	for i := range findings {
		f := &findings[i]
		if f.Severity != Fail && f.Severity != Warn {
			continue
		}
		if f.Seen != nil {
			for _, s := range *f.Seen {
				var g *faultGroup
				if s.class == FaultSubnetManager {
					g = group(s.class, string(FaultSubnetManager))
				} else {
					g = linkGroup(s.class, s.a, s.b)
					g.other = true
				}
				at := s.a
				if s.onB {
					at = s.b
				}
				e := g.end(endKey(at.GUID, at.Port), func() FaultEnd { return portEnd(at) })
				see(e, s.what)
				g.add(f)
				if s.Role != "" {
					g.CongestionRole = s.Role
				}
				for _, br := range f.BlastRadius {
					if br.Port == endKey(s.a.GUID, s.a.Port) || (s.b.GUID != 0 && br.Port == endKey(s.b.GUID, s.b.Port)) {
						g.addBlast(br)
					}
				}
			}
			continue
		}
		dev, portText, hasPort := strings.Cut(f.Target, "/")
		port, err := strconv.Atoi(portText)
		hasPort = hasPort && err == nil
		switch {
		case f.Unknown:
			// A saturated counter is unknown, not a fault of a class:
			// its problem says how to make it count again.
		case hasPort && (slices.Contains(hostErrorChecks, f.Check) || slices.Contains(hostDownChecks, f.Check) || f.Check == "ctr.xmit_wait"):
			class := FaultCable
			if f.Check == "ctr.xmit_wait" {
				class = FaultCongestion
			}
			var g *faultGroup
			if a, b, onB, ok := c.hostLink(dev, port); ok {
				g = linkGroup(class, a, b)
				here := a
				if onB {
					here = b
				}
				e := g.index[endKey(here.GUID, here.Port)]
				e.Host, e.Device = c.host, dev
				see(e, f.Observed)
			} else {
				id := f.Target
				if c.host != "" {
					id = c.host + "/" + f.Target
				}
				g = group(class, id)
				see(g.end(f.Target, func() FaultEnd { return c.hostEnd(dev, port) }), f.Observed)
			}
			if slices.Contains(hostErrorChecks, f.Check) {
				g.hostErrors = true
			} else {
				g.other = true
			}
			g.add(f)
		case slices.Contains(hostNICChecks, f.Check) && dev != "host" && (f.Check != "kernel.events" || f.Severity == Fail):
			// A kernel event that is not fatal (a link down, a
			// temperature warning) is not the NIC's fault by itself;
			// one that names no device (target host) is no NIC's.
			g := group(FaultHostNIC, c.nicID(dev))
			c.nicEnds(g, dev, OneLine(f.Observed))
			g.add(f)
		case slices.Contains(smFaultChecks, f.Check):
			g := group(FaultSubnetManager, string(FaultSubnetManager))
			if hasPort {
				see(g.end(f.Target, func() FaultEnd { return c.hostEnd(dev, port) }), f.Observed)
			}
			g.add(f)
		}
	}

	// Errors only this host counts on a link whose switch end the sweep
	// read clean are the NIC's (the alerts' RdmaHostNicFault).
	for _, g := range order {
		if g.Class != FaultCable || !g.hostErrors || g.other || g.link == nil {
			continue
		}
		var host, far *FaultEnd
		for _, e := range g.ends {
			if e.Device != "" {
				host = e
			} else {
				far = e
			}
		}
		if host == nil || far == nil {
			continue
		}
		fp := g.link[0]
		if fp.GUID != parseGUIDText(far.GUID) || fp.Port != far.Port {
			fp = g.link[1]
		}
		if !c.sweptClean(fp.GUID, fp.Port, notClean) {
			continue
		}
		far.Status = EndClean
		nic := group(FaultHostNIC, c.nicID(host.Device))
		he := nic.end(host.Device, func() FaultEnd { return *host })
		for _, s := range host.Seen {
			see(he, s)
		}
		he.Port, he.GUID, he.Node, he.LID = host.Port, host.GUID, host.Node, host.LID
		nic.end(endKey(fp.GUID, fp.Port), func() FaultEnd { return *far })
		nic.merge(g)
	}

	// Many bad links of one switch are the switch.
	perSwitch := map[uint64][]*faultGroup{}
	var switches []uint64
	for _, g := range order {
		if g.Class != FaultCable || !g.other || g.link == nil {
			continue
		}
		for _, p := range g.link {
			if p.sw && p.GUID != 0 {
				if perSwitch[p.GUID] == nil {
					switches = append(switches, p.GUID)
				}
				perSwitch[p.GUID] = append(perSwitch[p.GUID], g)
			}
		}
	}
	sort.SliceStable(switches, func(i, j int) bool { return len(perSwitch[switches[i]]) > len(perSwitch[switches[j]]) })
	for _, sw := range switches {
		var links []*faultGroup
		for _, g := range perSwitch[sw] {
			if g.Class == FaultCable {
				links = append(links, g)
			}
		}
		if len(links) < SwitchFaultLinks {
			continue
		}
		sg := group(FaultSwitch, fmt.Sprintf("0x%016x", sw))
		for _, g := range links {
			for _, p := range g.link {
				if p.GUID == 0 {
					continue
				}
				e := g.index[endKey(p.GUID, p.Port)]
				if p.GUID != sw {
					// The far end of one of its links, as it was.
					sg.end(endKey(p.GUID, p.Port), func() FaultEnd { return *e })
					continue
				}
				se := sg.end("switch", func() FaultEnd {
					return FaultEnd{Role: "switch", Node: p.Desc, GUID: e.GUID, LID: p.LID, Status: EndUnknown}
				})
				for _, s := range e.Seen {
					see(se, fmt.Sprintf("port %d: %s", p.Port, s))
				}
			}
			sg.merge(g)
		}
		sg.Summary = fmt.Sprintf("%d of its links down or counting errors", len(links))
	}

	var out []Fault
	for _, g := range order {
		if g.Class == "" {
			continue
		}
		g.Ends = make([]FaultEnd, 0, len(g.ends))
		for _, e := range g.ends {
			if e.Status == EndUnknown {
				c.judgeEnd(g.Class, e, notClean, hostClean)
			}
			g.Ends = append(g.Ends, *e)
		}
		g.Action, g.Runbook = g.Class.Action(), g.Class.Runbook()
		g.Summary = faultSummary(&g.Fault)
		if n := len(g.Ends); n > MaxFaultEnds {
			g.Ends = g.Ends[:MaxFaultEnds]
			g.Summary += fmt.Sprintf(" (%d ends, the first %d listed)", n, MaxFaultEnds)
		}
		out = append(out, g.Fault)
	}
	// Failures first; then by class, each in the order of its first
	// finding (order already is).
	sort.SliceStable(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		if a.Severity != b.Severity {
			return a.Severity.Worse(b.Severity)
		}
		return slices.Index(FaultClasses, a.Class) < slices.Index(FaultClasses, b.Class)
	})
	return out
}

// judgeEnd marks an end where nothing was seen clean when it was read
// and judged: this host's port by its error counters, a swept port by
// the sweeps (for congestion, its XmitWait read over two sweeps). An end
// not read stays unknown, never clean.
func (c *faultContext) judgeEnd(class FaultClass, e *FaultEnd, notClean, hostClean map[string]bool) {
	if e.Port == 0 {
		return
	}
	if e.Device != "" {
		if class != FaultCongestion && hostClean[e.Device+"/"+strconv.Itoa(e.Port)] {
			e.Status = EndClean
		}
		return
	}
	guid := parseGUIDText(e.GUID)
	if class != FaultCongestion {
		if c.sweptClean(guid, e.Port, notClean) {
			e.Status = EndClean
		}
		return
	}
	if c.sweep == nil || c.sweeps < 2 {
		return
	}
	if p := c.sweep.Find(guid, e.Port); p != nil && !p.Unknown && p.Values[fabric.TransmitWait].Present &&
		!p.Values[fabric.TransmitWait].Saturated() {
		e.Status = EndClean
	}
}

func parseGUIDText(s string) uint64 {
	g, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	return g
}

// nicID is a NIC fault's identity, as the alerts' fault label:
// "<host>/<device>".
func (c *faultContext) nicID(device string) string {
	if c.host == "" {
		return device
	}
	return c.host + "/" + device
}

// hostEnd is this host's own device (and port, when not 0) as an end.
func (c *faultContext) hostEnd(device string, port int) FaultEnd {
	e := FaultEnd{Role: "host", Host: c.host, Device: device, Port: port, Status: EndUnknown}
	if d, ok := c.devices[device]; ok {
		e.GUID, e.Node = fmt.Sprintf("0x%016x", d.guid), d.desc
	}
	return e
}

// EndName names an end for a reader: `"leaf1" port 1 (GUID 0x…, LID 2)`,
// and this host's device where the end is its own port.
func EndName(e *FaultEnd) string {
	var s string
	switch {
	case e.Node != "":
		s = strconv.Quote(e.Node)
	case e.Device != "":
		s = e.Device
	default:
		s = e.Role
	}
	if e.Port != 0 {
		s += fmt.Sprintf(" port %d", e.Port)
	}
	var ids []string
	if e.GUID != "" {
		ids = append(ids, "GUID "+e.GUID)
	}
	if e.LID != 0 {
		ids = append(ids, fmt.Sprintf("LID %d", e.LID))
	}
	if len(ids) > 0 {
		s += " (" + strings.Join(ids, ", ") + ")"
	}
	return s + EndHost(e)
}

// EndHost says which of this host's devices an end is: " = mlx5_0 of
// node01".
func EndHost(e *FaultEnd) string {
	if e.Device == "" || e.Node == "" {
		if e.Host != "" && e.Device != "" {
			return " of " + e.Host
		}
		return ""
	}
	s := " = " + e.Device
	if e.Host != "" {
		s += " of " + e.Host
	}
	return s
}

// faultSummary names a fault in one line: where it is.
func faultSummary(f *Fault) string {
	names := make([]string, 0, len(f.Ends))
	for i := range f.Ends {
		names = append(names, EndName(&f.Ends[i]))
	}
	switch f.Class {
	case FaultSwitch:
		// f.Summary says how many links.
		return names[0] + ": " + f.Summary
	case FaultSubnetManager:
		return fmt.Sprintf("no working subnet manager (%d finding(s) of ports or links)", len(f.Findings))
	}
	return strings.Join(names, " <-> ")
}
