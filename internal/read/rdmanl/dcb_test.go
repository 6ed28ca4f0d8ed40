// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"testing"
	"time"
)

// dscpApps is trust dscp as mlx5 lists it: all 64 DSCP values, priority
// dscp>>3 (the dscp2prio mapping mlnx_qos -i prints by default).
func dscpApps() []App {
	var apps []App
	for dscp := range 64 {
		apps = append(apps, App{Selector: AppSelDSCP, Priority: uint8(dscp >> 3), Protocol: uint16(dscp)})
	}
	return apps
}

func TestDecodeDCB(t *testing.T) {
	d, err := DecodeDCB(ieeeMsg(0b1100_0101, dscpApps()))
	if err != nil {
		t.Fatal(err)
	}
	if d.Netdev != "enp59s0f0np0" || d.PFC == nil || d.PFC.Enabled != 0xc5 || d.PFC.Cap != 8 {
		t.Fatalf("dcb %+v pfc %+v", d, d.PFC)
	}
	if d.PFC.Requests[3] != 1234 || d.PFC.Indications[3] != 5678 || d.PFC.Requests[2] != 0 {
		t.Errorf("pfc counters %+v", d.PFC)
	}
	if d.ETS == nil || d.ETS.TxBW[7] != 40 || TSAName(d.ETS.TSA[6]) != "strict" || d.ETS.PrioTC[0] != 1 {
		t.Errorf("ets %+v", d.ETS)
	}
	if !d.TrustDSCP() {
		t.Error("not trust dscp")
	}
	if p, ok := d.DSCPPriority(26); !ok || p != 3 {
		t.Errorf("dscp 26 -> %d %v", p, ok)
	}
	if !d.DCBX.OK || d.DCBX.V != 9 {
		t.Errorf("dcbx %+v", d.DCBX)
	}

	pcp, err := DecodeDCB(ieeeMsg(0x08, nil))
	if err != nil || pcp.TrustDSCP() {
		t.Errorf("trust pcp: %+v %v", pcp, err)
	}
	for name, b := range map[string][]byte{
		"short":     {0, 21},
		"other cmd": {0, 7, 0, 0},
		"short pfc": append([]byte{0, 21, 0, 0}, 8, 0, 13, 0, 6, 0, 2, 0, 1, 0, 0, 0),
		"no ifname": {0, 21, 0, 0},
	} {
		if _, err := DecodeDCB(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestLiveDCBUnsupported asks the running kernel for the loopback
// device's DCB state: lo has no dcbnl_ops, the real "driver does not
// support DCB" answer (EOPNOTSUPP), for any user.
func TestLiveDCBUnsupported(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := ReadDCB(ctx, Live{}, "lo")
	if st := Classify(err); st != StatusUnsupported {
		t.Errorf("lo: %v (%s), want unsupported", err, st)
	}
	// A name the kernel does not have: dcb_doit answers EINVAL (as the
	// kernel here does) or ENODEV; either way a state, not a read error.
	_, err = ReadDCB(ctx, Live{}, "rdma-doctor-none0")
	if st := Classify(err); st != StatusNoDevice && st != StatusUnsupported {
		t.Errorf("missing netdev: %v (%s), want no_device or unsupported", err, st)
	}
}
