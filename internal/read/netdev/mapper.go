// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"sort"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// Mapper answers the two questions whose answer lives in sysfs classes other
// than net and infiniband: which RDMA devices sit on a PCI function, and
// which /dev/infiniband character devices belong to an RDMA device.
//
// Two implementations give the same answers: SysfsMapper reads through a
// hostfs root (any --path.sysfs, fixture trees), LiveMapper asks
// github.com/Mellanox/rdmamap, which only knows the live /sys.
type Mapper interface {
	// DevicesForPCI returns the RDMA devices of a PCI function
	// ("0000:1a:00.0"), sorted.
	DevicesForPCI(bdf string) []string
	// CharDevices returns the character devices of an RDMA device
	// ("/dev/infiniband/uverbs0", "/dev/infiniband/umad0", ...), sorted.
	CharDevices(device string) []string
}

// DevDir is where the kernel's RDMA character devices appear.
const DevDir = "/dev/infiniband/"

// charClasses are the sysfs classes whose entries are RDMA character
// devices, with the entry name prefixes rdmamap recognises.
var charClasses = []struct{ class, prefix string }{
	{"class/infiniband_cm", "ucm"}, // removed in Linux 5.3; old kernels only
	{"class/infiniband_mad", "issm"},
	{"class/infiniband_mad", "umad"},
	{"class/infiniband_verbs", "uverbs"},
}

// SysfsMapper reads the mapping through a hostfs root.
type SysfsMapper struct {
	Sys hostfs.FS
}

// DevicesForPCI lists bus/pci/devices/<bdf>/infiniband.
func (m SysfsMapper) DevicesForPCI(bdf string) []string {
	entries, err := m.Sys.ReadDir("bus/pci/devices/" + bdf + "/infiniband")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// CharDevices lists every entry of the RDMA character device classes whose
// ibdev names the device. Unlike rdmamap, which stops at the first entry of
// each kind, it returns one umad/issm per port.
func (m SysfsMapper) CharDevices(device string) []string { return m.charIndex()[device] }

// charIndex maps every RDMA device to its character devices in one pass
// over the classes (Read uses it instead of one pass per device).
func (m SysfsMapper) charIndex() map[string][]string {
	idx := map[string][]string{}
	for _, c := range charClasses {
		entries, err := m.Sys.ReadDir(c.class)
		if err != nil {
			continue // class absent: module not loaded, or an old kernel
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), c.prefix) {
				continue
			}
			b, err := m.Sys.ReadFile(c.class + "/" + e.Name() + "/ibdev")
			if err != nil {
				continue // abi_version, or an entry going away
			}
			dev := strings.TrimSuffix(string(b), "\n")
			idx[dev] = append(idx[dev], DevDir+e.Name())
		}
	}
	for _, paths := range idx {
		sort.Strings(paths)
	}
	return idx
}
