// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

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

// RateRules are the operator's expectations of link rates (config.Config
// holds them). They come in as an interface because the configuration sits a
// floor above the readers.
type RateRules interface {
	// PortRate returns the configured rate of a port, in Gb/s, and which
	// rule gave it; boardID and hcaType are empty when they were not read.
	PortRate(device string, port int, boardID, hcaType string) (gbps float64, src ExpectedSource, ok bool)
}

// ExpectedRate returns the rate a port should run at, in Gb/s, and where
// that expectation comes from: the operator's rules first, then the SKU
// table; ok is false when nothing says.
func ExpectedRate(rules RateRules, d *Device, p *Port) (gbps float64, src ExpectedSource, ok bool) {
	if rules != nil {
		var board, hca string
		if d.BoardID.OK {
			board = d.BoardID.V
		}
		if d.HCAType.OK {
			hca = d.HCAType.V
		}
		if gbps, src, ok := rules.PortRate(d.Name, p.Num, board, hca); ok {
			return gbps, src, true
		}
	}
	if d.BoardID.OK {
		if s, found := skuRates[d.BoardID.V]; found {
			return s.Gbps, FromSKUTable, true
		}
	}
	return 0, "", false
}
