// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// An expected topology file is in the format ibnetdiscover prints and ibsim
// reads (infiniband-diags ibnetdiscover.c out_switch/out_ca and their port
// lines):
//
//	switchguid=0x200001(200001)
//	Switch	36 "S-0000000000200001"		# "leaf1" base port 0 lid 2 lmc 0
//	[1]	"H-0000000000100000"[1](100001) 		# "node01 mlx5_0" lid 4 4xEDR
//	Ca	1 "H-0000000000100000"		# "node01 mlx5_0"
//	[1](100001) 	"S-0000000000200001"[1]		# lid 4 lmc 0 "leaf1" lid 2 4xEDR
//
// Each link is printed from both ends and kept once. An end is named by the
// GUID iblinkinfo prints for that port (the switch's port 0 GUID, the
// parenthesised part of switchguid=; a channel adapter's port GUID, the
// parenthesised number after its port) where the file prints it, and by its
// node description (the comment's quoted text) where it does not: ibsim's
// hand-written files ("S-leaf1") carry no GUIDs.

// MaxTopologyBytes bounds an expected topology file. ibnetdiscover prints
// about 60 bytes per switch port line and 250 per channel adapter (the
// recorded fixtures/tools/ibnetdiscover-ibsim.txt), so a 10,000-host fabric
// is a few MB; past this a file is not a topology of a real fabric.
const MaxTopologyBytes = 32 << 20

// TopoEnd is one end of an expected link. GUID is 0 when the file does not
// print the port's GUID; the end is then matched by Desc.
type TopoEnd struct {
	GUID uint64
	Desc string
	Port int
}

// key is what the end is matched by: the GUID, else the description.
func (e TopoEnd) key() TopoEnd {
	if e.GUID != 0 {
		return TopoEnd{GUID: e.GUID, Port: e.Port}
	}
	return TopoEnd{Desc: e.Desc, Port: e.Port}
}

func (e TopoEnd) less(o TopoEnd) bool {
	if e.GUID != o.GUID {
		return e.GUID < o.GUID
	}
	if e.Desc != o.Desc {
		return e.Desc < o.Desc
	}
	return e.Port < o.Port
}

// TopoLink is one expected link; A is the switch end when one end is a
// switch.
type TopoLink struct{ A, B TopoEnd }

// Topology is a parsed expected topology file.
type Topology struct {
	// Links are the expected links, each once, sorted by A.
	Links []TopoLink
	// Nodes is the number of node sections (Switch, Ca, Rt lines).
	Nodes int
	index map[[2]TopoEnd]int
}

func pairKey(a, b TopoEnd) [2]TopoEnd {
	a, b = a.key(), b.key()
	if b.less(a) {
		a, b = b, a
	}
	return [2]TopoEnd{a, b}
}

// Find returns the index in Links of the expected link between the
// scanned ends a and b, or -1. Each end matches by GUID and port, or by
// description and port where the file names it by description.
func (t *Topology) Find(a, b End) int {
	for _, x := range [2]TopoEnd{{GUID: a.GUID, Port: a.Port}, {Desc: a.Desc, Port: a.Port}} {
		for _, y := range [2]TopoEnd{{GUID: b.GUID, Port: b.Port}, {Desc: b.Desc, Port: b.Port}} {
			if i, ok := t.index[pairKey(x, y)]; ok {
				return i
			}
		}
	}
	return -1
}

type topoNode struct {
	desc     string
	isSwitch bool
	// switchGUID is a switch's port 0 GUID (switchguid=); portGUID are a
	// CA's or router's port GUIDs, from its own lines and its peers'.
	switchGUID uint64
	portGUID   map[int]uint64
}

type rawEnd struct {
	id   string
	port int
}

type topoParser struct {
	nodes   map[string]*topoNode
	order   []string
	cur     *topoNode
	curID   string
	pending uint64 // switchguid= of the next Switch line
	links   map[[2]rawEnd]struct{}
	peerOf  map[rawEnd]rawEnd
	raw     [][2]rawEnd
	nodeCnt int
}

