// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package fabric reads the whole InfiniBand fabric's links from
// `iblinkinfo --line` (infiniband-diags): both ends of every link, its
// active width and speed, its state, and the "Could be" hint iblinkinfo
// prints when a link runs below what both ends support. The parser reads
// its input once, line by line, and keeps one record per link, so memory
// grows with the number of links, not with the size of the output.
package fabric

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// End is one end of a link.
type End struct {
	// GUID is the port GUID iblinkinfo prints; a switch's ports all show
	// the switch's port 0 GUID.
	GUID uint64
	// Desc is the node description, trimmed and made a label value
	// (names.Label: valid UTF-8, at most names.MaxLabelBytes).
	Desc string
	LID  int
	Port int
}

// GUIDString formats the GUID as ibstat does ("0x%016x").
func (e End) GUIDString() string { return fmt.Sprintf("0x%016x", e.GUID) }

// Link is one cabled link, seen from one end (A) to the other (B). A is the
// switch end when one end is a switch.
type Link struct {
	A, B End
	// Width is the active width in lanes (1, 2, 4, 8, 12).
	Width int
	// Speed is the per-lane speed name (SDR ... XDR, FDR10), "" if
	// iblinkinfo printed a speed this parser does not know.
	Speed string
	// SpeedText is the speed as printed ("53.125 Gbps").
	SpeedText string
	// State is the logical state as sysfs numbers it: 2 INIT, 3 ARMED,
	// 4 ACTIVE.
	State int
	// PhysState is the physical state name as printed ("LinkUp").
	PhysState string
	// CouldBeWidth and CouldBeSpeed are iblinkinfo's hints ("4X",
	// "53.125 Gbps"): both ends support more than the link runs at.
	CouldBeWidth, CouldBeSpeed string
}

// Degraded reports whether iblinkinfo says the link could run faster or
// wider, as NarrowerThanHint judges width.
func (l *Link) Degraded() bool { return l.CouldBeSpeed != "" || l.NarrowerThanHint() }

// NarrowerThanHint reports whether the link trained narrower than its
// "Could be" width hint says both ends support, counting at most 4X: a 4X
// link whose only hint is 8X or 12X is not degraded, since 8X and 12X
// ports are rare in practice and ibsim advertises 12X on every port. The
// diagnose check fabric.link, rdma_fabric_link_degraded and the
// RdmaFabricLinksDegraded alert all read this one rule.
func (l *Link) NarrowerThanHint() bool {
	return l.CouldBeLanes() > l.Width && l.Width < min(l.CouldBeLanes(), 4)
}

// UnjudgedHint reports whether the link has a "Could be" hint that
// NarrowerThanHint does not judge (a 4X link, a hint of 8X or 12X) and no
// speed hint.
func (l *Link) UnjudgedHint() bool {
	return l.CouldBeSpeed == "" && l.CouldBeLanes() > l.Width && !l.NarrowerThanHint()
}

// Rate is the link's active data rate as the kernel's rate file counts it
// (4X HDR is 200 Gb/s); ok is false when the speed is unknown.
func (l *Link) Rate() (infiniband.Rate, bool) {
	g, ok := infiniband.LaneGbps(l.Speed)
	if !ok {
		return infiniband.Rate{}, false
	}
	return infiniband.Rate{Gbps: g * float64(l.Width), Width: l.Width, Speed: l.Speed}, true
}

// Fabric is one parsed iblinkinfo run.
type Fabric struct {
	// Links are sorted by A's GUID and port.
	Links []Link
	// Switches is the number of switches: GUIDs that iblinkinfo prints on
	// more than one port line (a switch's ports share its port 0 GUID).
	Switches int
	// CAs is the number of channel adapters, counted by the GUID iblinkinfo
	// prints: descriptions are not unique (SHARP aggregation nodes, hosts
	// without rdma-ndd share one). Each mlx5 port is a CA of its own; the
	// two ports of a ConnectX-3 count twice.
	CAs int
	// CAPorts is the number of non-switch ports seen.
	CAPorts int
	// Ports is the number of port lines; DownPorts of them were Down.
	Ports, DownPorts int
	// PortLines has every port line, down ones included, sorted by GUID
	// and port: the ports a counter sweep queries and whose state is
	// exported per port.
	PortLines []PortLine
	// Malformed counts lines that were skipped because they were not in
	// iblinkinfo's format; MalformedLines lists the first few line numbers.
	Malformed      int
	MalformedLines []int
}

