// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// The fabric.* checks judge the fabric collector's counter sweep (and the
// iblinkinfo scan it swept) on the host that scans the fabric. They never
// send a MAD: everything comes from the sweeps the history keeps
// (diagnose's fabric_history.go). Targets are "<guid>/<port>" as the per-port series
// label them, and a finding names both ends of the cable.

// fabricCongestedShare is the share of a port's rate lost to XmitWait in
// the window above which fabric.congestion warns. The lost bytes are
// estimated as XmitWait × 8: NVIDIA Quantum switches count one tick per 8
// bytes the port could have sent (ibdiagnet's "Congestion Assessment on
// InfiniBand Links"); older Switch-IB parts count 32 bytes per lane, so the
// estimate is a lower bound there.
const fabricCongestedShare = 0.10

// fabricWaitTickBytes is the bytes one XmitWait tick stands for (see
// fabricCongestedShare).
const fabricWaitTickBytes = 8

// NeedTwoSweeps is the skip reason of a fabric delta check with one sweep.
const NeedTwoSweeps = "needs two fabric counter sweeps to judge increases (one so far): the sweeper runs every --collector.fabric.counters-interval"

// FabricChecks registers the checks of fabric.go; checks.All lists every concern's.
func FabricChecks(l *diagnose.CheckList) {
	reads := []diagnose.Source{diagnose.SourceFabric}
	l.Register(&diagnose.Check{ID: "fabric.errors", Title: "Fabric cables without rising error counters", Reads: reads,
		Doc: "The fabric collector's counter sweep (PortCounters of every switch port, and of CA ports with " +
			"--collector.fabric.ca-counters): each error counter's increase between the sweeps in the window, with the " +
			"host's limits (diagnose.thresholds.counters: symbol_error warn above 0, fail above 10, ...). A port whose " +
			"errors rose is named with the cable's both ends: switch node description, port, GUID and LID, and the " +
			"peer's. A fixed-width counter pinned at its maximum has stopped counting: warn, unknown (never clean), except a 4-bit " +
			"one pinned at 15 that did not rise to it within the window, which cannot be judged (skip, as ctr.integrity). " +
			"Ports the latest sweep could not read warn as unknown (never clean). A clean port gets no finding of its own; " +
			"one pass finding counts them.",
		Remedy: "Reseat the cable at both ends, clean or replace the optic, replace the cable if errors continue; read both " +
			"ends with perfquery <lid> <port> and see the link with iblinkinfo --line -G <guid>.",
		Run: runFabricErrors})
	l.Register(&diagnose.Check{ID: "fabric.link", Title: "Fabric links run at what both ends support", Reads: reads,
		Doc: "iblinkinfo's \"Could be\" hint on each link of the swept switches: both ends support a faster speed " +
			"(the guide's switch port set to FDR on an HDR fabric) fails. Width: a link narrower than what both ends " +
			"support, counted up to 4X, fails (a 1X or 2X link whose ends both do 4X lost lanes); a 4X link whose hint " +
			"is 8X or 12X is not judged, since 12X ports are rare in practice and ibsim advertises 12X on every port.",
		Remedy: "Check the switch port's enabled speeds and widths (the SM's or switch's port configuration), reseat or " +
			"replace the cable (one rated for the speed); iblinkinfo --line -G <guid> shows the link again.",
		Run: runFabricLink})
	l.Register(&diagnose.Check{ID: "fabric.port_down", Title: "Fabric ports that were ACTIVE stay up", Reads: reads,
		Doc: "A swept port that was ACTIVE in an earlier sweep of the window and is DOWN in the latest fails, naming " +
			"the peer it had. A port down in every sweep held (never cabled) is not judged; rdma_fabric_port_state " +
			"keeps it visible.",
		Remedy: "Check the cable and transceiver at both ends and the peer (a host powered off, a rebooting switch); " +
			"iblinkinfo --line -G <guid>, ibportstate <lid> <port> query.",
		Run: runFabricPortDown})
	l.Register(&diagnose.Check{ID: "fabric.init", Title: "Fabric links configured by a subnet manager", Reads: reads,
		Doc: "A link of the swept switches in INIT (physical link up, no SM has configured it) or ARMED fails: no " +
			"working subnet manager sweeps that part of the fabric.",
		Remedy: "Run one subnet manager per fabric (switch-embedded, UFM or opensm) and check its log for the port; " +
			"sminfo shows the master.",
		Run: runFabricInit})
	l.Register(&diagnose.Check{ID: "fabric.guid", Title: "Fabric GUIDs are unique", Reads: reads,
		Doc: "In the scan the latest sweep used, a GUID printed on two lines with the same port number, or on ports " +
			"with different LIDs or node descriptions while not a switch, is a duplicated node or port GUID. The " +
			"fabric discovery merges nodes by GUID, so this sees only the duplicates that leak into the scan.",
		Remedy: "Find the two devices with the GUID (ibnetdiscover, the SM log's duplicate GUID messages) and give one " +
			"a unique GUID (firmware settings, or the VM/SR-IOV configuration that cloned it).",
		Run: runFabricGUID})
	l.Register(&diagnose.Check{ID: "fabric.congestion", Title: "Fabric uplink congestion (XmitWait)", Reads: reads,
		Doc: "Each swept port's PortXmitWait increase in the window against its link rate: the bytes it could not " +
			"send (XmitWait × 8, NVIDIA Quantum's tick; a lower bound on older switches) as a share of what the link " +
			"carries in that time. Above 10% warns, one finding listing the top ports with both ends. Ports whose PMA " +
			"does not report XmitWait are not judged. Each congested port is a root (it sent 60% of its rate or more " +
			"while waiting, PortXmitData: a saturated destination or uplink) or a victim of back-pressure (it sent less), " +
			"or unknown where its PortXmitData was not read over the window; the roots come first and name the hosts " +
			"routed through them (the blast radius, from the forwarding tables).",
		Remedy: "Spread the traffic (adaptive routing, a routing engine that balances uplinks), add uplinks to the " +
			"congested leaves, and look for one job saturating a destination (incast).",
		Run: runFabricCongestion})
	fabricRoutingCheck(l) // fabric_routing.go
}

