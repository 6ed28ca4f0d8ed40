// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pci

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pcicfg"
)

// ConfigFile is the config space file of a PCI function's sysfs directory.
const ConfigFile = "config"

// Payload is what the PCI Express capability says of the function's
// transaction sizes: the largest TLP payload it can and may send, and the
// largest read it may request. They live past the first 64 bytes of the
// config space, which sysfs gives only to root (CAP_SYS_ADMIN).
type Payload struct {
	// Read is set when the config file was read and parsed.
	Read bool
	// NeedsRoot is set when the file held only the 64-byte header an
	// unprivileged reader gets: the sizes are absent, not unknown to the
	// device.
	NeedsRoot bool
	// MaxPayloadSupported is DevCap's Max_Payload_Size Supported;
	// MaxPayload and MaxReadRequest DevCtl's Max_Payload_Size and
	// Max_Read_Request_Size, in bytes. Absent without the privilege or the
	// PCI Express capability.
	MaxPayloadSupported, MaxPayload, MaxReadRequest Opt[int]
}

// ReadPayload reads the transaction sizes from the config file in dir (a
// function's directory below the sysfs root). A missing file is no error
// (a trimmed tree; the kernel always has one): Read stays false. A
// malformed capability list is an error, but sizes found before the fault
// are kept.
func ReadPayload(sys hostfs.FS, dir string) (Payload, error) {
	name := dir + "/" + ConfigFile
	b, err := sys.ReadFile(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Payload{}, nil
		}
		return Payload{}, err
	}
	c, perr := pcicfg.Parse(b)
	if c == nil {
		return Payload{}, &ParseError{Path: name, Err: perr}
	}
	p := Payload{Read: true, NeedsRoot: c.Space == pcicfg.SpaceHeader}
	if e, ok := c.Express(); ok {
		p.MaxPayloadSupported = some(e.MaxPayloadSupported)
		p.MaxPayload = some(e.MaxPayload)
		p.MaxReadRequest = some(e.MaxReadRequest)
	}
	if perr != nil {
		return p, &ParseError{Path: name, Err: perr}
	}
	return p, nil
}

// String is DevCtl as lspci -vvv prints its sizes.
func (p Payload) String() string {
	if !p.MaxPayload.OK || !p.MaxReadRequest.OK {
		return "unknown"
	}
	return fmt.Sprintf("MaxPayload %d bytes, MaxReadReq %d bytes", p.MaxPayload.V, p.MaxReadRequest.V)
}
