// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pcicfg

import "strings"

// PortType is the PCI Express Capabilities register's device/port type.
type PortType uint8

// The device/port types (PCI Express Base Specification 7.5.3.2).
const (
	Endpoint       PortType = 0x0
	LegacyEndpoint PortType = 0x1
	RootPort       PortType = 0x4
	UpstreamPort   PortType = 0x5
	DownstreamPort PortType = 0x6
	PCIeToPCI      PortType = 0x7
	PCIToPCIe      PortType = 0x8
	RCEndpoint     PortType = 0x9
	RCEventColl    PortType = 0xa
)

func (t PortType) String() string {
	switch t {
	case Endpoint:
		return "Endpoint"
	case LegacyEndpoint:
		return "Legacy Endpoint"
	case RootPort:
		return "Root Port"
	case UpstreamPort:
		return "Upstream Port"
	case DownstreamPort:
		return "Downstream Port"
	case PCIeToPCI:
		return "PCI-Express to PCI/PCI-X Bridge"
	case PCIToPCIe:
		return "PCI/PCI-X to PCI-Express Bridge"
	case RCEndpoint:
		return "Root Complex Integrated Endpoint"
	case RCEventColl:
		return "Root Complex Event Collector"
	}
	return "Unknown type"
}

// Express is the PCI Express capability's registers read here.
type Express struct {
	Version uint8
	Type    PortType
	// Slot is the Slot Implemented bit (a port with a slot below it).
	Slot bool
	// MaxPayloadSupported, MaxPayload and MaxReadRequest are in bytes
	// (DevCap bits 2:0, DevCtl bits 7:5 and 14:12: 128 << value).
	MaxPayloadSupported, MaxPayload, MaxReadRequest int
	// LinkCapSpeed, LinkCapWidth, LinkSpeed and LinkWidth are the encoded
	// LnkCap/LnkSta speed (1 = 2.5 GT/s ... 6 = 64 GT/s) and lanes.
	LinkCapSpeed, LinkCapWidth, LinkSpeed, LinkWidth int
}

// Express reads the PCI Express capability; ok is false when the function
// has none in the bytes read (check Space before calling it absent).
func (c *Config) Express() (Express, bool) {
	off, ok := c.Cap(CapExpress)
	if !ok {
		return Express{}, false
	}
	flags, ok1 := c.u16(off + 0x02)
	devCap, ok2 := c.u32(off + 0x04)
	devCtl, ok3 := c.u16(off + 0x08)
	lnkCap, ok4 := c.u32(off + 0x0c)
	lnkSta, ok5 := c.u16(off + 0x12)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return Express{}, false
	}
	return Express{
		Version:             uint8(flags & 0xf),
		Type:                PortType(flags>>4) & 0xf,
		Slot:                flags&(1<<8) != 0,
		MaxPayloadSupported: 128 << (devCap & 0x7),
		MaxPayload:          128 << ((devCtl >> 5) & 0x7),
		MaxReadRequest:      128 << ((devCtl >> 12) & 0x7),
		LinkCapSpeed:        int(lnkCap & 0xf),
		LinkCapWidth:        int(lnkCap>>4) & 0x3f,
		LinkSpeed:           int(lnkSta & 0xf),
		LinkWidth:           int(lnkSta>>4) & 0x3f,
	}, true
}

// ACS control and capability bits, in register order, with the names
// lspci prints for them.
const (
	ACSSrcValid    uint16 = 1 << 0 // SV: source validation
	ACSTransBlk    uint16 = 1 << 1 // TB: translation blocking
	ACSReqRedir    uint16 = 1 << 2 // RR: P2P request redirect
	ACSCmpltRedir  uint16 = 1 << 3 // CR: P2P completion redirect
	ACSUpstreamFwd uint16 = 1 << 4 // UF: upstream forwarding
	ACSEgressCtrl  uint16 = 1 << 5 // EC: P2P egress control
	ACSDirectTrans uint16 = 1 << 6 // DT: direct translated P2P
)

// ACSBit is one ACS bit and the name lspci prints for it.
type ACSBit struct {
	Bit  uint16
	Name string
}

// ACSBits returns the seven ACS bits in register order.
func ACSBits() []ACSBit {
	return []ACSBit{
		{ACSSrcValid, "SrcValid"}, {ACSTransBlk, "TransBlk"}, {ACSReqRedir, "ReqRedir"}, {ACSCmpltRedir, "CmpltRedir"},
		{ACSUpstreamFwd, "UpstreamFwd"}, {ACSEgressCtrl, "EgressCtrl"}, {ACSDirectTrans, "DirectTrans"},
	}
}

// ACS is the Access Control Services capability: what the port can do
// (Cap) and what is on (Ctl), offset +4 and +6.
type ACS struct {
	Offset   int
	Cap, Ctl uint16
}

// Redirects reports whether the port sends peer-to-peer requests or
// completions up to the root complex instead of across the switch (RR or
// CR on), or blocks them by egress control: what breaks or slows
// GPUDirect between a GPU and an HCA below one switch.
func (a ACS) Redirects() bool {
	return a.Ctl&(ACSReqRedir|ACSCmpltRedir|ACSEgressCtrl) != 0
}

// Decode prints bits as lspci -vvv does ("SrcValid+ TransBlk- ...").
func Decode(bits uint16) string {
	bitsList := ACSBits()
	parts := make([]string, len(bitsList))
	for i, b := range bitsList {
		mark := "-"
		if bits&b.Bit != 0 {
			mark = "+"
		}
		parts[i] = b.Name + mark
	}
	return strings.Join(parts, " ")
}

// ACS reads the ACS capability; ok is false when the function has none in
// the bytes read.
func (c *Config) ACS() (ACS, bool) {
	off, ok := c.ExtCap(ExtCapACS)
	if !ok {
		return ACS{}, false
	}
	capb, ok1 := c.u16(off + 4)
	ctl, ok2 := c.u16(off + 6)
	if !ok1 || !ok2 {
		return ACS{}, false
	}
	return ACS{Offset: off, Cap: capb, Ctl: ctl}, true
}

// ATS is the Address Translation Services capability.
type ATS struct {
	Offset int
	// Enabled is the control register's Enable bit (15).
	Enabled bool
}

// ATS reads the ATS capability; ok is false when the function has none in
// the bytes read.
func (c *Config) ATS() (ATS, bool) {
	off, ok := c.ExtCap(ExtCapATS)
	if !ok {
		return ATS{}, false
	}
	ctl, ok := c.u16(off + 6)
	if !ok {
		return ATS{}, false
	}
	return ATS{Offset: off, Enabled: ctl&(1<<15) != 0}, true
}