// portText names a port: `"leaf1" port 1 (GUID 0x…, LID 2)`.
func portText(desc string, guid uint64, lid, port int) string {
	return fmt.Sprintf("%q port %d (GUID 0x%016x, LID %d)", desc, port, guid, lid)
}

func endText(e fabric.End) string { return portText(e.Desc, e.GUID, e.LID, e.Port) }

// cableText names both ends of the cable at p in topo, or says it has no
// peer in that scan.
func cableText(topo *fabric.Fabric, p *fabric.PortLine) (string, *fabric.End) {
	here := portText(p.Desc, p.GUID, p.LID, p.Port)
	if topo == nil {
		return here + " (no peer in the scan)", nil
	}
	l, peer := topo.LinkAt(p.GUID, p.Port)
	if l == nil {
		return here + " (no peer in the scan)", nil
	}
	return here + " <-> " + endText(peer), &peer
}

// readCommands are the commands that read both ends of a cable.
func readCommands(p *fabric.PortLine, peer *fabric.End) string {
	cmds := fmt.Sprintf("perfquery %d %d", p.LID, p.Port)
	if peer != nil {
		cmds += fmt.Sprintf(" and perfquery %d %d (the peer's side)", peer.LID, peer.Port)
	}
	return cmds + fmt.Sprintf("; iblinkinfo --line -G 0x%016x", p.GUID)
}

