// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/routes"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// routesHost is a Host that reads the switches' forwarding tables (the
// server's hostView); other Hosts read none.
type routesHost interface {
	FabricRoutes() *routes.Status
}

// routeStatus is the forwarding-table reader's state; nil where none runs.
func routeStatus(s *diagnose.Reading) *routes.Status {
	if rh, ok := s.Host.(routesHost); ok && s.Host != nil {
		return rh.FabricRoutes()
	}
	return nil
}

func fabricRoutingCheck(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{ID: "fabric.routing", Title: "Fabric routes use live ports, reach every host and spread over parallel uplinks",
		Reads: []diagnose.Source{diagnose.SourceFabric},
		Doc: "The switches' unicast forwarding tables (dump_fts, --collector.fabric.routes) against the scan they were " +
			"read for. A switch port that channel-adapter LIDs are routed out of while it is DOWN, physically not up " +
			"(disabled with ibportstate: ibsim keeps such a port ACTIVE) or absent from the scan fails; an ACTIVE channel adapter of the scan that a switch's table holds no route to fails; ports of one switch " +
			"whose peers are interchangeable (switches with the same directly attached hosts: a leaf's uplinks, parallel " +
			"cables to one switch) and whose channel-adapter routes differ by more than one warn (check_lft_balance's " +
			"test). Switches whose table could not be read warn as unknown (never clean).",
		Remedy: "Check the subnet manager's log and routing engine (a heavy sweep reroutes), the port (ibportstate <lid> " +
			"<port> query) and compare with dump_fts / check_lft_balance -l <dump> -i <ibnetdiscover cache>.",
		Run: runFabricRouting})
}

func runFabricRouting(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	st := routeStatus(s)
	if st == nil {
		return kit.NoTargets("no forwarding-table read runs (--collector.fabric.routes, on the server with the fabric collector)"), nil
	}
	r := st.Last
	if r == nil || r.Topology == nil {
		return kit.NoTargets("waits for the first forwarding-table read"), nil
	}
	topo := r.Topology
	var out []diagnose.Finding
	if len(r.Unknown) > 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Warn, Target: "fabric",
			Observed: fmt.Sprintf("the forwarding tables of %d of %d switches could not be read: their routes are unknown", len(r.Unknown), len(r.Unknown)+len(r.Switches)),
			Expected: "every switch's table read",
			Evidence: fmt.Sprintf("%v (first unread: 0x%016x)", r.Err, r.Unknown[0]),
			Remedy:   "run dump_fts by hand from this host and see what it reports"})
	}
	ports := map[fabric.PortKey]*fabric.PortLine{}
	caByLID := map[int]*fabric.PortLine{}
	for i := range topo.PortLines {
		p := &topo.PortLines[i]
		ports[fabric.PortKey{GUID: p.GUID, Port: p.Port}] = p
		if !p.Switch && p.LID > 0 && p.State == infiniband.StateActive && !p.Stale {
			caByLID[p.LID] = p
		}
	}
	peers := map[fabric.PortKey]fabric.End{}
	for i := range topo.Links {
		l := &topo.Links[i]
		peers[fabric.PortKey{GUID: l.A.GUID, Port: l.A.Port}] = l.B
		peers[fabric.PortKey{GUID: l.B.GUID, Port: l.B.Port}] = l.A
	}
	hostsOf := directHosts(topo, ports, peers)

	guids := make([]uint64, 0, len(r.Switches))
	for g := range r.Switches {
		guids = append(guids, g)
	}
	slices.Sort(guids)
	judged := 0
	for _, g := range guids {
		sw := r.Switches[g]
		judged++
		name := switchName(topo, g)
		routed := map[int]bool{}
		bad := map[int][]string{} // port -> destinations routed out of it while it is down or absent
		for _, e := range sw.Entries {
			ca := caByLID[e.LID]
			if e.Kind != routes.KindCA && ca == nil {
				continue
			}
			routed[e.LID] = true
			if e.Port == 0 {
				continue
			}
			if p := ports[fabric.PortKey{GUID: g, Port: e.Port}]; !forwards(p) {
				bad[e.Port] = append(bad[e.Port], lidText(e.LID, ca))
			}
		}
		for _, port := range sortedKeys(bad) {
			p := ports[fabric.PortKey{GUID: g, Port: port}]
			state := "absent from the scan"
			switch {
			case p == nil:
			case p.State == infiniband.StateDown:
				state = "DOWN (physical state " + physStateText(p.PhysState) + ")"
			case p.State != infiniband.StateActive:
				state = fmt.Sprintf("not ACTIVE (state %d)", p.State)
			default:
				state = "ACTIVE with its physical link not up (physical state " + physStateText(p.PhysState) + "), as after ibportstate disable"
			}
			dests := bad[port]
			out = append(out, diagnose.Finding{Severity: diagnose.Fail, Target: diagnose.FabricTarget(g, port),
				Observed: fmt.Sprintf("%s routes %d channel-adapter LIDs out of port %d, which is %s", name, len(dests), port, state),
				Expected: "routes only out of ACTIVE ports",
				Evidence: "routed there: " + strings.Join(firstN(dests, diagnose.FabricTopPorts), ", "),
				Remedy: fmt.Sprintf("traffic to these hosts through %s is dropped: check the subnet manager swept after the port went down "+
					"(its log, sminfo), or bring the port back; ibroute -G 0x%016x; ibportstate <lid> %d query", name, g, port),
			})
		}
		var missing []string
		for _, lid := range sortedKeys(caByLID) {
			if !routed[lid] {
				missing = append(missing, lidText(lid, caByLID[lid]))
			}
		}
		if len(missing) > 0 {
			out = append(out, diagnose.Finding{Severity: diagnose.Fail, Target: diagnose.FabricTarget(g, 0),
				Observed: fmt.Sprintf("%s has no route to %d ACTIVE channel adapters of the scan", name, len(missing)),
				Expected: "a route to every ACTIVE channel adapter",
				Evidence: "unreachable: " + strings.Join(firstN(missing, diagnose.FabricTopPorts), ", "),
				Remedy:   fmt.Sprintf("the subnet manager left these LIDs out of the table (unreachable in its view, or it has not swept since): its log; ibroute -G 0x%016x", g),
			})
		}
		out = append(out, unbalanced(g, name, sw, ports, peers, hostsOf)...)
	}
	if judged == 0 && len(out) == 0 {
		return kit.NoTargets("no switch of this shard in the latest forwarding-table read"), nil
	}
	if len(out) == 0 {
		out = append(out, diagnose.Finding{Severity: diagnose.Pass, Target: "fabric",
			Observed: fmt.Sprintf("%d switches route every ACTIVE channel adapter out of ACTIVE ports, balanced over parallel uplinks", judged)})
	}
	return out, nil
}

