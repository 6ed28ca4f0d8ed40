// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pcicfg

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// space is a config space under construction.
type space []byte

func newSpace(n int) space { return make(space, n) }

func (s space) u16(off int, v uint16) space { binary.LittleEndian.PutUint16(s[off:], v); return s }
func (s space) u32(off int, v uint32) space { binary.LittleEndian.PutUint32(s[off:], v); return s }

// pcieDownstreamPort is 17:01.0 of the recorded H100 host as lspci -vvv
// decodes it (fixtures/recorded/lspci-vvv-h100-8gpu-cx7-pex890xx-gpud.txt):
// Broadcom PEX890xx 1000:c030 rev b0, a PCI bridge; Express (v2)
// Downstream Port (Slot+) at [68], LnkCap Speed 32GT/s Width x16, LnkSta
// 32GT/s x16; ACS at [170 v1], ACSCap SrcValid+ TransBlk+ ReqRedir+
// CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+, with ctl as given.
// 0x100 holds a Null capability pointing at 0x170, as the excerpt does not
// say what is there.
func pcieDownstreamPort(ctl uint16) space {
	s := newSpace(ExtendedSize)
	s.u16(0, 0x1000).u16(2, 0xc030).u16(offStatus, statusCapList)
	s[offRevision] = 0xb0
	s[0x09], s[0x0a], s[0x0b] = 0x00, 0x04, 0x06
	s[offHeaderType] = 1
	s[offCapPtr] = 0x68
	s[0x68], s[0x69] = CapExpress, 0
	s.u16(0x68+2, 2|uint16(DownstreamPort)<<4|1<<8)
	s.u32(0x68+0x0c, 5|16<<4|1<<24)
	s.u16(0x68+0x12, 5|16<<4)
	s.u32(0x100, 0x170<<20)
	s.u32(0x170, uint32(ExtCapACS)|1<<16)
	s.u16(0x174, 0x005f).u16(0x176, ctl)
	return s
}

func TestParseDownstreamPort(t *testing.T) {
	c, err := Parse(pcieDownstreamPort(0x001d))
	if err != nil {
		t.Fatal(err)
	}
	if c.Space != SpaceExtended || c.Vendor != 0x1000 || c.Device != 0xc030 || c.Class != 0x060400 || c.HeaderType != 1 || c.Revision != 0xb0 {
		t.Fatalf("header: %+v", c)
	}
	e, ok := c.Express()
	if !ok || e.Type != DownstreamPort || !e.Slot || e.Version != 2 || e.LinkCapSpeed != 5 || e.LinkCapWidth != 16 || e.LinkWidth != 16 {
		t.Fatalf("express: %+v %v", e, ok)
	}
	a, ok := c.ACS()
	if !ok || a.Offset != 0x170 {
		t.Fatalf("acs: %+v %v", a, ok)
	}
	if got, want := Decode(a.Cap), "SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+"; got != want {
		t.Errorf("ACSCap %q, want %q", got, want)
	}
	// NCCL #304's broken state: ACSCtl 0x001d.
	if got, want := Decode(a.Ctl), "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"; got != want {
		t.Errorf("ACSCtl %q, want %q", got, want)
	}
	if !a.Redirects() {
		t.Error("RR and CR on: Redirects false")
	}
	if _, ok := c.ATS(); ok {
		t.Error("no ATS capability, ATS ok")
	}
	c, _ = Parse(pcieDownstreamPort(0))
	if a, _ := c.ACS(); a.Redirects() {
		t.Error("ACSCtl 0: Redirects true")
	}
	// SrcValid alone (NCCL #606's AMD switch after the BIOS change) does
	// not redirect.
	c, _ = Parse(pcieDownstreamPort(ACSSrcValid))
	if a, _ := c.ACS(); a.Redirects() {
		t.Error("SrcValid only: Redirects true")
	}
}

