// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import "github.com/rdma-doctor/rdma_doctor/internal/config"

// ExpectedSource says where an expected rate came from.
type ExpectedSource string

// Sources of an expected rate, most specific first.
const (
	FromConfigPort    ExpectedSource = "config_port"
	FromConfigBoard   ExpectedSource = "config_board_id"
	FromConfigHCAType ExpectedSource = "config_hca_type"
	FromSKUTable      ExpectedSource = "sku_table"
)

// sku is a board (PSID) whose normal port rate is known.
type sku struct {
	Gbps   float64
	Source string
}

// skuRates holds only boards whose rate is documented by real recorded data.
// The HCA family alone never implies a rate: a ConnectX-6 may be an HDR100
// card that normally runs 100 Gb/sec (2X HDR), and a 200G BlueField-3 runs
// 2X NDR, so an unlisted board has no expected rate unless the config gives
// one.
var skuRates = map[string]sku{
	// ConnectX-7 single-port OSFP NDR (hca_type MT4129) on H100 servers:
	// every port "400 Gb/sec (4X NDR)" in the gpud H100 sysfs recording
	// (leptonai/gpud PR #943) and in the ibstat H100 samples
	// (shared/realdata/tools/ibstat-h100-cx7-ib400-some-down-a-gpud.txt);
	// board_id also in deepseek-ai/DeepEP issue #38.
	"MT_0000000838": {400, "gpud H100 sysfs recording, PR #943"},
	// BlueField-3 (MT41692) 200GbE in a RoCE LAG: "200 Gb/sec (2X NDR)" in
	// the same gpud recording (mlx5_bond_0).
	"MT_0000000884": {200, "gpud H100 sysfs recording, mlx5_bond_0"},
}

// ExpectedRate returns the rate a port should run at, in Gb/s, and where
// that expectation comes from; ok is false when nothing says.
func ExpectedRate(cfg *config.Config, d *Device, p *Port) (gbps float64, src ExpectedSource, ok bool) {
	if cfg != nil {
		for _, e := range cfg.Expected.Ports {
			if e.Device == d.Name && e.Port == p.Num {
				return e.RateGbps, FromConfigPort, true
			}
		}
		if d.BoardID.OK {
			for _, e := range cfg.Expected.Boards {
				if e.BoardID == d.BoardID.V {
					return e.RateGbps, FromConfigBoard, true
				}
			}
		}
		if d.HCAType.OK {
			for _, e := range cfg.Expected.HCATypes {
				if e.HCAType == d.HCAType.V {
					return e.RateGbps, FromConfigHCAType, true
				}
			}
		}
	}
	if d.BoardID.OK {
		if s, found := skuRates[d.BoardID.V]; found {
			return s.Gbps, FromSKUTable, true
		}
	}
	return 0, "", false
}
