// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package rdmanl speaks the two netlink dialects the RoCE and RDMA
// counters need that sysfs does not show: NETLINK_RDMA (the nldev
// commands `rdma statistic` and `rdma resource` use: per-port hardware
// counters with the optional ones, whether each optional counter is
// enabled, the resource totals per device) and the DCB part of rtnetlink
// (RTM_GETDCB / DCB_CMD_IEEE_GET, what `dcb` and `mlnx_qos` read: PFC,
// ETS, the application priority table).
//
// The socket is github.com/mdlayher/netlink's, the project's one netlink
// stack (devlink and ethtool use it too), with our own deadline and a
// receive loop that reads a dump one datagram at a time (conn.go). The
// requests and replies are encoded and decoded here: no library covers
// nldev's statistics and resources, RDMA_NLDEV_CMD_STAT_GET_STATUS or DCB,
// and ours must take recorded bytes and never index past a short
// attribute. One attribute walker serves every reply, and it is fuzzed.
package rdmanl

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// attr is one netlink attribute: its type without the NLA_F_NESTED and
// NLA_F_NET_BYTEORDER flags, and its payload.
type attr struct {
	typ  uint16
	data []byte
}

// Attribute flags carried in the type field (linux/netlink.h).
const (
	nlaFNested    = 1 << 15
	nlaFByteOrder = 1 << 14
	nlaHdrLen     = 4
)

var errShort = errors.New("attribute runs past its message")

// attrs splits b into attributes. An attribute whose length is shorter
// than its header or runs past b is an error: the message is malformed and
// nothing in it is trusted.
func attrs(b []byte) ([]attr, error) {
	var out []attr
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return out, errShort
		}
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) &^ (nlaFNested | nlaFByteOrder)
		if n < nlaHdrLen || n > len(b) {
			return out, fmt.Errorf("attribute type %d length %d: %w", t, n, errShort)
		}
		out = append(out, attr{typ: t, data: b[nlaHdrLen:n]})
		// Attributes are padded to 4 bytes; the last one's padding may
		// be missing.
		next := (n + 3) &^ 3
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return out, nil
}

// appendAttr appends one attribute to b as nla_put writes it: the header,
// data, and padding to 4 bytes. Every attribute this package sends is a
// u32, a short string or a table of u32s, far below the 16-bit length.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	n := nlaHdrLen + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	return append(b, make([]byte, (n+3)&^3-n)...)
}

// u32Data is a u32 attribute's payload.
func u32Data(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// stringData is a string attribute's payload, NUL-terminated as the
// kernel's nla_strscpy expects.
func stringData(s string) []byte { return append([]byte(s), 0) }

func (a attr) u8() (uint8, error) {
	if len(a.data) < 1 {
		return 0, fmt.Errorf("attribute type %d: %d bytes, want a u8", a.typ, len(a.data))
	}
	return a.data[0], nil
}

func (a attr) u32() (uint32, error) {
	if len(a.data) < 4 {
		return 0, fmt.Errorf("attribute type %d: %d bytes, want a u32", a.typ, len(a.data))
	}
	return binary.NativeEndian.Uint32(a.data), nil
}

func (a attr) u64() (uint64, error) {
	if len(a.data) < 8 {
		return 0, fmt.Errorf("attribute type %d: %d bytes, want a u64", a.typ, len(a.data))
	}
	return binary.NativeEndian.Uint64(a.data), nil
}

// str is a NUL-terminated string attribute; a missing NUL is tolerated
// (the whole payload is the string), an empty one is an error.
func (a attr) str() (string, error) {
	d := a.data
	for i, c := range d {
		if c == 0 {
			d = d[:i]
			break
		}
	}
	if len(d) == 0 {
		return "", fmt.Errorf("attribute type %d: empty string", a.typ)
	}
	return string(d), nil
}
