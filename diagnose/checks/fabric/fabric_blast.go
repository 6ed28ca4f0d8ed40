// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/routes"
)

// The blast radius of a switch port: whose traffic crosses its link, from
// the forwarding tables the route reader read. It is
// what ibfindnodesusing <switch> <port> prints (infiniband-diags): the
// channel adapters the switch routes out of the port ("==>>"), and the
// ones the far end routes back over the link into it ("<<=="). Each list
// names at most blastHosts hosts and counts them all.

// blastHosts is how many hosts a blast radius names in each direction.
const blastHosts = diagnose.FabricTopPorts

// blastIndex answers blast radii from one route read.
type blastIndex struct {
	r *routes.Tables
	// names are the channel adapters' node descriptions by LID, from
	// the scan the tables were read for.
	names map[int]string
}

// newBlastIndex returns nil where no forwarding tables were read.
func newBlastIndex(s *diagnose.Reading) *blastIndex {
	st := routeStatus(s)
	if st == nil || st.Last == nil || st.Last.Topology == nil {
		return nil
	}
	b := &blastIndex{r: st.Last, names: map[int]string{}}
	for i := range st.Last.Topology.PortLines {
		p := &st.Last.Topology.PortLines[i]
		if !p.Switch && p.LID > 0 && p.Desc != "" {
			b.names[p.LID] = p.Desc
		}
	}
	return b
}

// routedOut lists the channel adapters switch guid forwards out of port,
// once each (the LIDs of an LMC range are one port: its GUID).
func (b *blastIndex) routedOut(guid uint64, port int) diagnose.HostList {
	sw := b.r.Switches[guid]
	if sw == nil {
		return diagnose.HostList{Unknown: true}
	}
	seen := map[uint64]bool{}
	var names []string
	for _, e := range sw.Entries {
		if e.Kind != routes.KindCA || e.Port != port {
			continue
		}
		key := e.PortGUID
		if key == 0 {
			key = uint64(e.LID) << 48 // -n output: no GUID, one LID one port
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		name, ok := b.names[e.LID]
		if !ok {
			name = fmt.Sprintf("LID %d", e.LID)
		}
		names = append(names, name)
	}
	return hostList(names)
}

func hostList(names []string) diagnose.HostList {
	slices.Sort(names)
	l := diagnose.HostList{Count: len(names)}
	if len(names) > blastHosts {
		names = names[:blastHosts]
	}
	l.Hosts = names
	return l
}

// at is the blast radius of the link at guid/port in topo (the scan the
// finding judged: a port that went down has its peer only there). A
// channel adapter's port is judged from its switch end. ok is false where
// the port has no switch end.
func (b *blastIndex) at(topo *fabric.Fabric, guid uint64, port int) (diagnose.BlastRadius, bool) {
	if b == nil {
		return diagnose.BlastRadius{}, false
	}
	var peer *fabric.End
	for _, t := range []*fabric.Fabric{topo, b.r.Topology} {
		if t == nil {
			continue
		}
		if l, p := t.LinkAt(guid, port); l != nil {
			peer = &p
			break
		}
	}
	here, hereSwitch := guid, b.isSwitch(guid)
	if !hereSwitch {
		if peer == nil || !b.isSwitch(peer.GUID) {
			return diagnose.BlastRadius{}, false
		}
		// A host's port: its switch end is the link's port.
		hostEnd := fabric.End{GUID: guid, Port: port}
		here, port, peer = peer.GUID, peer.Port, &hostEnd
	}
	br := diagnose.BlastRadius{Port: diagnose.FabricTarget(here, port), RoutesRead: b.r.Start, Out: b.routedOut(here, port)}
	switch {
	case peer == nil:
		// No cable in the scan: nothing comes in.
	case b.isSwitch(peer.GUID):
		br.In = b.routedOut(peer.GUID, peer.Port)
	default:
		name := peer.Desc
		if name == "" {
			name = fmt.Sprintf("0x%016x", peer.GUID)
		}
		br.In = hostList([]string{name})
	}
	return br, true
}

// isSwitch reports whether the route read's scan prints guid as a switch.
func (b *blastIndex) isSwitch(guid uint64) bool {
	if b.r.Switches[guid] != nil {
		return true
	}
	return b.r.Topology != nil && diagnose.IsSwitch(b.r.Topology, guid)
}

// addBlast adds the blast radius of the link at guid/port to f, in its
// field and its evidence.
func (b *blastIndex) addBlast(f *diagnose.Finding, topo *fabric.Fabric, guid uint64, port int) {
	br, ok := b.at(topo, guid, port)
	if !ok {
		return
	}
	f.BlastRadius = append(f.BlastRadius, br)
	f.Evidence = strings.TrimPrefix(f.Evidence+"; "+br.Text(), "; ")
}
