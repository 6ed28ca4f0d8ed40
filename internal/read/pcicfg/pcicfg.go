// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package pcicfg parses a PCI function's configuration space, the bytes of
// its sysfs `config` file: the header, the standard capability list (from
// the pointer at 0x34) and the PCI Express extended capabilities (from
// 0x100), and the registers rdma_doctor judges: PCI Express port type and
// device control, Access Control Services and Address Translation
// Services. It is the one parser of that format.
//
// sysfs gives an unprivileged reader only the first 64 bytes of the file
// (the header); the capabilities need root or CAP_SYS_ADMIN. Parse keeps
// what the bytes hold and Config.Space says how much was readable, so a
// caller can tell "not there" from "not readable": a capability is
// reported absent only where the bytes that would hold it were read.
//
// The lists are walked defensively: a pointer outside the bytes read, into
// the header, or back to a capability already visited ends the walk with
// an error, keeping what was found before it. Nothing here panics on any
// input (FuzzParse).
package pcicfg

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes of the configuration space regions.
const (
	// HeaderSize is what sysfs returns to an unprivileged reader.
	HeaderSize = 64
	// StandardSize is the conventional (PCI 3.0) configuration space.
	StandardSize = 256
	// ExtendedSize is the PCI Express configuration space.
	ExtendedSize = 4096
)

// Header register offsets.
const (
	offVendor     = 0x00
	offDevice     = 0x02
	offStatus     = 0x06
	offRevision   = 0x08
	offHeaderType = 0x0e
	offCapPtr     = 0x34
	// statusCapList is the Status bit saying the capability list exists.
	statusCapList = 1 << 4
)

// Capability IDs read here (PCI Code and ID Assignment Specification).
const (
	// CapExpress is the PCI Express capability.
	CapExpress uint8 = 0x10
	// ExtCapAER is Advanced Error Reporting.
	ExtCapAER uint16 = 0x0001
	// ExtCapACS is Access Control Services.
	ExtCapACS uint16 = 0x000d
	// ExtCapATS is Address Translation Services.
	ExtCapATS uint16 = 0x000f
)

// Space is how much of the configuration space the bytes cover.
type Space int

// The readable extents. SpaceHeader is the unprivileged sysfs view.
const (
	SpaceHeader   Space = iota // 64..255 bytes: the header only
	SpaceStandard              // 256..4095 bytes: no extended capabilities
	SpaceExtended              // 4096 bytes: everything
)

func (s Space) String() string {
	switch s {
	case SpaceHeader:
		return "header"
	case SpaceStandard:
		return "standard"
	case SpaceExtended:
		return "extended"
	}
	return fmt.Sprintf("Space(%d)", int(s))
}

// ErrTruncated is a config file shorter than the 64-byte header: not what
// any kernel returns.
var ErrTruncated = errors.New("config space shorter than its 64-byte header")

// Cap is one capability: its ID and the offset of its header.
type Cap struct {
	ID     uint16
	Offset int
	// Version is the extended capability's version; 0 for a standard one.
	Version uint8
}

// Config is a parsed configuration space.
type Config struct {
	b []byte
	// Space is how much was readable.
	Space Space
	// Vendor, Device, Revision and Class are the header's IDs; Class is
	// the 24-bit class code (0x060400: PCI-to-PCI bridge).
	Vendor, Device uint16
	Revision       uint8
	Class          uint32
	// HeaderType is the layout (0 endpoint, 1 bridge, 2 CardBus), the
	// multi-function bit cleared.
	HeaderType uint8
	// Caps and ExtCaps are the capabilities in list order; empty when
	// their region was not readable (see Space).
	Caps, ExtCaps []Cap
}

// Parse parses a config file's bytes. The error is ErrTruncated for fewer
// than 64 bytes (and the Config is nil), or names the first malformed
// list pointer (the Config then holds what came before it).
func Parse(b []byte) (*Config, error) {
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncated, len(b))
	}
	if len(b) > ExtendedSize {
		b = b[:ExtendedSize]
	}
	c := &Config{b: b}
	switch {
	case len(b) >= ExtendedSize:
		c.Space = SpaceExtended
	case len(b) >= StandardSize:
		c.Space = SpaceStandard
	default:
		c.Space = SpaceHeader
	}
	c.Vendor = binary.LittleEndian.Uint16(b[offVendor:])
	c.Device = binary.LittleEndian.Uint16(b[offDevice:])
	c.Revision = b[offRevision]
	c.Class = uint32(b[offRevision+1]) | uint32(b[offRevision+2])<<8 | uint32(b[offRevision+3])<<16
	c.HeaderType = b[offHeaderType] & 0x7f
	if c.Space == SpaceHeader {
		return c, nil
	}
	var errs []error
	if err := c.walkStandard(); err != nil {
		errs = append(errs, err)
	}
	if c.Space == SpaceExtended {
		if err := c.walkExtended(); err != nil {
			errs = append(errs, err)
		}
	}
	return c, errors.Join(errs...)
}

// walkStandard follows the list from 0x34: each entry is an ID byte and a
// next-pointer byte, dword aligned, inside 0x40..0xff.
func (c *Config) walkStandard() error {
	if binary.LittleEndian.Uint16(c.b[offStatus:])&statusCapList == 0 {
		return nil
	}
	var seen [StandardSize / 4]bool
	p := int(c.b[offCapPtr]) &^ 3
	for p != 0 {
		if p < HeaderSize || p+2 > StandardSize {
			return fmt.Errorf("capability pointer %#x outside 0x40..0xff", p)
		}
		if seen[p/4] {
			return fmt.Errorf("capability list loops back to %#x", p)
		}
		seen[p/4] = true
		c.Caps = append(c.Caps, Cap{ID: uint16(c.b[p]), Offset: p})
		p = int(c.b[p+1]) &^ 3
	}
	return nil
}

// walkExtended follows the list from 0x100: each header is a dword of ID
// (15:0), version (19:16) and next offset (31:20). A header of 0 (no
// extended capabilities) or all ones (the device did not answer) ends it.
func (c *Config) walkExtended() error {
	var seen [ExtendedSize / 4]bool
	p := StandardSize
	for {
		if p < StandardSize || p+4 > ExtendedSize {
			return fmt.Errorf("extended capability pointer %#x outside 0x100..0xfff", p)
		}
		if seen[p/4] {
			return fmt.Errorf("extended capability list loops back to %#x", p)
		}
		seen[p/4] = true
		h := binary.LittleEndian.Uint32(c.b[p:])
		if h == 0 || h == 0xffffffff {
			return nil
		}
		c.ExtCaps = append(c.ExtCaps, Cap{ID: uint16(h), Version: uint8(h>>16) & 0xf, Offset: p})
		next := int(h>>20) &^ 3
		if next == 0 {
			return nil
		}
		p = next
	}
}

// Cap returns the offset of the first standard capability id.
func (c *Config) Cap(id uint8) (int, bool) {
	for _, k := range c.Caps {
		if k.ID == uint16(id) {
			return k.Offset, true
		}
	}
	return 0, false
}

// ExtCap returns the offset of the first extended capability id.
func (c *Config) ExtCap(id uint16) (int, bool) {
	for _, k := range c.ExtCaps {
		if k.ID == id {
			return k.Offset, true
		}
	}
	return 0, false
}

// u16 reads a register, false when it lies past the bytes read.
func (c *Config) u16(off int) (uint16, bool) {
	if off < 0 || off+2 > len(c.b) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(c.b[off:]), true
}

func (c *Config) u32(off int) (uint32, bool) {
	if off < 0 || off+4 > len(c.b) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(c.b[off:]), true
}
