// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/read/sff"
)

// ModuleEEPROM is what the transceiver memory of a netdev's port says
// (internal/read/sff), read page by page with ETHTOOL_MSG_MODULE_EEPROM_GET
// (Linux 5.13+; mlx5 since 5.14). The kernel allows that command only
// with CAP_NET_ADMIN (GENL_UNS_ADMIN_PERM in net/ethtool/netlink.c), and
// on mlx5 each page is a firmware access (MCIA register), so it is opt-in
// and read on the slow interval.
type ModuleEEPROM struct {
	// Module is the decoded memory; nil when nothing could be read. A
	// module whose optional pages failed keeps what was decoded.
	Module *sff.Module
	// Reason says why the memory was not (fully) read, one of the
	// ModuleReason constants; "" when it was.
	Reason string
}

// Why a module's memory was not read: a bounded set, the reason label.
const (
	// ModuleReasonPermission: no CAP_NET_ADMIN (EPERM).
	ModuleReasonPermission = "permission"
	// ModuleReasonUnsupported: the kernel (before 5.13) or the driver
	// cannot read a module's memory (EOPNOTSUPP): veth, bonds, VLANs.
	ModuleReasonUnsupported = "unsupported"
	// ModuleReasonIO: the driver could not read the module (EIO): an
	// empty cage on mlx5, or a module that does not answer.
	ModuleReasonIO = "io_error"
	// ModuleReasonUnknown: byte 0 names a module type sff does not
	// decode (or 0x00, which some drivers return for an empty cage).
	ModuleReasonUnknown = "unknown_identifier"
	// ModuleReasonError: anything else (a malformed reply or memory, an
	// unexpected errno); these are also collection errors.
	ModuleReasonError = "error"
)

// ETHTOOL_A_MODULE_EEPROM_* (include/uapi/linux/ethtool_netlink.h; x/sys/
// unix has only the command).
const (
	moduleAttrHeader  = 1
	moduleAttrOffset  = 2
	moduleAttrLength  = 3
	moduleAttrPage    = 4
	moduleAttrBank    = 5
	moduleAttrI2CAddr = 6
	moduleAttrData    = 7
)

// encodeModuleRequest encodes a MODULE_EEPROM_GET request for one read,
// bank 0: the kernel refuses (EINVAL) a read that crosses offset 128, is
// longer than 128 bytes, or asks the lower half of a page other than 0.
func encodeModuleRequest(name string, addr, page uint8, offset, length int) ([]byte, error) {
	if offset < 0 || length < 1 || length > sff.HalfPage || offset+length > 2*sff.HalfPage ||
		offset < sff.HalfPage && (page != 0 || offset+length > sff.HalfPage) {
		return nil, fmt.Errorf("module memory read of %d bytes at offset %d of page 0x%02x: not one half page", length, offset, page)
	}
	return encodeRequest(moduleAttrHeader, name, 0, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(moduleAttrOffset, uint32(offset))
		ae.Uint32(moduleAttrLength, uint32(length))
		ae.Uint8(moduleAttrPage, page)
		ae.Uint8(moduleAttrBank, 0)
		ae.Uint8(moduleAttrI2CAddr, addr)
	})
}

// DecodeModuleEEPROM decodes the attributes of a MODULE_EEPROM_GET reply:
// its data (as many bytes as the driver returned, which may be fewer than
// asked; sff checks the length).
func DecodeModuleEEPROM(b []byte) ([]byte, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	var data []byte
	found := false
	for ad.Next() {
		if ad.Type() == moduleAttrData {
			data, found = ad.Bytes(), true
		}
	}
	if err := ad.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: no module EEPROM data attribute", ErrBadReply)
	}
	return data, nil
}

// moduleReader is an sff.Reader over one netdev's MODULE_EEPROM_GET:
// exchange sends a request's attributes and returns the reply's.
type moduleReader struct {
	name     string
	exchange func(req []byte) ([]byte, error)
}

func (m moduleReader) Read(addr, page uint8, offset, length int) ([]byte, error) {
	req, err := encodeModuleRequest(m.name, addr, page, offset, length)
	if err != nil {
		return nil, err
	}
	reply, err := m.exchange(req)
	if err != nil {
		return nil, err
	}
	return DecodeModuleEEPROM(reply)
}

// readModule reads and decodes the module memory of a netdev of the
// running kernel. What cannot be read for a known reason (no privilege,
// no support, no module) is a Reason, not an error: the error is only
// for ModuleReasonError.
func readModule(name string) (*ModuleEEPROM, error) {
	q, err := dialEthtoolGenl()
	if err != nil {
		return moduleResult(name, nil, err)
	}
	defer q.Close()
	m, err := sff.Decode(moduleReader{name: name, exchange: func(req []byte) ([]byte, error) {
		return q.execute(unix.ETHTOOL_MSG_MODULE_EEPROM_GET, req)
	}})
	return moduleResult(name, m, err)
}

// moduleResult classifies what decoding a module's memory gave.
func moduleResult(name string, m *sff.Module, err error) (*ModuleEEPROM, error) {
	me := &ModuleEEPROM{Module: m}
	switch {
	case err == nil:
		return me, nil
	case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES):
		me.Reason = ModuleReasonPermission
	case unsupported(err):
		me.Reason = ModuleReasonUnsupported
	case errors.Is(err, syscall.EIO):
		me.Reason = ModuleReasonIO
	case errors.Is(err, sff.ErrUnknownIdentifier):
		me.Reason = ModuleReasonUnknown
	default:
		me.Reason = ModuleReasonError
		return me, fmt.Errorf("ethtool %s: module EEPROM: %w", name, err)
	}
	return me, nil
}