// forwards reports whether the switch port p can carry the traffic routed
// out of it: ACTIVE, and its physical link up where the scan says (a port
// disabled with ibportstate may keep its logical state ACTIVE, as ibsim's
// does: "Active/Disabled").
func forwards(p *fabric.PortLine) bool {
	return p != nil && p.State == infiniband.StateActive && (p.PhysState == 0 || p.PhysState == infiniband.PhysStateLinkUp)
}

// directHosts returns, for each switch, a hash of the channel adapters
// cabled to it: two ports whose peers have the same hash are
// interchangeable for routing (a leaf's uplinks to spines, parallel cables).
func directHosts(topo *fabric.Fabric, ports map[fabric.PortKey]*fabric.PortLine, peers map[fabric.PortKey]fabric.End) map[uint64]uint64 {
	cas := map[uint64][]uint64{}
	for i := range topo.PortLines {
		p := &topo.PortLines[i]
		if !p.Switch || p.Port == 0 {
			continue
		}
		peer, ok := peers[fabric.PortKey{GUID: p.GUID, Port: p.Port}]
		if !ok {
			continue
		}
		if q := ports[fabric.PortKey{GUID: peer.GUID, Port: peer.Port}]; q != nil && !q.Switch {
			cas[p.GUID] = append(cas[p.GUID], peer.GUID)
		}
	}
	out := map[uint64]uint64{}
	for i := range topo.PortLines {
		p := &topo.PortLines[i]
		if !p.Switch {
			continue
		}
		if _, ok := out[p.GUID]; ok {
			continue
		}
		list := cas[p.GUID]
		slices.Sort(list)
		h := fnv.New64a()
		for _, g := range list {
			fmt.Fprintf(h, "%x,", g)
		}
		out[p.GUID] = h.Sum64()
	}
	return out
}

// unbalanced returns a warning for each group of interchangeable ACTIVE
// switch-facing ports of one switch whose channel-adapter routes differ
// by more than one (check_lft_balance: max > min + 1).
func unbalanced(g uint64, name string, sw *routes.SwitchLFT, ports map[fabric.PortKey]*fabric.PortLine, peers map[fabric.PortKey]fabric.End, hostsOf map[uint64]uint64) []diagnose.Finding {
	counts := sw.CARoutes()
	groups := map[uint64][]int{}
	for k, p := range ports {
		if k.GUID != g || k.Port == 0 || p.State != infiniband.StateActive {
			continue
		}
		peer, ok := peers[k]
		if !ok {
			continue
		}
		q := ports[fabric.PortKey{GUID: peer.GUID, Port: peer.Port}]
		if q == nil || !q.Switch {
			continue
		}
		groups[hostsOf[peer.GUID]] = append(groups[hostsOf[peer.GUID]], k.Port)
	}
	var out []diagnose.Finding
	for _, key := range sortedKeys(groups) {
		grp := groups[key]
		if len(grp) < 2 {
			continue
		}
		slices.Sort(grp)
		lo, hi := counts[grp[0]], counts[grp[0]]
		var parts []string
		for _, port := range grp {
			lo, hi = min(lo, counts[port]), max(hi, counts[port])
			parts = append(parts, fmt.Sprintf("port %d: %d", port, counts[port]))
		}
		if hi <= lo+1 {
			continue
		}
		out = append(out, diagnose.Finding{Severity: diagnose.Warn, Target: diagnose.FabricTarget(g, grp[0]),
			Observed: fmt.Sprintf("%s's parallel uplinks carry %d to %d channel-adapter routes each", name, lo, hi),
			Expected: "routes per parallel uplink within one of each other (check_lft_balance)",
			Evidence: strings.Join(parts, ", "),
			Remedy: fmt.Sprintf("the busiest uplink carries more hosts' traffic than the others: check the routing engine (ftree, updn, "+
				"minhop with LMC) and that every uplink was ACTIVE at the SM's last sweep; dump_fts; ibroute -G 0x%016x", g),
		})
	}
	return out
}

func switchName(topo *fabric.Fabric, g uint64) string {
	for i := range topo.PortLines {
		if p := &topo.PortLines[i]; p.GUID == g && p.Desc != "" {
			return fmt.Sprintf("%q (0x%016x)", p.Desc, g)
		}
	}
	return fmt.Sprintf("switch 0x%016x", g)
}

func lidText(lid int, ca *fabric.PortLine) string {
	if ca == nil {
		return fmt.Sprintf("LID %d", lid)
	}
	return fmt.Sprintf("%q LID %d", ca.Desc, lid)
}

func sortedKeys[K uint64 | int, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
