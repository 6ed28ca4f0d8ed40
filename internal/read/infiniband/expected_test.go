// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import "testing"

// rules is an operator's expectation of one device's ports, and records
// what ExpectedRate asked.
type rules struct {
	device     string
	gbps       float64
	board, hca string
	asked      bool
}

func (r *rules) PortRate(device string, _ int, boardID, hcaType string) (float64, ExpectedSource, bool) {
	r.asked, r.board, r.hca = true, boardID, hcaType
	if device != r.device {
		return 0, "", false
	}
	return r.gbps, FromConfigPort, true
}

func TestExpectedRate(t *testing.T) {
	cx7 := &Device{Name: "mlx5_0", BoardID: some("MT_0000000838"), HCAType: some("MT4129")}
	cx6 := &Device{Name: "mlx5_1", BoardID: some("MT_0000000223"), HCAType: some("MT4123")}
	unread := &Device{Name: "mlx5_2"}
	p1 := &Port{Num: 1}
	for _, tc := range []struct {
		name string
		r    RateRules
		d    *Device
		gbps float64
		src  ExpectedSource
		ok   bool
	}{
		{"SKU table", nil, cx7, 400, FromSKUTable, true},
		{"unknown board, no config", nil, cx6, 0, "", false},
		{"rules beat the SKU table", &rules{device: "mlx5_0", gbps: 800}, cx7, 800, FromConfigPort, true},
		{"no rule: the SKU table", &rules{device: "mlx5_9", gbps: 800}, cx7, 400, FromSKUTable, true},
		{"no rule, unknown board", &rules{device: "mlx5_9", gbps: 800}, cx6, 0, "", false},
		{"board and type unread", &rules{device: "mlx5_2", gbps: 100}, unread, 100, FromConfigPort, true},
	} {
		gbps, src, ok := ExpectedRate(tc.r, tc.d, p1)
		if gbps != tc.gbps || src != tc.src || ok != tc.ok {
			t.Errorf("%s: %v %q %v, want %v %q %v", tc.name, gbps, src, ok, tc.gbps, tc.src, tc.ok)
		}
	}
	// What the rules are asked: an unread board_id or hca_type is empty, not
	// a value that could match a rule.
	r := &rules{}
	ExpectedRate(r, cx6, p1)
	if !r.asked || r.board != "MT_0000000223" || r.hca != "MT4123" {
		t.Errorf("rules asked %v with board %q, hca_type %q", r.asked, r.board, r.hca)
	}
	ExpectedRate(r, unread, p1)
	if r.board != "" || r.hca != "" {
		t.Errorf("unread device: rules asked with board %q, hca_type %q, want both empty", r.board, r.hca)
	}
}