// Degraded returns the number of links iblinkinfo hints could run faster.
func (f *Fabric) Degraded() int {
	n := 0
	for i := range f.Links {
		if f.Links[i].Degraded() {
			n++
		}
	}
	return n
}

// ErrNotLineMode means the input is iblinkinfo's default (per node) output,
// which has no remote GUIDs; rdma_doctor runs iblinkinfo --line.
var ErrNotLineMode = errors.New("iblinkinfo output is not in --line mode (node header lines seen)")

// maxLine bounds one line; iblinkinfo's longest is two 64-byte node
// descriptions plus about 200 bytes.
const maxLine = 64 << 10

type endKey struct {
	guid uint64
	port int
}

type nodeSeen struct {
	lines int
	desc  string
}

// Parse reads iblinkinfo --line output. Lines that are not in its format
// are skipped and counted; an input that is not line mode at all is
// ErrNotLineMode. Each link is printed once from each end; it is kept once.
func Parse(r io.Reader) (*Fabric, error) {
	p := newParser()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		if err := p.line(n, sc.Bytes()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading iblinkinfo output at line %d: %w", n+1, err)
	}
	return p.finish(), nil
}

type parser struct {
	f Fabric
	// links indexes f.Links by the link's two ends, lower end first.
	links map[[2]endKey]int32
	nodes map[uint64]*nodeSeen
	// strs interns the short fields (physical state, speed, hints).
	strs map[string]string
	// descs interns node descriptions, by the text as printed, as label
	// values: a switch's name repeats on every one of its lines and on
	// every peer's line, and is bounded (and a cut counted) once.
	descs map[string]string
}

func newParser() *parser {
	return &parser{
		links: map[[2]endKey]int32{},
		nodes: map[uint64]*nodeSeen{},
		strs:  map[string]string{},
		descs: map[string]string{},
	}
}

func (p *parser) intern(b []byte) string {
	if s, ok := p.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	p.strs[s] = s
	return s
}

// desc is a node description as every consumer gets it: a label value
// under the one label policy (names.Label). The description is free text
// set on the node (by whoever administers it, or a node name map) and
// becomes a label of every series of its node and links and the text of
// the fabric findings; an SMP carries 64 bytes, but iblinkinfo prints
// what the SM or the map hands it, so a longer or non-UTF-8 one is cut
// or repaired here, never left to the exposition (which refuses a
// non-UTF-8 value and with it every series of the switch). Each distinct
// description cut is counted once per scan.
func (p *parser) desc(b []byte) string {
	if s, ok := p.descs[string(b)]; ok {
		return s
	}
	raw := string(b)
	s := names.Label(raw) // raw itself when within the policy: one copy
	p.descs[raw] = s
	return s
}

func (p *parser) malformed(n int) {
	p.f.Malformed++
	if len(p.f.MalformedLines) < 10 {
		p.f.MalformedLines = append(p.f.MalformedLines, n)
	}
}

var (
	sepOpen  = []byte("==(")
	sepClose = []byte(")==>")
)