func runFabricErrors(s *diagnose.Reading, h *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	st := diagnose.FabricOf(s, h)
	if st.Last.Overrun {
		// The sweep running has overrun its interval: what the last one
		// read is no longer a reading of now, so nothing is judged.
		return []diagnose.Finding{{Severity: diagnose.Warn, Unknown: true, Target: "fabric",
			Observed: fmt.Sprintf("the counter sweep begun at %s has overrun its interval: its %d ports are unread (timeout) until it ends",
				st.Last.Start.UTC().Format(time.RFC3339), len(st.Last.Ports)),
			Evidence: "rdma_fabric_counter_sweep_in_progress_seconds and rdma_fabric_counter_sweep_skipped_total",
			Remedy: "a tool run of the sweep hangs or the fabric is too large for one interval: see " +
				"RdmaFabricCounterSweepOverrun in docs/runbook.md"}}, nil
	}
	var out []diagnose.Finding
	var unread []string // ports the latest sweep could not read: never clean
	clean, judged := 0, 0
	blast := newBlastIndex(s)
	for i := range st.Last.Ports {
		p := &st.Last.Ports[i]
		if p.Unknown {
			unread = append(unread, fmt.Sprintf("%s (%s)", diagnose.FabricTarget(p.GUID, p.Port), kit.OrText(kit.NonEmpty(string(p.Reason)), "unknown")))
			continue
		}
		if f, ok := fabricPortErrors(st, p, cfg); ok {
			judged++
			if f.Severity == diagnose.Pass {
				clean++
				continue
			}
			if f.Severity != diagnose.Skip {
				blast.addBlast(&f, st.Last.Topology, p.GUID, p.Port)
			}
			out = append(out, f)
		}
	}
	if judged == 0 {
		if len(st.Sweeps) < 2 {
			return kit.NoTargets(NeedTwoSweeps), nil
		}
		return kit.NoTargets("no swept port has readable error counters (every port unknown: see rdma_fabric_counter_sweep_failures_total)"), nil
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Severity.Worse(out[j].Severity) })
	if len(unread) > 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Warn, Unknown: true, Target: "fabric",
			Observed: fmt.Sprintf("%d swept ports unread by the latest sweep: their errors cannot be judged", len(unread)),
			Evidence: "perfquery failed for: " + strings.Join(firstN(unread, diagnose.FabricTopPorts), ", "),
			Remedy: "see why in rdma_fabric_counter_sweep_failures_total and the exporter log; run perfquery <lid> <port> " +
				"for one of them on this host (RdmaFabricCounterSweepFailing in docs/runbook.md)"})
	}
	if clean > 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Pass, Target: "fabric",
			Observed: fmt.Sprintf("%d of %d swept ports without rising error counters", clean, judged),
			Evidence: fmt.Sprintf("%d sweeps over the last %s", len(st.Sweeps), diagnose.Span(sweepSpan(st.Sweeps)))})
	}
	return out, nil
}

func sweepSpan(sweeps []*fabric.Sweep) time.Duration {
	if len(sweeps) < 2 {
		return 0
	}
	return sweeps[len(sweeps)-1].Start.Sub(sweeps[0].Start)
}

