// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
)

func TestExpectedRate(t *testing.T) {
	cx7 := &Device{Name: "mlx5_0", BoardID: some("MT_0000000838"), HCAType: some("MT4129")}
	cx6 := &Device{Name: "mlx5_1", BoardID: some("MT_0000000223"), HCAType: some("MT4123")}
	p1 := &Port{Num: 1}
	cfg := &config.Config{Expected: config.Expected{
		Ports:    []config.PortRate{{Device: "mlx5_1", Port: 1, RateGbps: 100}},
		Boards:   []config.BoardRate{{BoardID: "MT_0000000223", RateGbps: 200}},
		HCATypes: []config.HCATypeRate{{HCAType: "MT4129", RateGbps: 800}},
	}}
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		d    *Device
		gbps float64
		src  ExpectedSource
		ok   bool
	}{
		{"SKU table", nil, cx7, 400, FromSKUTable, true},
		{"unknown board, no config", nil, cx6, 0, "", false},
		{"port beats board", cfg, cx6, 100, FromConfigPort, true},
		{"hca_type beats SKU table", cfg, cx7, 800, FromConfigHCAType, true},
		{"board", &config.Config{Expected: config.Expected{Boards: cfg.Expected.Boards}}, cx6, 200, FromConfigBoard, true},
	} {
		gbps, src, ok := ExpectedRate(tc.cfg, tc.d, p1)
		if gbps != tc.gbps || src != tc.src || ok != tc.ok {
			t.Errorf("%s: %v %q %v, want %v %q %v", tc.name, gbps, src, ok, tc.gbps, tc.src, tc.ok)
		}
	}
}
