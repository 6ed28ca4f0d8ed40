// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

// This is the only file that uses github.com/Mellanox/rdmamap.
//
// rdmamap reads the live /sys by fixed absolute paths (/sys/class/infiniband,
// /sys/class/infiniband_verbs, /sys/class/infiniband_mad,
// /sys/bus/pci/devices) and cannot take a root, so it is used only when
// --path.sysfs is the live /sys (see Live in the collector); every other
// root goes through SysfsMapper. It is tested by running it in a private
// mount namespace whose /sys is a fixture tree (rdmamap_test.go, and the
// e2e netdev test for the binary).
//
// Not used: GetRdmaDeviceForNetdevice, which asks the kernel over netlink
// (it would see the real kernel's links, not the tree below /sys) and maps
// IPoIB by node GUID, which is wrong for the second port of a dual-port
// HCA. RoCE netdevs are mapped through the GID tables instead, IPoIB
// netdevs through their PCI function and dev_port.

import (
	"sort"
	"strings"

	"github.com/Mellanox/rdmamap"
)

// LiveMapper answers from the live /sys through rdmamap.
type LiveMapper struct{}

// DevicesForPCI lists /sys/bus/pci/devices/<bdf>/infiniband.
func (LiveMapper) DevicesForPCI(bdf string) []string {
	out := rdmamap.GetRdmaDevicesForPcidev(bdf)
	sort.Strings(out)
	return out
}

// CharDevices returns rdmamap's character devices of the device: the first
// ucm, issm, umad and the uverbs entry. rdmamap also returns the host-wide
// /dev/infiniband/rdma_cm when that node exists; it belongs to no device
// and is left out.
func (LiveMapper) CharDevices(device string) []string {
	var out []string
	for _, p := range rdmamap.GetRdmaCharDevices(device) {
		if strings.HasPrefix(p, DevDir) && p != rdmamap.RdmaUcmDevice {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
