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

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
)

// BusDir is the PCI bus's function directory below the sysfs root.
const BusDir = "bus/pci/devices"

// MellanoxVendor is the PCI vendor id of Mellanox, now NVIDIA Networking
// (ConnectX, BlueField): `lspci -d 15b3:`.
const MellanoxVendor = 0x15b3

// NetworkClass is the PCI base class of network controllers (0x02xxxx:
// Ethernet 0x0200, InfiniBand 0x0207, ...).
const NetworkClass = 0x02

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

// ReadNetworkFunctions lists the network-class functions of one vendor on
// the PCI bus, with the driver bound to each: the answer to "is the HCA on
// the bus, and who owns it" when no RDMA device shows up. Functions of other
// vendors are not read beyond their vendor file. A function whose files
// cannot be read or parsed is an error and left out; the others are kept.
func ReadNetworkFunctions(sys hostfs.FS, vendor uint16) ([]BusFunction, error) {
	entries, err := sys.ReadDir(BusDir)
	if err != nil {
		return nil, err
	}
	var out []BusFunction
	var errs []error
	for _, e := range entries {
		dir := BusDir + "/" + e.Name()
		v, err := readHex(sys, dir+"/vendor", 0xffff)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if uint16(v) != vendor {
			continue
		}
		f := BusFunction{Address: e.Name(), Vendor: uint16(v)}
		d, err := readHex(sys, dir+"/device", 0xffff)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := readHex(sys, dir+"/class", 0xffffff)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c>>16 != NetworkClass {
			continue
		}
		f.Device, f.Class = uint16(d), uint32(c)
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