// ParseTopology reads an expected topology file of at most
// MaxTopologyBytes. It is strict: a line not in ibnetdiscover's format, a
// port cabled to two peers or a file without links is an error naming the
// line, since a misread expectation would report the whole fabric missing.
func ParseTopology(r io.Reader) (*Topology, error) {
	p := &topoParser{nodes: map[string]*topoNode{}, links: map[[2]rawEnd]struct{}{}, peerOf: map[rawEnd]rawEnd{}}
	lr := &io.LimitedReader{R: r, N: MaxTopologyBytes + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		if err := p.line(sc.Bytes()); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("over the %d-byte (%d MiB) limit", MaxTopologyBytes, MaxTopologyBytes>>20)
	}
	if len(p.raw) == 0 {
		return nil, errors.New("no links: not ibnetdiscover's output (Switch/Ca node lines followed by [port] \"peer\"[port] lines)")
	}
	return p.finish(), nil
}

func (p *topoParser) node(id string) *topoNode {
	nd := p.nodes[id]
	if nd == nil {
		nd = &topoNode{portGUID: map[int]uint64{}}
		p.nodes[id] = nd
		p.order = append(p.order, id)
	}
	return nd
}

func (p *topoParser) line(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] == '#' {
		return nil
	}
	for _, kind := range []string{"Switch", "Ca", "Rt"} {
		if rest, ok := bytes.CutPrefix(b, []byte(kind)); ok && len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
			return p.header(kind == "Switch", rest)
		}
	}
	if b[0] == '[' {
		return p.port(b)
	}
	if k, v, ok := bytes.Cut(b, []byte("=")); ok && bytes.IndexByte(k, ' ') < 0 {
		if string(k) == "switchguid" {
			// switchguid=0x<node GUID>(<port GUID>): iblinkinfo prints
			// the port GUID.
			g, ok := parenHex(v)
			if !ok {
				return fmt.Errorf("switchguid %q: want 0x<hex>(<hex>)", clip(v))
			}
			p.pending = g
		}
		return nil // vendid=, devid=, sysimgguid=, caguid=, rtguid=
	}
	return fmt.Errorf("not in ibnetdiscover's format: %q", clip(b))
}

