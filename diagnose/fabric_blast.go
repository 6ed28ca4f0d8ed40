// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/fabric/routes"
)

// The blast radius of a switch port: whose traffic crosses its link, from
// the forwarding tables the route reader read (issue 38 item 2). It is
// what ibfindnodesusing <switch> <port> prints (infiniband-diags): the
// channel adapters the switch routes out of the port ("==>>"), and the
// ones the far end routes back over the link into it ("<<=="). Each list
// names at most blastHosts hosts and counts them all.

// blastHosts is how many hosts a blast radius names in each direction.
const blastHosts = fabricTopPorts

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

// blastIndex answers blast radii from one route read.
type blastIndex struct {
	r *routes.Tables
	// names are the channel adapters' node descriptions by LID, from
	// the scan the tables were read for.
	names map[int]string
}

// newBlastIndex returns nil where no forwarding tables were read.
func newBlastIndex(s *Reading) *blastIndex {
	st := s.routeStatus()
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
func (b *blastIndex) routedOut(guid uint64, port int) HostList {
	sw := b.r.Switches[guid]
	if sw == nil {
		return HostList{Unknown: true}
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

func hostList(names []string) HostList {
	slices.Sort(names)
	l := HostList{Count: len(names)}
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
func (b *blastIndex) at(topo *fabric.Fabric, guid uint64, port int) (BlastRadius, bool) {
	if b == nil {
		return BlastRadius{}, false
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
			return BlastRadius{}, false
		}
		// A host's port: its switch end is the link's port.
		hostEnd := fabric.End{GUID: guid, Port: port}
		here, port, peer = peer.GUID, peer.Port, &hostEnd
	}
	br := BlastRadius{Port: fabricTarget(here, port), RoutesRead: b.r.Start, Out: b.routedOut(here, port)}
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
	return b.r.Topology != nil && isSwitch(b.r.Topology, guid)
}

func (l HostList) text() string {
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

// text is the blast radius in a finding's words.
func (br BlastRadius) text() string {
	return fmt.Sprintf("traffic over the link (forwarding tables read at %s): out of %s to %s; into it, to %s",
		br.RoutesRead.UTC().Format(time.RFC3339), br.Port, br.Out.text(), br.In.text())
}

// addBlast adds the blast radius of the link at guid/port to f, in its
// field and its evidence.
func (b *blastIndex) addBlast(f *Finding, topo *fabric.Fabric, guid uint64, port int) {
	br, ok := b.at(topo, guid, port)
	if !ok {
		return
	}
	f.BlastRadius = append(f.BlastRadius, br)
	f.Evidence = strings.TrimPrefix(f.Evidence+"; "+br.text(), "; ")
}