func TestParseSpaces(t *testing.T) {
	full := pcieDownstreamPort(0x001d)
	for _, tc := range []struct {
		n        int
		space    Space
		caps     int
		extCaps  int
		wantErr  error
		wantNone bool
	}{
		{n: 0, wantErr: ErrTruncated, wantNone: true},
		{n: 63, wantErr: ErrTruncated, wantNone: true},
		{n: 64, space: SpaceHeader},
		{n: 255, space: SpaceHeader},
		{n: 256, space: SpaceStandard, caps: 1},
		{n: 4095, space: SpaceStandard, caps: 1},
		{n: 4096, space: SpaceExtended, caps: 1, extCaps: 2},
		{n: 8192, space: SpaceExtended, caps: 1, extCaps: 2},
	} {
		b := make([]byte, tc.n)
		copy(b, full)
		c, err := Parse(b)
		if !errors.Is(err, tc.wantErr) || (c == nil) != tc.wantNone {
			t.Fatalf("%d bytes: %v, %v", tc.n, c, err)
		}
		if c == nil {
			continue
		}
		if c.Space != tc.space || len(c.Caps) != tc.caps || len(c.ExtCaps) != tc.extCaps {
			t.Errorf("%d bytes: space %v, %d caps, %d ext caps", tc.n, c.Space, len(c.Caps), len(c.ExtCaps))
		}
		// The header is always there: an unprivileged reader still
		// learns the IDs.
		if c.Vendor != 0x1000 {
			t.Errorf("%d bytes: vendor %#x", tc.n, c.Vendor)
		}
		if _, ok := c.ACS(); ok != (tc.space == SpaceExtended) {
			t.Errorf("%d bytes: ACS ok %v", tc.n, ok)
		}
	}
}

func TestParseMalformedLists(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(s space)
		caps    int
		extCaps int
		errText string
	}{
		{"standard list loops", func(s space) { s[0x69] = 0x68 }, 1, 2, "loops back to 0x68"},
		{"standard pointer into the header", func(s space) { s[offCapPtr] = 0x20 }, 0, 2, "outside 0x40..0xff"},
		{"standard next into the header", func(s space) { s[0x69] = 0x10 }, 1, 2, "outside 0x40..0xff"},
		{"extended list loops", func(s space) { s.u32(0x170, uint32(ExtCapACS)|1<<16|0x100<<20) }, 1, 2, "loops back to 0x100"},
		{"extended next below 0x100", func(s space) { s.u32(0x170, uint32(ExtCapACS)|1<<16|0x40<<20) }, 1, 2, "outside 0x100..0xfff"},
		{"no list bit", func(s space) { s.u16(offStatus, 0) }, 0, 2, ""},
		{"device not answering", func(s space) { s.u32(0x100, 0xffffffff) }, 1, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pcieDownstreamPort(0)
			tc.edit(s)
			c, err := Parse(s)
			if c == nil {
				t.Fatalf("nil config: %v", err)
			}
			if tc.errText == "" && err != nil || tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)) {
				t.Errorf("error %v, want %q", err, tc.errText)
			}
			if len(c.Caps) != tc.caps || len(c.ExtCaps) != tc.extCaps {
				t.Errorf("%d caps, %d ext caps; want %d, %d", len(c.Caps), len(c.ExtCaps), tc.caps, tc.extCaps)
			}
		})
	}
}

func TestExpressRegisters(t *testing.T) {
	s := pcieDownstreamPort(0)
	// DevCap MPS supported 512 (2); DevCtl MPS 256 (1), MRRS 4096 (5).
	s.u32(0x68+4, 2)
	s.u16(0x68+8, 1<<5|5<<12)
	c, _ := Parse(s)
	e, ok := c.Express()
	if !ok || e.MaxPayloadSupported != 512 || e.MaxPayload != 256 || e.MaxReadRequest != 4096 {
		t.Fatalf("%+v", e)
	}
	if RootPort.String() != "Root Port" || PortType(0xf).String() != "Unknown type" {
		t.Error("port type names")
	}
}

func TestATS(t *testing.T) {
	s := pcieDownstreamPort(0)
	s.u32(0x170, uint32(ExtCapACS)|1<<16|0x200<<20)
	s.u32(0x200, uint32(ExtCapATS)|1<<16)
	s.u16(0x206, 1<<15)
	c, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := c.ATS()
	if !ok || !a.Enabled || a.Offset != 0x200 {
		t.Fatalf("%+v %v", a, ok)
	}
}

// FuzzParse: any bytes parse without a panic, and what is found lies
// inside the bytes, once each.
func FuzzParse(f *testing.F) {
	f.Add([]byte(pcieDownstreamPort(0x001d)))
	f.Add(make([]byte, 64))
	s := pcieDownstreamPort(0)
	s[0x69] = 0x68
	f.Add([]byte(s))
	f.Add([]byte(pcieDownstreamPort(0))[:300])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if c == nil {
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("nil config with %v", err)
			}
			return
		}
		seen := map[int]bool{}
		for _, k := range append(append([]Cap{}, c.Caps...), c.ExtCaps...) {
			if k.Offset < HeaderSize || k.Offset+2 > len(b) || seen[k.Offset] {
				t.Fatalf("capability at %#x in %d bytes (seen %v)", k.Offset, len(b), seen[k.Offset])
			}
			seen[k.Offset] = true
		}
		c.Express()
		c.ACS()
		c.ATS()
	})
}