// parenHex returns the parenthesised hex number of 0x…(…), or the number
// itself without parentheses.
func parenHex(v []byte) (uint64, bool) {
	if i := bytes.IndexByte(v, '('); i >= 0 && bytes.HasSuffix(v, []byte(")")) {
		v = v[i+1 : len(v)-1]
	}
	g, err := strconv.ParseUint(string(bytes.TrimPrefix(v, []byte("0x"))), 16, 64)
	return g, err == nil && g != 0
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// header parses `<nports> "<id>"	# "<desc>" ...`.
func (p *topoParser) header(isSwitch bool, rest []byte) error {
	rest = bytes.TrimSpace(rest)
	sp := bytes.IndexAny(rest, " \t")
	if sp < 0 {
		return fmt.Errorf("node line without an id: %q", clip(rest))
	}
	if _, err := strconv.Atoi(string(rest[:sp])); err != nil {
		return fmt.Errorf("node line: port count %q is not a number", clip(rest[:sp]))
	}
	id, tail, ok := quoted(bytes.TrimSpace(rest[sp:]))
	if !ok {
		return fmt.Errorf("node line: want a quoted id such as \"S-0008f10400411b52\": %q", clip(rest))
	}
	nd := p.node(id)
	nd.isSwitch = isSwitch
	if isSwitch {
		nd.switchGUID, p.pending = p.pending, 0
	}
	if d, ok := commentDesc(tail); ok {
		nd.desc = d // the node's own description wins over its peers'
	}
	p.cur, p.curID = nd, id
	p.nodeCnt++
	return nil
}

// quoted splits `"x" rest` into x and rest.
func quoted(b []byte) (string, []byte, bool) {
	if len(b) < 2 || b[0] != '"' {
		return "", nil, false
	}
	end := bytes.IndexByte(b[1:], '"')
	if end <= 0 {
		return "", nil, false
	}
	return string(b[1 : end+1]), b[end+2:], true
}

// commentDesc is the description in a line's comment: from its first
// quote to its last (a description may itself hold quotes).
func commentDesc(b []byte) (string, bool) {
	h := bytes.IndexByte(b, '#')
	if h < 0 {
		return "", false
	}
	c := b[h+1:]
	i, j := bytes.IndexByte(c, '"'), bytes.LastIndexByte(c, '"')
	if i < 0 || j <= i {
		return "", false
	}
	return string(bytes.TrimSpace(c[i+1 : j])), true
}

// portNum parses `[n]` and an optional `[ext n]` and `(hex)` after it.
func portNum(b []byte) (port int, guid uint64, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '[' {
		return 0, 0, nil, false
	}
	end := bytes.IndexByte(b, ']')
	if end < 0 {
		return 0, 0, nil, false
	}
	port, err := strconv.Atoi(string(b[1:end]))
	if err != nil || port < 0 || port > 255 {
		return 0, 0, nil, false
	}
	b = b[end+1:]
	if bytes.HasPrefix(b, []byte("[ext ")) {
		e := bytes.IndexByte(b, ']')
		if e < 0 {
			return 0, 0, nil, false
		}
		b = b[e+1:]
	}
	if len(b) > 0 && b[0] == '(' {
		e := bytes.IndexByte(b, ')')
		if e < 0 {
			return 0, 0, nil, false
		}
		g, err := strconv.ParseUint(string(b[1:e]), 16, 64)
		if err != nil {
			return 0, 0, nil, false
		}
		guid, b = g, b[e+1:]
	}
	return port, guid, b, true
}

// port parses `[n](guid)	"<peer id>"[m](guid)	# ... "<peer desc>" ...`.
func (p *topoParser) port(b []byte) error {
	if p.cur == nil {
		return errors.New("port line before any Switch or Ca line")
	}
	bad := fmt.Errorf("port line: want [port] \"peer\"[port]: %q", clip(b))
	port, guid, rest, ok := portNum(b)
	if !ok || port == 0 {
		return bad
	}
	if guid != 0 {
		p.cur.portGUID[port] = guid
	}
	peerID, rest, ok := quoted(bytes.TrimSpace(rest))
	if !ok {
		return bad
	}
	peerPort, peerGUID, rest, ok := portNum(rest)
	if !ok || peerPort == 0 {
		return bad
	}
	peer := p.node(peerID)
	if peerGUID != 0 {
		peer.portGUID[peerPort] = peerGUID
	}
	if d, ok := commentDesc(rest); ok && peer.desc == "" {
		peer.desc = d
	}
	a, z := rawEnd{p.curID, port}, rawEnd{peerID, peerPort}
	if a == z {
		return fmt.Errorf("port line: %s[%d] cabled to itself", peerID, peerPort)
	}
	for _, e := range [][2]rawEnd{{a, z}, {z, a}} {
		if other, seen := p.peerOf[e[0]]; seen && other != e[1] {
			return fmt.Errorf("%q[%d] is cabled to both %q[%d] and %q[%d]", e[0].id, e[0].port, other.id, other.port, e[1].id, e[1].port)
		}
		p.peerOf[e[0]] = e[1]
	}
	k := [2]rawEnd{a, z}
	if z.id < a.id || z.id == a.id && z.port < a.port {
		k = [2]rawEnd{z, a}
	}
	if _, seen := p.links[k]; !seen {
		p.links[k] = struct{}{}
		p.raw = append(p.raw, k)
	}
	return nil
}

func (p *topoParser) end(e rawEnd) (TopoEnd, bool) {
	nd := p.nodes[e.id]
	out := TopoEnd{Desc: nd.desc, Port: e.port}
	if nd.isSwitch {
		out.GUID = nd.switchGUID
	} else {
		out.GUID = nd.portGUID[e.port]
	}
	return out, nd.isSwitch
}

func (p *topoParser) finish() *Topology {
	t := &Topology{Nodes: p.nodeCnt, index: make(map[[2]TopoEnd]int, len(p.raw))}
	for id, nd := range p.nodes {
		if nd.desc == "" {
			nd.desc = id // no comment: ibsim names the node by its id
		}
		// The scan's descriptions are label values (Parse); an end
		// matched by description matches only under the same policy, and
		// the findings print it.
		nd.desc = names.Label(nd.desc)
	}
	for _, r := range p.raw {
		a, aSw := p.end(r[0])
		b, bSw := p.end(r[1])
		if bSw && !aSw || aSw == bSw && b.less(a) {
			a, b = b, a
		}
		t.Links = append(t.Links, TopoLink{A: a, B: b})
	}
	sort.Slice(t.Links, func(i, j int) bool {
		x, y := t.Links[i], t.Links[j]
		if x.A != y.A {
			return x.A.less(y.A)
		}
		return x.B.less(y.B)
	})
	for i, l := range t.Links {
		t.index[pairKey(l.A, l.B)] = i
	}
	return t
}
