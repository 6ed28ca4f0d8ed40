// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// dump_fts (infiniband-diags; dump_lfts.sh is a wrapper around it) prints
// every switch's unicast forwarding table, one block per switch, as
// ibroute does for one (infiniband-diags ibroute.c dump_unicast_tables):
//
//	Unicast lids [0x0-0x16] of switch DR path slid 0; dlid 0; 0,4 guid 0x0000000000200005 (leaf004):
//	  Lid  Out   Destination
//	       Port     Info
//	0x0006 000 : (Switch portguid 0x0000000000200005: 'leaf004')
//	0x0007 005 : (Channel Adapter portguid 0x0000000000100001: 'host0001 mlx5_0')
//	22 valid lids dumped
//
// A LID of an LMC range past its base prints "(path #2 out of 4: portguid
// ...)": the destination of the base LID before it. Only LIDs with a
// valid out port are printed (no -a): a destination the table does not
// hold is not printed at all.

// LFTEntry is one forwarded LID of a switch.
type LFTEntry struct {
	LID, Port int
	// Kind is the destination's node type: KindCA, KindSwitch,
	// KindRouter, or KindUnresolved when dump_fts could not name it.
	Kind DestKind
	// PortGUID is the destination port's GUID as printed.
	PortGUID uint64
}

// DestKind is the node type of a forwarded LID's destination.
type DestKind uint8

// The destination kinds dump_fts names.
const (
	KindUnresolved DestKind = iota
	KindCA
	KindSwitch
	KindRouter
)

// SwitchLFT is one switch's unicast forwarding table, whole: a block whose
// count line matched the entries printed.
type SwitchLFT struct {
	// GUID is the switch's port 0 GUID (what iblinkinfo prints on its
	// port lines), from the entry that forwards its own LID to port 0;
	// the node GUID of the header where no entry does.
	GUID    uint64
	Entries []LFTEntry
}

// CARoutes returns how many channel-adapter LIDs the switch forwards out of
// each port (check_lft_balance's count: a "path #" LID of an LMC range
// counts as its base's kind).
func (s *SwitchLFT) CARoutes() map[int]int {
	out := map[int]int{}
	for _, e := range s.Entries {
		if e.Kind == KindCA {
			out[e.Port]++
		}
	}
	return out
}

// MaxLFTLine bounds one line of dump_fts output (a destination line with a
// 64-byte node description is under 150 bytes).
const MaxLFTLine = 4 << 10

// maxLID is the largest unicast LID (0xbfff); a table line past it is not
// a unicast entry.
const maxLID = 0xbfff

// lftDump is what one dump_fts run printed: the whole blocks, and how many
// blocks did not end with a matching count line (cut short, or an entry not
// in the format), which are dropped.
type lftDump struct {
	Switches []*SwitchLFT
	Broken   int
	// Junk counts lines outside any block that are not in the format.
	Junk int
}

var (
	lftHeader   = []byte("Unicast lids [")
	lftOfSwitch = []byte(" of switch ")
	lftGUID     = []byte(" guid 0x")
	lftDumped   = []byte(" valid lids dumped")
)

