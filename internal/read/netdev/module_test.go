// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"errors"
	"fmt"
	"math"
	"syscall"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sff"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sff/sfftest"
)

// fakeModuleKernel answers MODULE_EEPROM_GET requests as
// net/ethtool/eeprom.c parses them (eeprom_parse_request: every
// attribute required, no read across offset 128, no lower half of a page
// other than 0, at most 128 bytes) from a recorded memory, and replies
// with the DATA attribute as eeprom_fill_reply does.
type fakeModuleKernel struct {
	t    *testing.T
	name string
	mem  *sfftest.Memory
}

func (k *fakeModuleKernel) exchange(req []byte) ([]byte, error) {
	ad, err := netlink.NewAttributeDecoder(req)
	if err != nil {
		k.t.Fatal(err)
	}
	var name string
	got := map[uint16]uint32{}
	for ad.Next() {
		switch ad.Type() {
		case moduleAttrHeader:
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				for nd.Next() {
					if nd.Type() == unix.ETHTOOL_A_HEADER_DEV_NAME {
						name = nd.String()
					}
				}
				return nil
			})
		case moduleAttrOffset, moduleAttrLength:
			got[ad.Type()] = ad.Uint32()
		case moduleAttrPage, moduleAttrBank, moduleAttrI2CAddr:
			got[ad.Type()] = uint32(ad.Uint8())
		}
	}
	if err := ad.Err(); err != nil {
		k.t.Fatal(err)
	}
	for _, a := range []uint16{moduleAttrOffset, moduleAttrLength, moduleAttrPage, moduleAttrI2CAddr} {
		if _, ok := got[a]; !ok {
			return nil, syscall.EINVAL
		}
	}
	off, n, page := got[moduleAttrOffset], got[moduleAttrLength], got[moduleAttrPage]
	if name != k.name || n < 1 || n > 128 || page != 0 && off < 128 || off < 128 && off+n > 128 || off+n > 256 || got[moduleAttrBank] != 0 {
		k.t.Errorf("request the kernel refuses: %s %v", name, got)
		return nil, syscall.EINVAL
	}
	data, err := k.mem.Read(uint8(got[moduleAttrI2CAddr]), uint8(page), int(off), int(n))
	if err != nil {
		// A page the module does not have: mlx5 fails the MCIA read.
		return nil, syscall.EIO
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(moduleAttrHeader, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 7)
		nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, name)
		return nil
	})
	ae.Bytes(moduleAttrData, data)
	return ae.Encode()
}

// The recorded DR8 memory through the netlink request and reply
// encoding: five half-page reads, the lanes as sff decodes them.
func TestModuleReaderRecorded(t *testing.T) {
	mem := sfftest.Load(t, "../sff/testdata/cmis-osfp-dr8-juniper-qfx5240.txt", false)
	k := &fakeModuleKernel{t: t, name: "enp59s0f0np0", mem: mem}
	m, err := sff.Decode(moduleReader{name: k.name, exchange: k.exchange})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Lanes) != 8 || !m.Lanes[0].RxPower.OK || math.Abs(m.Lanes[0].RxPower.V-1.6946e-3) > 1e-12 || m.Vendor != "JUNIPER-1G1" {
		t.Errorf("%+v", m)
	}
	if len(mem.Reads) != 5 {
		t.Errorf("%d reads, want 5 (lower, 00h, 01h, 02h, 11h)", len(mem.Reads))
	}
	me, err := moduleResult(k.name, m, nil)
	if err != nil || me.Reason != "" || me.Module != m {
		t.Errorf("%+v, %v", me, err)
	}
}

func TestModuleRequestBounds(t *testing.T) {
	for _, tc := range []struct {
		page         uint8
		offset, size int
		ok           bool
	}{
		{0, 0, 128, true}, {0, 128, 128, true}, {0x11, 128, 128, true},
		{0, 0, 129, false}, {0, 64, 128, false}, {1, 0, 128, false}, {0, 200, 100, false}, {0, 0, 0, false},
	} {
		_, err := encodeModuleRequest("eth0", sff.AddrA0, tc.page, tc.offset, tc.size)
		if (err == nil) != tc.ok {
			t.Errorf("page %d offset %d length %d: %v", tc.page, tc.offset, tc.size, err)
		}
	}
}

func TestDecodeModuleEEPROMMalformed(t *testing.T) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(moduleAttrOffset, 0)
	noData, _ := ae.Encode()
	for name, b := range map[string][]byte{"no data": noData, "overrun": {0xff, 0x00, 0x07, 0x00}} {
		if _, err := DecodeModuleEEPROM(b); !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: %v, want ErrBadReply", name, err)
		}
	}
}

// What the kernel answers maps to a bounded reason; only the unexpected
// is an error.
func TestModuleResultReasons(t *testing.T) {
	for err, want := range map[error]string{
		syscall.EPERM: ModuleReasonPermission, unix.EOPNOTSUPP: ModuleReasonUnsupported,
		errNoEthtoolNetlink: ModuleReasonUnsupported, syscall.EIO: ModuleReasonIO,
		fmt.Errorf("x: %w", sff.ErrUnknownIdentifier): ModuleReasonUnknown,
		sff.ErrTruncated: ModuleReasonError, ErrBadReply: ModuleReasonError,
	} {
		me, gotErr := moduleResult("eth0", nil, fmt.Errorf("page: %w", err))
		if me.Reason != want || (gotErr != nil) != (want == ModuleReasonError) {
			t.Errorf("%v: reason %q, error %v; want %q", err, me.Reason, gotErr, want)
		}
	}
	// An empty cage on mlx5 answers the lower page with EIO.
	k := &fakeModuleKernel{t: t, name: "eth0", mem: &sfftest.Memory{Halves: map[sfftest.Half][]byte{}}}
	m, err := sff.Decode(moduleReader{name: "eth0", exchange: k.exchange})
	if me, _ := moduleResult("eth0", m, err); me.Reason != ModuleReasonIO || me.Module != nil {
		t.Errorf("empty cage: %+v", me)
	}
}

// On a real kernel a veth has no module memory: the reason, no error.
// As root in a new user and network namespace the request passes the
// CAP_NET_ADMIN check, so the answer is the driver's EOPNOTSUPP.
func TestReadModuleVeth(t *testing.T) {
	if !testenv.InChild(t.Name()) {
		t.Log(testenv.InNamespaces(t, t.Name(), "-n"))
		return
	}
	testenv.Run(t, "ip", "link", "add", "vm0", "type", "veth", "peer", "name", "vm1")
	me, err := readModule("vm0")
	if err != nil || me.Reason != ModuleReasonUnsupported || me.Module != nil {
		t.Fatalf("veth: %+v, %v; want reason unsupported", me, err)
	}
}
