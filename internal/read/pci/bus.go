// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// BusDir is the PCI bus's function directory below the sysfs root.
const BusDir = "bus/pci/devices"

// MellanoxVendor is the PCI vendor id of Mellanox, now NVIDIA Networking
// (ConnectX, BlueField): `lspci -d 15b3:`.
const MellanoxVendor = 0x15b3

// amazonVendor is the PCI vendor id of Amazon (Annapurna Labs); EFA
// functions are its devices 0xefa0-0xefa3 (drivers/infiniband/hw/efa,
// efa_pci_tbl), the ENA Ethernet functions of the same vendor are not RDMA.
const amazonVendor = 0x1d0f

// NetworkClass is the PCI base class of network controllers (0x02xxxx:
// Ethernet 0x0200, InfiniBand 0x0207, ...).
const NetworkClass = 0x02

// The PCI class codes (base class and subclass, the upper 16 bits of the
// class file) that only RDMA hardware carries, whoever made it.
const (
	classInfiniBand       = 0x0207 // network controller: InfiniBand (ConnectX VPI, QLogic)
	classFabric           = 0x0208 // network controller: fabric (Omni-Path HFI)
	classSerialInfiniBand = 0x0c06 // serial bus controller: InfiniBand (InfiniHost and older HCAs)
)

// rdmaDrivers are the kernel drivers that bind only RDMA hardware: a
// function held by one of them is an RDMA function whatever its class.
// The drivers of Ethernet NICs whose RDMA is an optional feature (ice,
// i40e, bnxt_en, cxgb4, qede, mana) are not here: such a NIC is mostly
// bought for Ethernet, and calling every one of them a missing RDMA device
// would page every plain server (diagnose.expected_devices asks for RDMA
// where it is wanted).
var rdmaDrivers = map[string]bool{
	"mlx4_core": true, "mlx5_core": true, "efa": true, "hfi1": true, "ib_qib": true, "ib_mthca": true,
}

// BusFunction is one PCI function of the bus, whether or not an RDMA
// device sits on it.
type BusFunction struct {
	Address string
	Vendor  uint16
	Device  uint16
	// Class is the 24-bit class code (0x020700: InfiniBand controller).
	Class uint32
	// Driver is the kernel driver bound to the function (mlx5_core,
	// vfio-pci), "" when none is.
	Driver string
}

// ID is the function's "vendor:device" as lspci -n prints it.
func (f BusFunction) ID() string { return fmt.Sprintf("%04x:%04x", f.Vendor, f.Device) }

// RDMACapable reports whether the function is RDMA hardware of any vendor:
// an InfiniBand or fabric class, a Mellanox/NVIDIA network function
// (every ConnectX and BlueField does RDMA), an AWS EFA, or a function held
// by a driver that binds only RDMA hardware. A host with such a function
// and no RDMA device has a driver problem; a host without one has no RDMA
// to judge.
func (f BusFunction) RDMACapable() bool {
	switch f.Class >> 8 {
	case classInfiniBand, classFabric, classSerialInfiniBand:
		return true
	}
	switch {
	case f.Vendor == MellanoxVendor && f.Class>>16 == NetworkClass:
		return true
	case f.Vendor == amazonVendor && f.Device&0xfff0 == 0xefa0:
		return true
	}
	return rdmaDrivers[f.Driver]
}

// ReadNetworkFunctions lists the network functions of the PCI bus (network
// class, and the serial-bus InfiniBand class of the oldest HCAs) of every
// vendor, with the driver bound to each: the answer to "is RDMA hardware
// on the bus, and who owns it" when no RDMA device shows up. Other
// functions are not read beyond their class file. A function whose files
// cannot be read or parsed is an error and left out; the others are kept.
func ReadNetworkFunctions(sys hostfs.FS) ([]BusFunction, error) {
	entries, err := sys.ReadDir(BusDir)
	if err != nil {
		return nil, err
	}
	var out []BusFunction
	var errs []error
	for _, e := range entries {
		dir := BusDir + "/" + e.Name()
		c, err := readHex(sys, dir+"/class", 0xffffff)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c>>16 != NetworkClass && c>>8 != classSerialInfiniBand {
			continue
		}
		v, err := readHex(sys, dir+"/vendor", 0xffff)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := readHex(sys, dir+"/device", 0xffff)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f := BusFunction{Address: e.Name(), Vendor: uint16(v), Device: uint16(d), Class: uint32(c)}
		if link, err := sys.ReadLink(dir + "/driver"); err == nil {
			f.Driver = path.Base(link)
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		out = append(out, f)
	}
	return out, errors.Join(errs...)
}

// readHex reads a sysfs id file no larger than max.
func readHex(sys hostfs.FS, name string, max uint64) (uint64, error) {
	b, err := sys.ReadFile(name)
	if err != nil {
		return 0, err
	}
	v, err := ParseHexID(string(b), max)
	if err != nil {
		return 0, &ParseError{Path: name, Err: err}
	}
	return v, nil
}

// ParseHexID parses a PCI id file as sysfs prints it ("0x15b3\n",
// "0x020700\n"): 0x and hex digits, no larger than max.
func ParseHexID(s string, max uint64) (uint64, error) {
	s = strings.TrimSpace(s)
	hex, ok := strings.CutPrefix(s, "0x")
	v, err := strconv.ParseUint(hex, 16, 64)
	if !ok || err != nil || v > max {
		return 0, fmt.Errorf("%q is not a hex id up to %#x", s, max)
	}
	return v, nil
}
