// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package ndcache reads and filters libibnetdisc's fabric cache, the file
// `ibnetdiscover --cache FILE` writes and `ibqueryerrors --load-cache FILE`
// reads (rdma-core libibnetdisc/ibnetdisc_cache.c, format version 1, little
// endian). The counter sweep discovers the fabric into it once per
// topology and then reads counters against it with no discovery MADs; a
// shard keeps only its own nodes, so its ibqueryerrors queries only those.
package ndcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	ndMagic      = 0x8FE7832B
	ndVersion    = 1
	ndHeaderLen  = 28
	ndSMPData    = 64 // IB_SMP_DATA_SIZE
	ndNodeLen    = 15 + 3*ndSMPData
	ndPortKeyLen = 8 + 1
	ndPortLen    = 31 + ndSMPData
	// Offsets within a node record.
	ndNodeSMALID    = 0
	ndNodeGUID      = 4 + ndSMPData
	ndNodeType      = ndNodeGUID + 8
	ndNodeNumPorts  = ndNodeType + 1
	ndNodeDesc      = ndNodeNumPorts + 1 + ndSMPData
	ndNodePortCount = ndNodeDesc + ndSMPData
	// Offsets within a port record.
	ndPortGUID     = 0
	ndPortNum      = 8
	ndPortBaseLID  = 10
	ndPortNodeGUID = 13 + ndSMPData
	ndPortRemote   = ndPortNodeGUID + 8 // flag, then GUID and port number
	// Node types (IB_NODE_CA, IB_NODE_SWITCH).
	TypeCA     = 1
	TypeSwitch = 2
)

// MaxBytes bounds the cache file a sweep reads: a node is about 250
// bytes and a port 95, so 64 MiB is far past the largest fabric
// InfiniBand addresses (48k unicast LIDs).
const MaxBytes = 64 << 20

// Port is one port of a cached node.
type Port struct {
	GUID uint64
	Num  int
	LID  int
	raw  []byte
}

// Node is one cached node.
type Node struct {
	GUID   uint64
	Type   byte
	SMALID int // a switch's port 0 LID
	Desc   string
	Ports  []Port
	raw    []byte // the node record with its port keys
}

// port returns the cached port num of the node, or nil.
func (n *Node) Port(num int) *Port {
	for i := range n.Ports {
		if n.Ports[i].Num == num {
			return &n.Ports[i]
		}
	}
	return nil
}

// Cache is a parsed fabric cache.
type Cache struct {
	header []byte
	From   uint64
	Nodes  []*Node
	byGUID map[uint64]*Node
	// byLID maps every LID a node's PMA answers on (ibqueryerrors names
	// a failed query by it) to the node.
	byLID map[int]*Node
	// byPort maps port GUIDs (what the scan and the error lines name) to
	// their nodes.
	byPort map[uint64]*Node
}

