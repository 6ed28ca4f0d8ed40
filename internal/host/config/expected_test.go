// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// TestExpectedRate: the most specific entry of expected: wins, and any entry
// beats the SKU table; a nil Config leaves the SKU table.
func TestExpectedRate(t *testing.T) {
	cx7 := &infiniband.Device{Name: "mlx5_0", BoardID: sysattr.Some("MT_0000000838"), HCAType: sysattr.Some("MT4129")}
	cx6 := &infiniband.Device{Name: "mlx5_1", BoardID: sysattr.Some("MT_0000000223"), HCAType: sysattr.Some("MT4123")}
	p1 := &infiniband.Port{Num: 1}
	cfg := &Config{Expected: Expected{
		Ports:    []PortRate{{Device: "mlx5_1", Port: 1, RateGbps: 100}},
		Boards:   []BoardRate{{BoardID: "MT_0000000223", RateGbps: 200}},
		HCATypes: []HCATypeRate{{HCAType: "MT4129", RateGbps: 800}},
	}}
	for _, tc := range []struct {
		name string
		cfg  *Config
		d    *infiniband.Device
		gbps float64
		src  infiniband.ExpectedSource
		ok   bool
	}{
		{"nil config: SKU table", nil, cx7, 400, infiniband.FromSKUTable, true},
		{"nil config, unknown board", nil, cx6, 0, "", false},
		{"port beats board", cfg, cx6, 100, infiniband.FromConfigPort, true},
		{"hca_type beats SKU table", cfg, cx7, 800, infiniband.FromConfigHCAType, true},
		{"board", &Config{Expected: Expected{Boards: cfg.Expected.Boards}}, cx6, 200, infiniband.FromConfigBoard, true},
		{"board unread: no board rule", &Config{Expected: Expected{Boards: []BoardRate{{BoardID: "", RateGbps: 1}}}}, &infiniband.Device{Name: "x"}, 0, "", false},
	} {
		gbps, src, ok := infiniband.ExpectedRate(tc.cfg, tc.d, p1)
		if gbps != tc.gbps || src != tc.src || ok != tc.ok {
			t.Errorf("%s: %v %q %v, want %v %q %v", tc.name, gbps, src, ok, tc.gbps, tc.src, tc.ok)
		}
	}
}