// fabricPortErrors judges one port's error counters; ok is false when it
// has none read or fewer than two sweeps read them.
func fabricPortErrors(st diagnose.FabricState, p *fabric.PortCounters, cfg *config.Config) (diagnose.Finding, bool) {
	sev := diagnose.Pass
	var observed, evidence, unknown, names, pinned, rose []string
	judged := 0
	for id := range fabric.NumCounters {
		c := fabric.Counters[id]
		v := p.Values[id]
		if !c.Error || !v.Present {
			continue
		}
		name := c.Spec.File
		if v.Saturated() && c.Spec.Pinnable() {
			// The host's rule (ctr.integrity): a 4-bit field pinned at
			// its maximum that did not rise to it within the window
			// cannot be judged; one that rose to it is judged below.
			if d, ok := diagnose.SweepIncrease(st.Sweeps, p.GUID, p.Port, id); !ok || d.Increase == 0 {
				pinned = append(pinned, fmt.Sprintf("%s reads %d, its maximum (%d-bit PortCounters field), and did not rise to it within the window: "+
					"it counts no more, and clearing it would refill it %d events later, so its increase cannot be judged", name, v.V, v.Bits, v.V))
				continue
			}
		} else if v.Saturated() {
			names = append(names, name)
			unknown = append(unknown, fmt.Sprintf("%s is saturated at %d (%d-bit PortCounters field): it has stopped counting, so new errors are invisible", name, v.V, v.Bits))
			observed = append(observed, name+" unknown (saturated)")
			continue
		}
		d, ok := diagnose.SweepIncrease(st.Sweeps, p.GUID, p.Port, id)
		if !ok {
			continue
		}
		names = append(names, name)
		judged++
		if js := kit.Judge(d.Increase, cfg.Diagnose.CounterLimit(name)); js.Worse(sev) {
			sev = js
		}
		if d.Increase > 0 || d.Resets > 0 {
			observed = append(observed, fmt.Sprintf("%s +%d", name, d.Increase))
			if d.Increase > 0 {
				rose = append(rose, fmt.Sprintf("%s +%d", name, d.Increase))
			}
			e := fmt.Sprintf("%s +%d in the last %s over %d sweeps (%d → %d)", name, d.Increase, diagnose.Span(d.Span), d.Sweeps, d.First, d.Last)
			if d.Resets > 0 {
				e += fmt.Sprintf(", reset %d time(s) in the window", d.Resets)
			}
			evidence = append(evidence, e)
		}
	}
	if judged == 0 && len(unknown) == 0 && len(pinned) == 0 {
		return diagnose.Finding{}, false
	}
	cable, peer := cableText(st.Last.Topology, &p.PortLine)
	if len(unknown) == 0 && sev == diagnose.Pass && len(pinned) > 0 {
		// Not clean either: what cannot be judged says so.
		return diagnose.Finding{Severity: diagnose.Skip, Target: diagnose.FabricTarget(p.GUID, p.Port), Observed: "cannot be judged (pinned) on " + cable,
			Evidence: strings.Join(pinned, "; ")}, true
	}
	f := diagnose.Finding{Target: diagnose.FabricTarget(p.GUID, p.Port), Expected: kit.ExpectedText(names, cfg)}
	if len(unknown) > 0 {
		f.Unknown = true
		if diagnose.Warn.Worse(sev) {
			sev = diagnose.Warn
		}
	}
	f.Severity = sev
	if sev == diagnose.Pass {
		return f, true
	}
	f.Observed = strings.Join(append(observed, "on "+cable), ", ")
	f.Evidence = strings.Join(append(append(unknown, evidence...), pinned...), "; ")
	var rs []string
	if len(evidence) > 0 && sev != diagnose.Pass {
		rs = append(rs, fmt.Sprintf("errors on the cable %s: reseat it at both ends, clean or replace the optic (either end), "+
			"replace the cable if the errors keep rising", cable))
	}
	if len(unknown) > 0 {
		rs = append(rs, fmt.Sprintf("clear the saturated counters so they count again: perfquery -R %d %d "+
			"(rdma_doctor judges increases; other tools reading absolute values lose them)", p.LID, p.Port))
	}
	rs = append(rs, "read both ends: "+readCommands(&p.PortLine, peer))
	f.Remedy = strings.Join(rs, "; ")
	if len(rose) > 0 && sev != diagnose.Pass {
		f.Seen = &[]diagnose.FaultSeen{diagnose.SeenAt(st.Last.Topology, &p.PortLine, diagnose.FaultCable, strings.Join(rose, ", "))}
	}
	return f, true
}

// sweptLinks calls fn for every link of the latest scan with an end in the
// latest sweep (this shard's switches), once per link.
func sweptLinks(sw *fabric.Sweep, fn func(l *fabric.Link)) {
	if sw.Topology == nil {
		return
	}
	for i := range sw.Topology.Links {
		l := &sw.Topology.Links[i]
		if sw.Find(l.A.GUID, l.A.Port) != nil || sw.Find(l.B.GUID, l.B.Port) != nil {
			fn(l)
		}
	}
}

func linkTarget(l *fabric.Link) string { return diagnose.FabricTarget(l.A.GUID, l.A.Port) }

func linkText(l *fabric.Link) string { return endText(l.A) + " <-> " + endText(l.B) }

func linkCommands(l *fabric.Link) string {
	return fmt.Sprintf("iblinkinfo --line -G 0x%016x; perfquery %d %d", l.A.GUID, l.A.LID, l.A.Port)
}