func (p *parser) line(n int, b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil
	}
	if bytes.HasPrefix(b, []byte("CA: ")) || bytes.HasPrefix(b, []byte("Switch: ")) || bytes.HasPrefix(b, []byte("Router: ")) {
		return ErrNotLineMode
	}
	l, down, ok := p.parseLine(b)
	if !ok {
		p.malformed(n)
		return nil
	}
	p.f.Ports++
	ns := p.nodes[l.A.GUID]
	if ns == nil {
		ns = &nodeSeen{desc: l.A.Desc}
		p.nodes[l.A.GUID] = ns
	}
	ns.lines++
	p.f.PortLines = append(p.f.PortLines, PortLine{
		GUID: l.A.GUID, Desc: l.A.Desc, LID: l.A.LID, Port: l.A.Port,
		State: l.State, PhysState: physStates[l.PhysState],
	})
	if down {
		p.f.DownPorts++
		return nil
	}
	if l.B.GUID == 0 && l.B.Port == 0 {
		return nil // up, but no peer ("Port not available")
	}
	a, bk := endKey{l.A.GUID, l.A.Port}, endKey{l.B.GUID, l.B.Port}
	key := [2]endKey{a, bk}
	if bk.guid < a.guid || bk.guid == a.guid && bk.port < a.port {
		key = [2]endKey{bk, a}
	}
	if _, seen := p.links[key]; !seen {
		p.links[key] = int32(len(p.f.Links))
		p.f.Links = append(p.f.Links, l)
	}
	return nil
}

// parseLine parses one line:
//
//	0x%016x "%30s" %6d %4d[%2s] ==(%3s %18s %6s/%8s)==>  0x%016x %6d %4d[%2s] "%s" (%s %s)
//	0x%016x "%30s" %6d %4d[%2s] ==(              %6s/%8s)==>             [  ] "" ( )
//	0x%016x "%30s" %6d %4d[%2s] ==(%3s %18s %6s/%8s)==>      "Port not available"
//
// (iblinkinfo.c print_port in line mode).
func (p *parser) parseLine(b []byte) (l Link, down, ok bool) {
	open := bytes.Index(b, sepOpen)
	if open < 0 {
		return l, false, false
	}
	closeAt := bytes.Index(b[open:], sepClose)
	if closeAt < 0 {
		return l, false, false
	}
	closeAt += open
	left, mid, right := b[:open], b[open+len(sepOpen):closeAt], bytes.TrimSpace(b[closeAt+len(sepClose):])

	var a End
	if !p.parseLocal(left, &a) {
		return l, false, false
	}
	// mid: "<w> <speed...> <state>/<phys>" or "<state>/<phys>"
	slash := bytes.LastIndexByte(mid, '/')
	if slash < 0 {
		return l, false, false
	}
	phys := bytes.TrimSpace(mid[slash+1:])
	var hbuf [8][]byte
	head := fields(mid[:slash], hbuf[:0])
	if len(head) == 0 || len(phys) == 0 {
		return l, false, false
	}
	state, known := portStates[string(head[len(head)-1])]
	if !known {
		return l, false, false
	}
	l = Link{A: a, State: state, PhysState: p.intern(phys)}
	if state == infiniband.StateDown {
		if len(head) != 1 {
			return l, false, false
		}
		return l, true, true
	}
	if len(head) < 3 {
		return l, false, false
	}
	w, ok := parseWidth(head[0])
	if !ok {
		return l, false, false
	}
	l.Width = w
	// The speed is the text between width and state ("10.0 Gbps (FDR10)").
	first, last := head[1], head[len(head)-2]
	l.SpeedText = p.intern(mid[cap(mid)-cap(first) : cap(mid)-cap(last)+len(last)])
	l.Speed = speedName(l.SpeedText)

	if bytes.Equal(right, []byte(`"Port not available"`)) {
		return l, false, true
	}
	if !p.parseRemote(right, &l) {
		return l, false, false
	}
	return l, false, true
}

