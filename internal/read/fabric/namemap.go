// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// A node name map is the file infiniband-diags' tools (ibnetdiscover,
// iblinkinfo, ibqueryerrors --node-name-map) and treydock's exporter
// (--ibnetdiscover.node-name-map, handed to ibnetdiscover) take to show
// friendly names in place of node descriptions. Its format is opensm's
// complib/cl_nodenamemap.c (parse_node_map_wrap, map_name):
//
//	# comment
//	0x0008f104003f125c "IB1 (Rack 11 slot 1) ISR9288"
//	0x0008f104003f125d leaf-2   # the quotes are optional
//
// A line is a GUID as strtoull base 0 reads it (0x hex, a leading 0
// octal, else decimal), white space, and the name: the text up to the
// first '"' or '#' after any opening quote. Blank lines and lines whose
// first non-blank character is '#' are comments.
//
// Where infiniband-diags silently skips a line it cannot read, keeps the
// first of two names for one GUID and cuts lines at 256 bytes, this
// parser refuses the file with the line: a map read differently than the
// operator wrote it would put wrong names on every series of a node.

// MaxNameMapBytes bounds a node name map: a line is at most 256 bytes in
// infiniband-diags, so 16 MiB is 65,000 nodes, past the 48k unicast LIDs
// of one subnet.
const MaxNameMapBytes = 16 << 20

// NameMap maps node GUIDs to friendly names.
type NameMap map[uint64]string

// LoadNameMap reads and parses the node name map at path, bounded by
// MaxNameMapBytes. Its errors name the file and the line.
func LoadNameMap(path string) (NameMap, error) {
	b, err := hostfs.ReadBounded(path, MaxNameMapBytes)
	if err != nil {
		return nil, fmt.Errorf("node name map: %w", err)
	}
	m, err := ParseNameMap(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("node name map %s: %w", path, err)
	}
	return m, nil
}

// ParseNameMap parses a node name map. A name must be fit to be a label
// value as it is (valid UTF-8, printable, at most names.MaxLabelBytes):
// the label policy would otherwise cut or repair it on every series.
func ParseNameMap(r io.Reader) (NameMap, error) {
	m := NameMap{}
	line := map[uint64]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		guid, name, ok, err := nameMapLine(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if !ok {
			continue
		}
		if prev, seen := m[guid]; seen && prev != name {
			return nil, fmt.Errorf("line %d: GUID 0x%016x is named %q on line %d and %q here", n, guid, prev, line[guid], name)
		}
		m[guid], line[guid] = name, n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return m, nil
}

// nameMapLine parses one line; ok is false for a comment or blank line.
func nameMapLine(b []byte) (guid uint64, name string, ok bool, err error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] == '#' {
		return 0, "", false, nil
	}
	end := bytes.IndexAny(b, " \t#")
	if end < 0 {
		end = len(b)
	}
	g, perr := strconv.ParseUint(string(b[:end]), 0, 64)
	if perr != nil {
		return 0, "", false, fmt.Errorf("%q is not a GUID (want 0x<hex> \"<name>\")", clip(b[:end]))
	}
	rest := bytes.TrimLeft(b[end:], " \t")
	if len(rest) > 0 && rest[0] == '"' {
		rest = rest[1:]
	}
	if i := bytes.IndexAny(rest, "\"#"); i >= 0 {
		rest = rest[:i]
	}
	rest = bytes.TrimRight(rest, " \t")
	switch {
	case len(rest) == 0:
		return 0, "", false, fmt.Errorf("GUID 0x%016x without a name", g)
	case len(rest) > names.MaxLabelBytes:
		return 0, "", false, fmt.Errorf("name of GUID 0x%016x is %d bytes, over the %d-byte label limit", g, len(rest), names.MaxLabelBytes)
	case !utf8.Valid(rest):
		return 0, "", false, fmt.Errorf("name of GUID 0x%016x is not UTF-8", g)
	}
	for _, r := range string(rest) {
		if r < 0x20 || r == 0x7f {
			return 0, "", false, fmt.Errorf("name of GUID 0x%016x holds a control character", g)
		}
	}
	return g, string(rest), true, nil
}

// Apply replaces f's node descriptions by the map's names where the map
// has the GUID iblinkinfo prints: a switch's port 0 GUID, which is its
// node GUID, and a channel adapter port's GUID (an mlx5 port is a node of
// its own, its port GUID its node GUID). The runner applies it to each
// scan before publishing it: a published scan is never modified.
func (m NameMap) Apply(f *Fabric) {
	if len(m) == 0 || f == nil {
		return
	}
	for i := range f.Links {
		l := &f.Links[i]
		l.A.Desc = m.name(l.A.GUID, l.A.Desc)
		l.B.Desc = m.name(l.B.GUID, l.B.Desc)
	}
	for i := range f.PortLines {
		p := &f.PortLines[i]
		p.Desc = m.name(p.GUID, p.Desc)
	}
}

func (m NameMap) name(guid uint64, desc string) string {
	if n, ok := m[guid]; ok {
		return n
	}
	return desc
}
