// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

// TestRemediesFitTheVendor: on every fixture host, with its own config
// and with one that makes the firmware and link layer checks fail on every
// device, no remedy names a tool of a vendor other than the target's:
// mlxlink on a Chelsio port finds no device.
func TestRemediesFitTheVendor(t *testing.T) {
	tools := 0
	for _, host := range diagnosetest.FixtureHosts(t) {
		root := filepath.Join(diagnosetest.Fixtures, host)
		s := (&diagnose.Reader{Host: diagnosetest.HostOf(root)}).Read(context.Background())
		hostVendors := map[kit.Vendor]bool{}
		if s.IB() != nil {
			for i := range s.IB().Devices {
				hostVendors[kit.DeviceVendor(&s.IB().Devices[i])] = true
			}
		}
		// vendorsOf is who the target belongs to: its RDMA device, the
		// device of its netdev, or every device of the host.
		vendorsOf := func(target string) map[kit.Vendor]bool {
			name, _, _ := strings.Cut(target, "/")
			if d := kit.IBDevice(s, name); d != nil {
				return map[kit.Vendor]bool{kit.DeviceVendor(d): true}
			}
			if n := findNetdev(s, name); n != nil && n.Device != "" {
				return map[kit.Vendor]bool{kit.VendorOf(s, n.Device): true}
			}
			return hostVendors
		}
		for _, cfg := range []*config.Config{diagnosetest.FixtureConfig(t, root), diagnosetest.StrictConfig(s)} {
			e, err := testEvaluator(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := diagnose.HistoryFor(cfg.Diagnose.HistoryWindow(), cfg.Diagnose.SampleInterval())
			h.Add(s)
			for _, f := range e.Evaluate(s, h).Findings {
				for v, names := range kit.VendorTools {
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