func runFabricLink(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	sw := s.SweepStatus().Last
	var out []diagnose.Finding
	judged, notJudged := 0, 0
	sweptLinks(sw, func(l *fabric.Link) {
		judged++
		var obs, exp []string
		active := fmt.Sprintf("%dX %s", l.Width, kit.OrText(kit.NonEmpty(l.Speed), l.SpeedText))
		if l.CouldBeSpeed != "" {
			obs = append(obs, fmt.Sprintf("speed %s (%s per lane)", kit.OrText(kit.NonEmpty(l.Speed), "unknown"), l.SpeedText))
			exp = append(exp, fmt.Sprintf("speed %s (%s per lane): both ends support it", kit.OrText(kit.NonEmpty(l.CouldBeSpeedName()), "faster"), l.CouldBeSpeed))
		}
		if l.NarrowerThanHint() {
			obs = append(obs, fmt.Sprintf("width %dX", l.Width))
			exp = append(exp, fmt.Sprintf("width %dX: both ends support %s", min(l.CouldBeLanes(), 4), l.CouldBeWidth))
		} else if l.UnjudgedHint() {
			notJudged++
		}
		if len(obs) == 0 {
			return
		}
		out = append(out, diagnose.Finding{Severity: diagnose.Fail, Target: linkTarget(l),
			Observed: "link at " + active + ": " + strings.Join(obs, ", "),
			Expected: strings.Join(exp, "; "),
			Evidence: fmt.Sprintf("iblinkinfo: %s runs %dX %s, \"Could be %s\"", linkText(l), l.Width, l.SpeedText,
				strings.TrimSpace(strings.Join([]string{l.CouldBeWidth, l.CouldBeSpeed}, " "))),
			Remedy: fmt.Sprintf("check the enabled speeds and widths of the switch port %s and of the peer %s; reseat or replace "+
				"the cable with one rated for the speed; then %s", endText(l.A), endText(l.B), linkCommands(l)),
		})
	})
	if judged == 0 {
		return kit.NoTargets("the swept switches have no links up"), nil
	}
	if pass := judged - len(out); pass > 0 {
		ev := "iblinkinfo prints no \"Could be\" hint for them"
		if notJudged > 0 {
			ev = fmt.Sprintf("%d of them 4X with a hint of 8X or 12X, not judged (12X ports are rare; ibsim advertises 12X on every port)", notJudged)
		}
		out = append(out, diagnose.Finding{Severity: diagnose.Pass, Target: "fabric",
			Observed: fmt.Sprintf("%d of %d links at what both ends support", pass, judged), Evidence: ev})
	}
	return out, nil
}

func runFabricPortDown(s *diagnose.Reading, h *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	st := diagnose.FabricOf(s, h)
	if len(st.Sweeps) < 2 {
		return kit.NoTargets("needs two fabric counter sweeps to see a port go down (one so far)"), nil
	}
	var out []diagnose.Finding
	up, down := 0, 0
	blast := newBlastIndex(s)
	for i := range st.Last.Ports {
		p := &st.Last.Ports[i]
		switch p.State {
		case infiniband.StateActive:
			up++
			continue
		case infiniband.StateDown:
		default:
			continue
		}
		// The latest sweep in which it was ACTIVE, and the peer it had.
		var was *fabric.Sweep
		for j := len(st.Sweeps) - 2; j >= 0; j-- {
			if q := st.Sweeps[j].Find(p.GUID, p.Port); q != nil && q.State == infiniband.StateActive {
				was = st.Sweeps[j]
				break
			}
		}
		if was == nil {
			down++
			continue
		}
		cable, peer := cableText(was.Topology, &p.PortLine)
		f := diagnose.Finding{Severity: diagnose.Fail, Target: diagnose.FabricTarget(p.GUID, p.Port),
			Observed: fmt.Sprintf("DOWN (physical state %s)", physStateText(p.PhysState)),
			Expected: "ACTIVE, as in the sweep of " + was.Start.UTC().Format(time.RFC3339),
			Evidence: fmt.Sprintf("%s was ACTIVE at %s and is DOWN at %s", cable,
				was.Start.UTC().Format(time.RFC3339), st.Last.Start.UTC().Format(time.RFC3339)),
			Remedy: fmt.Sprintf("the cable %s went down: check the cable and transceiver at both ends and the peer (powered off, "+
				"rebooting, its port disabled); iblinkinfo --line -G 0x%016x; ibportstate %d %d query", cable, p.GUID, p.LID, p.Port),
		}
		if peer != nil {
			f.Remedy += fmt.Sprintf("; ibportstate %d %d query (the peer)", peer.LID, peer.Port)
		}
		f.Seen = &[]diagnose.FaultSeen{diagnose.SeenAt(was.Topology, &p.PortLine, diagnose.FaultCable,
			"DOWN, ACTIVE in the sweep of "+was.Start.UTC().Format(time.RFC3339))}
		blast.addBlast(&f, was.Topology, p.GUID, p.Port)
		out = append(out, f)
	}
	if len(out) == 0 {
		return []diagnose.Finding{{Severity: diagnose.Pass, Target: "fabric",
			Observed: fmt.Sprintf("no ACTIVE port went down: %d ACTIVE, %d down in every sweep held (not cabled or long down)", up, down),
			Evidence: fmt.Sprintf("%d sweeps over the last %s", len(st.Sweeps), diagnose.Span(sweepSpan(st.Sweeps)))}}, nil
	}
	return out, nil
}