// Parse reads a fabric cache of at most max bytes.
func Parse(r io.Reader, max int) (*Cache, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("reading fabric cache: %w", err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("fabric cache larger than %d bytes", max)
	}
	be := binary.LittleEndian
	if len(b) < ndHeaderLen {
		return nil, errors.New("fabric cache: short header")
	}
	if m := be.Uint32(b); m != ndMagic {
		return nil, fmt.Errorf("fabric cache: magic %#x, not libibnetdisc's", m)
	}
	if v := be.Uint32(b[4:]); v != ndVersion {
		return nil, fmt.Errorf("fabric cache: version %d, not %d", v, ndVersion)
	}
	nodeCount, portCount := int(be.Uint32(b[8:])), int(be.Uint32(b[12:]))
	c := &Cache{header: b[:ndHeaderLen], From: be.Uint64(b[16:]), byGUID: map[uint64]*Node{}, byLID: map[int]*Node{}, byPort: map[uint64]*Node{}}
	// Each count is checked against the bytes left before anything is
	// allocated for it.
	rest := b[ndHeaderLen:]
	if nodeCount > len(rest)/ndNodeLen || portCount > len(rest)/ndPortLen {
		return nil, fmt.Errorf("fabric cache: %d nodes and %d ports do not fit in %d bytes", nodeCount, portCount, len(b))
	}
	for i := range nodeCount {
		if len(rest) < ndNodeLen {
			return nil, fmt.Errorf("fabric cache: node %d truncated", i)
		}
		keys := int(rest[ndNodePortCount])
		n := ndNodeLen + keys*ndPortKeyLen
		if len(rest) < n {
			return nil, fmt.Errorf("fabric cache: node %d's port keys truncated", i)
		}
		rec := rest[:n]
		rest = rest[n:]
		nd := &Node{
			GUID:   be.Uint64(rec[ndNodeGUID:]),
			Type:   rec[ndNodeType],
			SMALID: int(be.Uint16(rec[ndNodeSMALID:])),
			Desc:   string(bytes.TrimRight(cString(rec[ndNodeDesc:ndNodeDesc+ndSMPData]), " ")),
			raw:    rec,
		}
		if c.byGUID[nd.GUID] != nil {
			return nil, fmt.Errorf("fabric cache: node %#x twice", nd.GUID)
		}
		c.Nodes = append(c.Nodes, nd)
		c.byGUID[nd.GUID] = nd
	}
	for i := range portCount {
		if len(rest) < ndPortLen {
			return nil, fmt.Errorf("fabric cache: port %d truncated", i)
		}
		rec := rest[:ndPortLen]
		rest = rest[ndPortLen:]
		nd := c.byGUID[be.Uint64(rec[ndPortNodeGUID:])]
		if nd == nil {
			return nil, fmt.Errorf("fabric cache: port %d names node %#x, which is not in the file", i, be.Uint64(rec[ndPortNodeGUID:]))
		}
		nd.Ports = append(nd.Ports, Port{
			GUID: be.Uint64(rec[ndPortGUID:]),
			Num:  int(rec[ndPortNum]),
			LID:  int(be.Uint16(rec[ndPortBaseLID:])),
			raw:  rec,
		})
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("fabric cache: %d bytes after the last port", len(rest))
	}
	if c.byGUID[c.From] == nil {
		return nil, fmt.Errorf("fabric cache: the node it was discovered from (%#x) is not in it", c.From)
	}
	// The LIDs a node's PMA answers on, which ibqueryerrors names a
	// failed query by: a switch's port 0 LID, each CA port's own.
	for _, nd := range c.Nodes {
		if nd.Type == TypeSwitch {
			c.byLID[nd.SMALID] = nd
		}
		for _, p := range nd.Ports {
			c.byPort[p.GUID] = nd
			if nd.Type != TypeSwitch && p.LID > 0 {
				c.byLID[p.LID] = nd
			}
		}
	}
	return c, nil
}

// cString is b up to its first NUL.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// lineGUID is the GUID the topology scan and ibqueryerrors' error lines
// print for a node's ports: the port GUID (a switch's is the same on all
// of its ports).
func (n *Node) LineGUID(port int) (uint64, bool) {
	if p := n.Port(port); p != nil {
		return p.GUID, true
	}
	if n.Type == TypeSwitch && len(n.Ports) > 0 {
		return n.Ports[0].GUID, true
	}
	return 0, false
}

// filter writes a cache holding only the nodes keep accepts, their ports,
// and the node the fabric was discovered from (libibnetdisc refuses a
// cache without it). A link to a port left out is written as no link:
// libibnetdisc before rdma-core 51 refuses a cache with a link to a port
// it does not hold. It returns the nodes written.
func (c *Cache) Filter(w io.Writer, keep func(*Node) bool) ([]*Node, error) {
	var kept []*Node
	ports := 0
	for _, nd := range c.Nodes {
		if nd.GUID == c.From || keep(nd) {
			kept = append(kept, nd)
			ports += len(nd.Ports)
		}
	}
	h := append([]byte{}, c.header...)
	binary.LittleEndian.PutUint32(h[8:], uint32(len(kept)))
	binary.LittleEndian.PutUint32(h[12:], uint32(ports))
	if _, err := w.Write(h); err != nil {
		return nil, err
	}
	for _, nd := range kept {
		if _, err := w.Write(nd.raw); err != nil {
			return nil, err
		}
	}
	type key struct {
		guid uint64
		num  byte
	}
	in := make(map[key]bool, ports)
	for _, nd := range kept {
		for _, p := range nd.Ports {
			in[key{p.GUID, byte(p.Num)}] = true
		}
	}
	le := binary.LittleEndian
	rec := make([]byte, ndPortLen)
	for _, nd := range kept {
		for _, p := range nd.Ports {
			copy(rec, p.raw)
			if rec[ndPortRemote] != 0 && !in[key{le.Uint64(rec[ndPortRemote+1:]), rec[ndPortRemote+9]}] {
				rec[ndPortRemote] = 0
				clear(rec[ndPortRemote+1:])
			}
			if _, err := w.Write(rec); err != nil {
				return nil, err
			}
		}
	}
	return kept, nil
}

// byPortGUID returns the node one of whose ports has guid, or nil.
func (c *Cache) ByPortGUID(guid uint64) *Node { return c.byPort[guid] }

// ByGUID returns the node of node GUID guid, or nil.
func (c *Cache) ByGUID(guid uint64) *Node { return c.byGUID[guid] }

// ByLID returns the node whose PMA answers on lid, or nil.
func (c *Cache) ByLID(lid int) *Node { return c.byLID[lid] }