// parseLFTs reads dump_fts (or ibroute) output. A block counts only when
// its "N valid lids dumped" line says as many LIDs as it printed and every
// entry line parsed: a partial table would read as missing routes.
func parseLFTs(r io.Reader) (*lftDump, error) {
	d := &lftDump{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLFTLine)
	var cur *SwitchLFT
	bad := false
	var last DestKind
	flush := func() {
		if cur != nil {
			d.Broken++
		}
		cur, bad = nil, false
	}
	for sc.Scan() {
		line := bytes.TrimRight(sc.Bytes(), " \t\r")
		switch {
		case bytes.HasPrefix(line, lftHeader):
			flush()
			g, ok := headerGUID(line)
			if !ok {
				d.Junk++
				continue
			}
			cur = &SwitchLFT{GUID: g}
		case cur == nil:
			if len(bytes.TrimSpace(line)) > 0 && !bytes.Contains(line, []byte("WARNING")) && !bytes.Contains(line, []byte("replaced by dump_fts")) {
				d.Junk++
			}
		case bytes.HasSuffix(line, lftDumped):
			n, err := strconv.Atoi(string(bytes.TrimSpace(line[:len(line)-len(lftDumped)])))
			if err != nil || n != len(cur.Entries) || bad {
				flush()
				continue
			}
			d.Switches = append(d.Switches, cur)
			cur = nil
		case bytes.HasPrefix(line, []byte("0x")):
			e, ok := parseLFTEntry(line, last)
			if !ok {
				bad = true
				continue
			}
			last = e.Kind
			if e.Port == 0 && e.Kind == KindSwitch && e.PortGUID != 0 {
				cur.GUID = e.PortGUID
			}
			cur.Entries = append(cur.Entries, e)
		case bytes.HasPrefix(bytes.TrimSpace(line), []byte("Lid")), bytes.HasPrefix(bytes.TrimSpace(line), []byte("Port")), len(bytes.TrimSpace(line)) == 0:
			// The column headings, and the blank line after a table.
		default:
			bad = true
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return d, fmt.Errorf("%w: %w", fabric.ErrUnparsable, err)
	}
	return d, nil
}

// headerGUID returns the node GUID of a block's header line.
func headerGUID(line []byte) (uint64, bool) {
	if !bytes.Contains(line, lftOfSwitch) {
		return 0, false
	}
	i := bytes.LastIndex(line, lftGUID)
	if i < 0 {
		return 0, false
	}
	rest := line[i+len(lftGUID):]
	if j := bytes.IndexAny(rest, " :("); j >= 0 {
		rest = rest[:j]
	}
	g, err := strconv.ParseUint(string(rest), 16, 64)
	return g, err == nil && g != 0
}

// parseLFTEntry parses "0x0007 005 : (Channel Adapter portguid 0x...: 'name')";
// a "(path #N out of M: portguid ...)" line has the kind prev (its base's).
// The -n form ("0x0007 005") has no destination: KindUnresolved.
func parseLFTEntry(line []byte, prev DestKind) (LFTEntry, bool) {
	f := bytes.Fields(line)
	if len(f) < 2 || len(f[0]) < 3 {
		return LFTEntry{}, false
	}
	lid, err := strconv.ParseUint(string(f[0][2:]), 16, 16)
	if err != nil || lid == 0 || lid > maxLID {
		return LFTEntry{}, false
	}
	port, err := strconv.ParseUint(string(f[1]), 10, 8)
	if err != nil || port == 255 {
		return LFTEntry{}, false
	}
	e := LFTEntry{LID: int(lid), Port: int(port)}
	if len(f) == 2 {
		return e, true
	}
	i := bytes.IndexByte(line, '(')
	if i < 0 || f[2][0] != ':' {
		return LFTEntry{}, false
	}
	dest := line[i+1:]
	switch {
	case bytes.HasPrefix(dest, []byte("Channel Adapter portguid ")):
		e.Kind = KindCA
	case bytes.HasPrefix(dest, []byte("Switch portguid ")):
		e.Kind = KindSwitch
	case bytes.HasPrefix(dest, []byte("Router portguid ")):
		e.Kind = KindRouter
	case bytes.HasPrefix(dest, []byte("path #")):
		e.Kind = prev
	default:
		return LFTEntry{}, false
	}
	if j := bytes.Index(dest, []byte("portguid 0x")); j >= 0 {
		g := dest[j+len("portguid 0x"):]
		if k := bytes.IndexByte(g, ':'); k >= 0 {
			g = g[:k]
		}
		v, err := strconv.ParseUint(string(g), 16, 64)
		if err != nil {
			return LFTEntry{}, false
		}
		e.PortGUID = v
	}
	return e, true
}