func physStateText(v int) string {
	if name := fabric.PhysStateName(v); name != "" {
		return fmt.Sprintf("%d: %s", v, name)
	}
	return fmt.Sprint(v)
}

func runFabricInit(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	judged := 0
	sw := s.SweepStatus().Last
	sweptLinks(sw, func(l *fabric.Link) {
		judged++
		if l.State == infiniband.StateActive {
			return
		}
		state := map[int]string{infiniband.StateInit: "INIT", infiniband.StateArmed: "ARMED"}[l.State]
		out = append(out, diagnose.Finding{Severity: diagnose.Fail, Target: linkTarget(l),
			Seen:     &[]diagnose.FaultSeen{diagnose.SeenOnLink(sw.Topology, l, diagnose.FaultSubnetManager, "link "+kit.OrText(kit.NonEmpty(state), fmt.Sprint(l.State)))},
			Observed: kit.OrText(kit.NonEmpty(state), fmt.Sprint(l.State)) + " with the physical link " + l.PhysState,
			Expected: "ACTIVE (configured by the subnet manager)",
			Evidence: "iblinkinfo: " + linkText(l),
			Remedy: "no subnet manager has configured this link: check that one runs and is master (sminfo), and its log " +
				"for the port; " + linkCommands(l),
		})
	})
	if judged == 0 {
		return kit.NoTargets("the swept switches have no links up"), nil
	}
	if len(out) == 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Pass, Target: "fabric", Observed: fmt.Sprintf("all %d links ACTIVE", judged)})
	}
	return out, nil
}

func runFabricGUID(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	topo := s.SweepStatus().Last.Topology
	if topo == nil || len(topo.PortLines) == 0 {
		return kit.NoTargets("the latest sweep has no topology scan"), nil
	}
	var out []diagnose.Finding
	lines := topo.PortLines // sorted by GUID and port
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j].GUID == lines[i].GUID {
			j++
		}
		if why := duplicateGUID(lines[i:j]); why != "" {
			g := lines[i]
			out = append(out, diagnose.Finding{Severity: diagnose.Fail, Target: fmt.Sprintf("0x%016x", g.GUID),
				Observed: why, Expected: "one node or port per GUID",
				Evidence: fmt.Sprintf("iblinkinfo printed GUID 0x%016x on %d port lines", g.GUID, j-i),
				Remedy: fmt.Sprintf("find the devices with GUID 0x%016x (ibnetdiscover, the SM log) and give one a unique GUID "+
					"(its firmware, or the VM/SR-IOV configuration that cloned it)", g.GUID)})
		}
		i = j
	}
	if len(out) == 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Pass, Target: "fabric",
			Observed: fmt.Sprintf("no duplicated GUID among %d port lines", len(lines))})
	}
	return out, nil
}

// duplicateGUID says why the port lines of one GUID are more than one
// node, or "".
func duplicateGUID(lines []fabric.PortLine) string {
	for k := 1; k < len(lines); k++ {
		a, b := &lines[k-1], &lines[k]
		switch {
		case a.Port == b.Port:
			return fmt.Sprintf("port %d printed twice, by %q and %q", a.Port, a.Desc, b.Desc)
		case a.LID != b.LID:
			// A switch's port lines all carry its port-0 LID; a CA port's
			// GUID is its own.
			return fmt.Sprintf("one GUID with LIDs %d (%q port %d) and %d (%q port %d)", a.LID, a.Desc, a.Port, b.LID, b.Desc, b.Port)
		case a.Desc != b.Desc:
			return fmt.Sprintf("one GUID named %q and %q", a.Desc, b.Desc)
		}
	}
	return ""
}

