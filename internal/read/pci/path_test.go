// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pci

import (
	"context"
	"testing"
)

// The procfs testdata listing of root port 0000:00:03.0 (see
// fixtures/README.md), and the kernel's "<kind>_bit[<n>]" form for a bit
// it has no name for.
const aerCorrectableListing = "RxErr 0\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 0\n"

func TestParseAERStats(t *testing.T) {
	if v, err := ParseAERStats(aerCorrectableListing, "TOTAL_ERR_COR"); err != nil || v != 0 {
		t.Errorf("listing: %d %v", v, err)
	}
	if v, err := ParseAERStats("RxErr 3\ncorrectable_bit[15] 1\nTOTAL_ERR_COR 4\n", "TOTAL_ERR_COR"); err != nil || v != 4 {
		t.Errorf("bit form: %d %v", v, err)
	}
	for _, bad := range []string{"", "RxErr 0\n", "RxErr\nTOTAL_ERR_COR 0\n", "TOTAL_ERR_COR -1\n", "TOTAL_ERR_COR x\n"} {
		if _, err := ParseAERStats(bad, "TOTAL_ERR_COR"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := ParseCount("12\n"); err != nil {
		t.Error(err)
	}
	if _, err := ParseCount("-1"); err == nil {
		t.Error("negative count parsed")
	}
}

func link(speed float64, width int, maxSpeed float64, maxWidth int) Link {
	return Link{Speed: some(speed), Width: some(width), MaxSpeed: some(maxSpeed), MaxWidth: some(maxWidth)}
}

func TestHopDegraded(t *testing.T) {
	for _, tc := range []struct {
		name       string
		upper, low Link
		degraded   bool
		ok         bool
	}{
		// 17:00.0 above the recorded Gen4 NVMe: 16 GT/s is all both do.
		{"gen4 card below a gen5 port", link(16, 4, 32, 4), link(16, 4, 16, 4), false, true},
		{"gen5 card at gen4 below a gen5 port", link(16, 16, 32, 16), link(16, 16, 32, 16), true, true},
		{"x8 below an x16 port", link(32, 8, 32, 16), link(32, 8, 32, 16), true, true},
		{"x16 card in an x8 slot", link(32, 8, 32, 8), link(32, 8, 32, 16), false, true},
		{"unknown", Link{}, link(32, 16, 32, 16), false, false},
	} {
		h := Hop{UpperMax: tc.upper, LowerAt: tc.low}
		if d, ok := h.Degraded(); d != tc.degraded || ok != tc.ok {
			t.Errorf("%s: %v %v", tc.name, d, ok)
		}
	}
}

// mlx5_0 of hgx-h100 hangs below 17:02.0 of the switch whose upstream
// port 16:00.0 links to root port 15:01.0.
func TestReadDevicePath(t *testing.T) {
	h := fixtureHost(t, "hgx-h100")
	devs, err := ReadDevices(context.Background(), h.Sys, func(n string) bool { return n == "mlx5_0" })
	if err != nil || len(devs) != 1 {
		t.Fatal(devs, err)
	}
	p := devs[0].PCI.Path
	if p.RootPort != "0000:15:01.0" || len(p.Hops) != 2 || len(p.Errors) != 0 {
		t.Fatalf("%+v", p)
	}
	if p.Hops[0].Upper != "0000:17:02.0" || p.Hops[0].Lower != "0000:1a:00.0" || p.Hops[1].Upper != "0000:15:01.0" || p.Hops[1].Lower != "0000:16:00.0" {
		t.Errorf("hops %+v", p.Hops)
	}
	if hops, ok := p.Degraded(); len(hops) != 0 || !ok {
		t.Errorf("degraded: %+v %v", hops, ok)
	}
	if a := p.RootPortAER; !a.RootPortCorrectable.OK || !a.NonFatal.OK {
		t.Errorf("root port AER %+v", a)
	}
	if a := devs[0].PCI.AER; !a.Correctable.OK || !a.NonFatal.OK || !a.Fatal.OK || a.RootPortFatal.OK {
		t.Errorf("HCA AER %+v", a)
	}
	// A host without AER files (dgx-h100): absent, no error.
	devs, _ = ReadDevices(context.Background(), fixtureHost(t, "dgx-h100").Sys, nil)
	if a := devs[0].PCI.AER; a.Correctable.OK || len(devs[0].PCI.Errors) != 0 {
		t.Errorf("dgx-h100: %+v %v", a, devs[0].PCI.Errors)
	}
}
