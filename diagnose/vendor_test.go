// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
)

func TestDeviceVendor(t *testing.T) {
	some := func(s string) infiniband.Opt[string] { return infiniband.Opt[string]{V: s, OK: true} }
	for _, c := range []struct {
		d    infiniband.Device
		want vendor
	}{
		// udev-renamed ConnectX: hca_type decides, not the name
		{infiniband.Device{Name: "ibp3s0", HCAType: some("MT4131")}, vendorNVIDIA},
		{infiniband.Device{Name: "mlx4_0", HCAType: some("MT25418")}, vendorNVIDIA},
		{infiniband.Device{Name: "mlx5_4"}, vendorNVIDIA},
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
		if got := deviceVendor(&c.d); got != c.want {
			t.Errorf("%s: %s, want %s", c.d.Name, got, c.want)
		}
	}
}

// strictConfig makes the vendor-specific remedies appear on every
// device of a host: every port expects the other link layer, and every
// device's firmware is below the minimum.
func strictConfig(s *Reading) *config.Config {
	cfg := &config.Config{}
	if s.ib() == nil {
		return cfg
	}
	for i := range s.ib().Devices {
		d := &s.ib().Devices[i]
		if d.HCAType.OK {
			cfg.Diagnose.Firmware = append(cfg.Diagnose.Firmware, config.FirmwarePolicy{HCAType: d.HCAType.V, Minimum: "999.0"})
		}
		if d.BoardID.OK {
			cfg.Diagnose.Firmware = append(cfg.Diagnose.Firmware, config.FirmwarePolicy{BoardID: d.BoardID.V, Minimum: "999.0"})
		}
		for j := range d.Ports {
			p := &d.Ports[j]
			other := config.LinkLayer("InfiniBand")
			if p.IsInfiniBand() {
				other = "Ethernet"
			}
			cfg.Diagnose.LinkLayers = append(cfg.Diagnose.LinkLayers, config.LinkLayerRule{Device: d.Name, Port: p.Num, LinkLayer: other})
		}
	}
	return cfg
}

// TestRemediesFitTheVendor: on every fixture host, with its own config
// and with one that makes the firmware and link layer checks fail on every
// device, no remedy names a tool of a vendor other than the target's:
// mlxlink on a Chelsio port finds no device.
func TestRemediesFitTheVendor(t *testing.T) {
	tools := 0
	for _, host := range fixtureHosts(t) {
		root := filepath.Join(fixtures, host)
		s := (&Reader{Host: hostOf(root)}).Read(context.Background())
		hostVendors := map[vendor]bool{}
		if s.ib() != nil {
			for i := range s.ib().Devices {
				hostVendors[deviceVendor(&s.ib().Devices[i])] = true
			}
		}
		// vendorsOf is who the target belongs to: its RDMA device, the
		// device of its netdev, or every device of the host.
		vendorsOf := func(target string) map[vendor]bool {
			name, _, _ := strings.Cut(target, "/")
			if d := s.ibDevice(name); d != nil {
				return map[vendor]bool{deviceVendor(d): true}
			}
			if n := findNetdev(s, name); n != nil && n.Device != "" {
				return map[vendor]bool{s.vendorOf(n.Device): true}
			}
			return hostVendors
		}
		for _, cfg := range []*config.Config{fixtureConfig(t, root), strictConfig(s)} {
			e, err := NewEvaluator(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := HistoryFor(cfg.Diagnose.HistoryWindow(), cfg.Diagnose.SampleInterval())
			h.Add(s)
			for _, f := range e.Evaluate(s, h).Findings {
				for v, names := range vendorTools {
					for _, tool := range names {
						if !strings.Contains(f.Remedy, tool) {
							continue
						}
						tools++
						if !vendorsOf(f.Target)[v] {
							t.Errorf("%s: %s %s names %s (%s) for a device of %v: %s", host, f.Check, f.Target, tool, v, vendorsOf(f.Target), f.Remedy)
						}
					}
				}
			}
		}
	}
	// The test has teeth only if NVIDIA remedies appear where they fit.
	if tools == 0 {
		t.Error("no remedy names any vendor tool on any fixture host")
	}
}