// fabricRootDataShare is the share of its link rate a congested port must
// carry to be a root of the congestion rather than a victim. A port that
// waits for credits while sending near its capacity is limited by its own
// link or what is behind it (a saturated destination or uplink: the root);
// one that waits while sending little is held back by back-pressure from
// congestion elsewhere (a victim). Near capacity is 60% of the signalling
// rate: 8b/10b links (SDR to QDR) carry at most 80% of it as data, and the
// waiting itself takes the rest.
const fabricRootDataShare = 0.6

// Congestion roles: a port's place in the congestion (see
// fabricRootDataShare), or unknown where its data counter was not read
// over the window (never guessed).
const (
	CongestionRoot    = "root"
	CongestionVictim  = "victim"
	CongestionUnknown = "unknown"
)

// congested is one port's XmitWait judgement.
type congested struct {
	p     *fabric.PortCounters
	share float64
	inc   uint64
	span  time.Duration
	rate  infiniband.Rate
	// data is the share of the rate it sent (PortXmitData), role what
	// that makes it.
	data float64
	role string
}

// congestionRole judges a congested port root or victim by what it sent
// over the sweeps (PortXmitData, in 4-octet words) against its rate.
func congestionRole(sweeps []*fabric.Sweep, p *fabric.PortCounters, rate infiniband.Rate) (float64, string) {
	if p.Values[fabric.DataTransmitted].Saturated() {
		return 0, CongestionUnknown // a 32-bit PortXmitData stops at its maximum within seconds at speed
	}
	d, ok := diagnose.SweepIncrease(sweeps, p.GUID, p.Port, fabric.DataTransmitted)
	if !ok || d.Span <= 0 || d.Resets > 0 {
		return 0, CongestionUnknown
	}
	share := float64(d.Increase) * fabric.Counters[fabric.DataTransmitted].Spec.Scale / (rate.BytesPerSecond() * d.Span.Seconds())
	if share >= fabricRootDataShare {
		return share, CongestionRoot
	}
	return share, CongestionVictim
}

