// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kit

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// Vendor is who makes an RDMA device: it decides which tools a remedy may
// name. NVIDIA's MFT (mlxlink, mlxconfig, mlxfwmanager, mlxfwreset,
// mstflint) and mlnx-tools (mlnx_qos) talk to ConnectX firmware only: on
// a Chelsio, Broadcom or Intel port they find no device.
type Vendor string

// Vendors with their own tools. Every other device (QLogic, Cornelis,
// AWS, Alibaba, HiSilicon, Marvell, software devices, one that cannot be
// told) gets vendor-neutral remedies.
const (
	VendorNVIDIA   Vendor = "NVIDIA/Mellanox"
	vendorBroadcom Vendor = "Broadcom"
	vendorIntel    Vendor = "Intel"
	vendorChelsio  Vendor = "Chelsio"
	vendorOther    Vendor = "other"
)

// VendorTools are the tool and driver names a remedy may show only for a
// device of that vendor (the fixture test checks every remedy against
// them).
var VendorTools = map[Vendor][]string{
	VendorNVIDIA:   {"mlxlink", "mlxconfig", "mlxfwmanager", "mlxfwreset", "mstflint", "mlnx_qos", "mlx5_core", "mlxfw", "cma_roce_mode"},
	vendorBroadcom: {"niccli", "bnxtnvm"},
	vendorIntel:    {"nvmupdate"},
	vendorChelsio:  {"cxgbtool"},
}

// mtHCAType is the hca_type mlx4 and mlx5 print: "MT" and the PCI device
// id in decimal (MT4129 ConnectX-7, MT25418 ConnectX DDR), on PFs and VFs
// alike, whatever udev names the device.
var mtHCAType = regexp.MustCompile(`^MT[0-9]+$`)

// DeviceVendor tells a device's vendor from the attributes its driver
// writes: hca_type MT<id> (mlx4, mlx5), the kernel's default device
// names (mlx4_<n>, bnxt_re<n>, irdma<n>, cxgb4_<n>), iw_cxgb4's board_id
// "<vendor>.<device>" with Chelsio's PCI vendor 1425, bnxt_re's hw_rev
// (its PCI vendor 0x14e4), i40iw's hca_type "I40IW".
func DeviceVendor(d *infiniband.Device) Vendor {
	if d == nil {
		return vendorOther
	}
	hca := ""
	if d.HCAType.OK {
		hca = strings.TrimSpace(d.HCAType.V)
	}
	switch {
	case mtHCAType.MatchString(hca):
		return VendorNVIDIA
	case hca == "cxgb4", d.BoardID.OK && strings.HasPrefix(d.BoardID.V, "1425."):
		return vendorChelsio
	case strings.HasPrefix(hca, "Broadcom"), d.HWRev.OK && strings.TrimSpace(d.HWRev.V) == "0x14e4":
		return vendorBroadcom
	case hca == "I40IW":
		return vendorIntel
	}
	for _, n := range []struct {
		prefix string
		v      Vendor
	}{{"mlx4_", VendorNVIDIA}, {"mlx5_", VendorNVIDIA}, {"mthca", VendorNVIDIA}, {"bnxt_re", vendorBroadcom},
		{"irdma", vendorIntel}, {"i40iw", vendorIntel}, {"cxgb4_", vendorChelsio}} {
		if strings.HasPrefix(d.Name, n.prefix) {
			return n.v
		}
	}
	return vendorOther
}

// VendorOf is the vendor of the named RDMA device: by its attributes when
// the snapshot read it, else by its name alone.
func VendorOf(s *diagnose.Reading, name string) Vendor {
	if d := IBDevice(s, name); d != nil {
		return DeviceVendor(d)
	}
	return DeviceVendor(&infiniband.Device{Name: name})
}

// IsNVIDIA reports a ConnectX/BlueField device (mlx4, mlx5).
func IsNVIDIA(d *infiniband.Device) bool { return DeviceVendor(d) == VendorNVIDIA }

// LinkTool is the command that shows a port's physical link in detail:
// NVIDIA's mlxlink with mlxArgs appended ("-c", "-m", or ""), ethtool with
// ethArgs on the netdev of another vendor's Ethernet port, perfquery and
// iblinkinfo on another vendor's InfiniBand port (qib, hfi1).
func LinkTool(d *infiniband.Device, p *infiniband.Port, mlxArgs, ethArgs string) string {
	if IsNVIDIA(d) {
		return strings.TrimSpace(fmt.Sprintf("mlxlink -d %s -p %d %s", MlxlinkDev(d), p.Num, mlxArgs))
	}
	if IsIBPort(d, p) {
		return fmt.Sprintf("perfquery and iblinkinfo (infiniband-diags) for %s port %d", d.Name, p.Num)
	}
	nd := OrText(NonEmpty(p.Netdev), "<netdev>")
	return strings.TrimSpace("ethtool " + strings.TrimSpace(ethArgs+" "+nd))
}

// FWUpdateTool is how a device's firmware is queried and updated, by
// vendor: MFT for NVIDIA; niccli (Broadcom's NIC CLI; bnxtnvm on older
// packages) for Broadcom; devlink dev flash (ice) or Intel's NVM update
// utility for Intel; cxgbtool loadfw for Chelsio; for the others the
// vendor's package, since no tool is common to them.
func FWUpdateTool(d *infiniband.Device, want string) string {
	dev := MlxlinkDev(d)
	switch DeviceVendor(d) {
	case VendorNVIDIA:
		return fmt.Sprintf("%s: mlxfwmanager --query -d %s, then in a maintenance window update to %s "+
			"(mlxfwmanager -u -d %s, or mstflint -d %s -i <image> burn) and mlxfwreset -d %s reset or reboot", d.Name, dev, want, dev, dev, dev)
	case vendorBroadcom:
		return fmt.Sprintf("%s: in a maintenance window update to %s with Broadcom's niccli (or bnxtnvm) from the vendor's firmware package, then reboot", d.Name, want)
	case vendorIntel:
		return fmt.Sprintf("%s: devlink dev info pci/%s shows the versions; in a maintenance window update to %s with Intel's NVM update utility "+
			"(nvmupdate64e) or devlink dev flash, then reboot", d.Name, dev, want)
	case vendorChelsio:
		return fmt.Sprintf("%s: ethtool -i <netdev> shows the version; in a maintenance window update to %s with cxgbtool <netdev> loadfw <image> "+
			"(Chelsio Unified Wire), then reload the driver or reboot", d.Name, want)
	}
	return fmt.Sprintf("%s: update to %s with the device vendor's firmware tool in a maintenance window", d.Name, want)
}

// QoSTool is how to show and set PFC and trust on a RoCE netdev:
// mlnx_qos (mlnx-tools) on NVIDIA devices, the iproute2 dcb tool, which
// every DCB-capable driver answers, elsewhere.
func QoSTool(d *infiniband.Device, nd string) string {
	if IsNVIDIA(d) {
		return "mlnx_qos -i " + nd
	}
	return "dcb pfc show dev " + nd
}

// IbPortOf finds a device's port in the snapshot; nil when either is gone.
func IbPortOf(s *diagnose.Reading, device string, num int) (*infiniband.Device, *infiniband.Port) {
	d := IBDevice(s, device)
	if d == nil {
		return nil, nil
	}
	for i := range d.Ports {
		if d.Ports[i].Num == num {
			return d, &d.Ports[i]
		}
	}
	return nil, nil
}