// parseLocal parses `0x<guid> "<desc>" <lid> <port>[<ext>] `.
func (p *parser) parseLocal(b []byte, e *End) bool {
	sp := bytes.IndexByte(b, ' ')
	if sp < 0 {
		return false
	}
	g, ok := parseGUID(b[:sp])
	if !ok {
		return false
	}
	e.GUID = g
	rest := b[sp:]
	q1 := bytes.IndexByte(rest, '"')
	q2 := bytes.LastIndexByte(rest, '"')
	if q1 < 0 || q2 <= q1 {
		return false
	}
	e.Desc = p.desc(bytes.TrimSpace(rest[q1+1 : q2]))
	lid, port, ok := parseLIDPort(rest[q2+1:])
	if !ok {
		return false
	}
	e.LID, e.Port = lid, port
	return true
}

// parseRemote parses `0x<guid> <lid> <port>[<ext>] "<desc>" (<hints>)`.
func (p *parser) parseRemote(b []byte, l *Link) bool {
	sp := bytes.IndexByte(b, ' ')
	if sp < 0 {
		return false
	}
	g, ok := parseGUID(b[:sp])
	if !ok {
		return false
	}
	rest := b[sp:]
	q1 := bytes.IndexByte(rest, '"')
	descEnd := bytes.LastIndex(rest, []byte(`" (`))
	if q1 < 0 || descEnd <= q1 || rest[len(rest)-1] != ')' {
		return false
	}
	lid, port, ok := parseLIDPort(rest[:q1])
	if !ok {
		return false
	}
	l.B = End{GUID: g, LID: lid, Port: port, Desc: p.desc(bytes.TrimSpace(rest[q1+1 : descEnd]))}
	hints := rest[descEnd+3 : len(rest)-1]
	for _, part := range bytes.Split(hints, []byte("Could be")) {
		h := bytes.TrimSpace(part)
		if len(h) == 0 {
			continue
		}
		if _, isWidth := parseWidth(h); isWidth {
			l.CouldBeWidth = p.intern(h)
		} else {
			l.CouldBeSpeed = p.intern(h)
		}
	}
	return true
}

// parseLIDPort parses "%6d %4d[%2s]".
func parseLIDPort(b []byte) (lid, port int, ok bool) {
	// The extended port ("[%2s]", blank unless the port is a split one)
	// is not kept.
	br := bytes.IndexByte(b, '[')
	if br < 0 || bytes.IndexByte(b[br:], ']') < 0 {
		return 0, 0, false
	}
	var fbuf [2][]byte
	f := fields(b[:br], fbuf[:0])
	if len(f) != 2 {
		return 0, 0, false
	}
	l, err := strconv.ParseUint(string(f[0]), 10, 16)
	if err != nil {
		return 0, 0, false
	}
	pn, err := strconv.ParseUint(string(f[1]), 10, 8)
	if err != nil {
		return 0, 0, false
	}
	return int(l), int(pn), true
}

// fields splits b at runs of spaces into dst (not growing it past its
// capacity: extra fields are dropped and len(dst)==cap(dst) tells), so the
// hot path does not allocate.
func fields(b []byte, dst [][]byte) [][]byte {
	i := 0
	for i < len(b) {
		for i < len(b) && b[i] == ' ' {
			i++
		}
		j := i
		for j < len(b) && b[j] != ' ' {
			j++
		}
		if j > i {
			if len(dst) == cap(dst) {
				return append(dst[:len(dst):len(dst)], nil) // marks overflow
			}
			dst = append(dst, b[i:j])
		}
		i = j
	}
	return dst
}

func parseGUID(b []byte) (uint64, bool) {
	h, ok := bytes.CutPrefix(b, []byte("0x"))
	if !ok || len(h) == 0 || len(h) > 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(h), 16, 64)
	return v, err == nil
}

func parseWidth(b []byte) (int, bool) {
	switch string(b) {
	case "1X":
		return 1, true
	case "2X":
		return 2, true
	case "4X":
		return 4, true
	case "8X":
		return 8, true
	case "12X":
		return 12, true
	}
	return 0, false
}

// portStates are libibmad's PortState names (dump.c), numbered as sysfs
// numbers them.
var portStates = map[string]int{
	"Down":       infiniband.StateDown,
	"Initialize": infiniband.StateInit,
	"Armed":      infiniband.StateArmed,
	"Active":     infiniband.StateActive,
}