func runFabricCongestion(s *diagnose.Reading, h *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	st := diagnose.FabricOf(s, h)
	if len(st.Sweeps) < 2 {
		return kit.NoTargets(NeedTwoSweeps), nil
	}
	topo := st.Last.Topology
	var hot []congested
	var saturated []string // XmitWait pinned at its maximum: not judged
	judged := 0
	for i := range st.Last.Ports {
		p := &st.Last.Ports[i]
		if p.Unknown || !p.Values[fabric.TransmitWait].Present || topo == nil {
			continue
		}
		l, _ := topo.LinkAt(p.GUID, p.Port)
		if l == nil {
			continue
		}
		rate, ok := l.Rate()
		if !ok {
			continue
		}
		if p.Values[fabric.TransmitWait].Saturated() {
			saturated = append(saturated, diagnose.FabricTarget(p.GUID, p.Port))
			continue
		}
		d, ok := diagnose.SweepIncrease(st.Sweeps, p.GUID, p.Port, fabric.TransmitWait)
		if !ok || d.Span <= 0 {
			continue
		}
		judged++
		share := float64(d.Increase) * fabricWaitTickBytes / (rate.BytesPerSecond() * d.Span.Seconds())
		if share > fabricCongestedShare {
			c := congested{p: p, share: share, inc: d.Increase, span: d.Span, rate: rate}
			c.data, c.role = congestionRole(st.Sweeps, p, rate)
			hot = append(hot, c)
		}
	}
	var satNote []diagnose.Finding
	if len(saturated) > 0 {
		satNote = []diagnose.Finding{{Severity: diagnose.Warn, Unknown: true, Target: "fabric",
			Observed: fmt.Sprintf("%d ports cannot be judged: PortXmitWait saturated", len(saturated)),
			Evidence: "PortXmitWait pinned at its 32-bit maximum has stopped counting (the PMA does not advertise the 64-bit " +
				"extended counters): " + strings.Join(firstN(saturated, diagnose.FabricTopPorts), ", "),
			Remedy: "clear them so they count again: perfquery -R <lid> <port> (rdma_doctor judges increases)"}}
	}
	if judged == 0 {
		if len(satNote) > 0 {
			return satNote, nil
		}
		return kit.NoTargets("no swept port reports PortXmitWait over two sweeps (the PMA's ClassPortInfo lacks it, or no link is up)"), nil
	}
	if len(hot) == 0 {
		return append([]diagnose.Finding{{Severity: diagnose.Pass, Target: "fabric",
			Observed: fmt.Sprintf("no port of %d lost more than %.0f%% of its rate waiting for credits", judged, fabricCongestedShare*100),
			Evidence: fmt.Sprintf("PortXmitWait over %d sweeps in the last %s", len(st.Sweeps), diagnose.Span(sweepSpan(st.Sweeps)))}}, satNote...), nil
	}
	// Roots first: they are where to act; then by the share lost.
	sort.Slice(hot, func(i, j int) bool {
		if (hot[i].role == CongestionRoot) != (hot[j].role == CongestionRoot) {
			return hot[i].role == CongestionRoot
		}
		return hot[i].share > hot[j].share
	})
	blast := newBlastIndex(s)
	f := diagnose.Finding{Severity: diagnose.Warn, Target: "fabric"}
	var ev []string
	var seen []diagnose.FaultSeen
	roles := map[string]int{}
	for i, c := range hot {
		roles[c.role]++
		if i >= diagnose.FabricTopPorts {
			continue
		}
		cable, _ := cableText(topo, &c.p.PortLine)
		what := fmt.Sprintf("XmitWait +%d in %s, about %.0f%% of %s lost", c.inc, diagnose.Span(c.span), c.share*100, kit.RateText(c.rate))
		switch c.role {
		case CongestionRoot:
			what = fmt.Sprintf("root of congestion (sent %.0f%% of its rate while waiting: a saturated destination or uplink): %s", c.data*100, what)
		case CongestionVictim:
			what = fmt.Sprintf("victim of back-pressure (sent only %.0f%% of its rate while waiting): %s", c.data*100, what)
		default:
			what = "root or victim unknown (PortXmitData not read over the window): " + what
		}
		ev = append(ev, cable+": "+what)
		sn := diagnose.SeenAt(topo, &c.p.PortLine, diagnose.FaultCongestion, what)
		sn.Role = c.role
		seen = append(seen, sn)
		if c.role == CongestionRoot {
			// The hosts routed through the root are the ones its
			// congestion hurts first.
			blast.addBlast(&f, topo, c.p.GUID, c.p.Port)
		}
	}
	if len(hot) > diagnose.FabricTopPorts {
		ev = append(ev, fmt.Sprintf("and %d more", len(hot)-diagnose.FabricTopPorts))
	}
	top := hot[0].p
	f.Seen = &seen
	f.Observed = fmt.Sprintf("%d of %d ports lost more than %.0f%% of their rate waiting for credits: %d roots, %d victims, %d unknown",
		len(hot), judged, fabricCongestedShare*100, roles[CongestionRoot], roles[CongestionVictim], roles[CongestionUnknown])
	f.Expected = fmt.Sprintf("at most %.0f%% (XmitWait × %d bytes against the link rate)", fabricCongestedShare*100, fabricWaitTickBytes)
	f.Evidence = strings.TrimSuffix(strings.Join(ev, "; ")+"; "+f.Evidence, "; ")
	f.Remedy = fmt.Sprintf("act on the roots first (ports sending near their rate while waiting: a saturated destination, incast, "+
		"or an uplink too few for its traffic); victims clear when their root does. Spread the traffic (adaptive routing, a routing "+
		"engine that balances uplinks), add uplinks; the top port: perfquery %d %d, iblinkinfo --line -G 0x%016x",
		top.LID, top.Port, top.GUID)
	return append([]diagnose.Finding{f}, satNote...), nil
}

// firstN keeps at most n items and says how many more there were.
func firstN(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(items[:n:n], fmt.Sprintf("and %d more", len(items)-n))
}
