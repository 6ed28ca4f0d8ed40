// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kit

import (
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

func TestDeviceVendor(t *testing.T) {
	some := func(s string) infiniband.Opt[string] { return infiniband.Opt[string]{V: s, OK: true} }
	for _, c := range []struct {
		d    infiniband.Device
		want Vendor
	}{
		// udev-renamed ConnectX: hca_type decides, not the name
		{infiniband.Device{Name: "ibp3s0", HCAType: some("MT4131")}, VendorNVIDIA},
		{infiniband.Device{Name: "mlx4_0", HCAType: some("MT25418")}, VendorNVIDIA},
		{infiniband.Device{Name: "mlx5_4"}, VendorNVIDIA},
		// iw_cxgb4: hca_type is the netdev driver, board_id vendor.device
		{infiniband.Device{Name: "iwp1s0", BoardID: some("1425.6408")}, vendorChelsio},
		{infiniband.Device{Name: "cxgb4_0", HCAType: some("cxgb4")}, vendorChelsio},
		{infiniband.Device{Name: "rocep25s0f0", HWRev: some("0x14e4")}, vendorBroadcom},
		{infiniband.Device{Name: "i40iw0", HCAType: some("I40IW")}, vendorIntel},
		{infiniband.Device{Name: "irdma1"}, vendorIntel},
		{infiniband.Device{Name: "qib0", HCAType: some("InfiniPath_QLE7340")}, vendorOther},
		{infiniband.Device{Name: "erdma_0"}, vendorOther},
		{infiniband.Device{Name: "rxe0"}, vendorOther},
	} {
		if got := DeviceVendor(&c.d); got != c.want {
			t.Errorf("%s: %s, want %s", c.d.Name, got, c.want)
		}
	}
}