// physStates are libibmad's PortPhysicalState names (mad_dump_physportstate),
// numbered as the IB spec and sysfs number them.
var physStates = map[string]int{
	"Sleep":                     infiniband.PhysStateSleep,
	"Polling":                   infiniband.PhysStatePolling,
	"Disabled":                  infiniband.PhysStateDisabled,
	"PortConfigurationTraining": infiniband.PhysStateTraining,
	"LinkUp":                    infiniband.PhysStateLinkUp,
	"LinkErrorRecovery":         infiniband.PhysStateErrRecov,
	"PhyTest":                   infiniband.PhysStatePhyTest,
}

// speeds maps libibmad's per-lane speed strings (mad_dump_linkspeed,
// mad_dump_linkspeedext, iblinkinfo's FDR10 case) to speed names.
var speeds = map[string]string{
	"2.5 Gbps":          "SDR",
	"5.0 Gbps":          "DDR",
	"10.0 Gbps":         "QDR",
	"10.0 Gbps (FDR10)": "FDR10",
	"14.0625 Gbps":      "FDR",
	"25.78125 Gbps":     "EDR",
	"53.125 Gbps":       "HDR",
	"106.25 Gbps":       "NDR",
	"212.5 Gbps":        "XDR",
}

func speedName(s string) string { return speeds[s] }

func (p *parser) finish() *Fabric {
	f := &p.f
	cas := map[uint64]struct{}{}
	for guid, ns := range p.nodes {
		if ns.lines > 1 {
			f.Switches++
		} else {
			f.CAPorts++
			cas[guid] = struct{}{}
		}
	}
	f.CAs = len(cas)
	for i := range f.Links {
		l := &f.Links[i]
		// Orient switch -> CA, and otherwise lower GUID/port first, so a
		// link always has the same labels whichever end was printed first.
		aSw, bSw := p.isSwitch(l.A.GUID), p.isSwitch(l.B.GUID)
		if bSw && !aSw || aSw == bSw && (l.B.GUID < l.A.GUID || l.B.GUID == l.A.GUID && l.B.Port < l.A.Port) {
			l.A, l.B = l.B, l.A
		}
	}
	for i := range f.PortLines {
		f.PortLines[i].Switch = p.isSwitch(f.PortLines[i].GUID)
	}
	sortPortLines(f.PortLines)
	sort.Slice(f.Links, func(i, j int) bool {
		a, b := &f.Links[i], &f.Links[j]
		if a.A.GUID != b.A.GUID {
			return a.A.GUID < b.A.GUID
		}
		return a.A.Port < b.A.Port
	})
	p.links, p.nodes, p.strs, p.descs = nil, nil, nil, nil
	return f
}

func sortPortLines(pl []PortLine) {
	sort.Slice(pl, func(i, j int) bool {
		a, b := &pl[i], &pl[j]
		if a.GUID != b.GUID {
			return a.GUID < b.GUID
		}
		return a.Port < b.Port
	})
}

func (p *parser) isSwitch(guid uint64) bool {
	ns := p.nodes[guid]
	return ns != nil && ns.lines > 1
}

// Args are the iblinkinfo arguments rdma_doctor runs: one line per port
// with both ends' GUIDs. ca and port select the local port ("" and 0 for
// iblinkinfo's default).
func Args(ca string, port int) []string {
	args := []string{"--line"}
	if ca != "" {
		args = append(args, "-C", ca)
	}
	if port > 0 {
		args = append(args, "-P", strconv.Itoa(port))
	}
	return args
}

// Describe is a one-line summary for logs.
func (f *Fabric) Describe() string {
	return fmt.Sprintf("%d links (%d degraded), %d switches, %d CAs, %d ports (%d down), %d malformed lines",
		len(f.Links), f.Degraded(), f.Switches, f.CAs, f.Ports, f.DownPorts, f.Malformed)
}
