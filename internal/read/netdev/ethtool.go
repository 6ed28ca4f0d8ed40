// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"

	"github.com/safchain/ethtool"
)

// DefaultStats selects the ethtool statistics exported by default: the
// mlx5 physical-layer errors, discards, pause and FEC counters of
// research/diagnose.md §2.3 (kernel Documentation/networking/device_drivers/
// ethernet/mellanox/mlx5/counters.rst), plus rx_bits_phy, the denominator of
// the bit error rate, and the per-priority pause, discard and ECN-marked
// counters the lossless audit needs (en_stats.c: the per-priority PFC group
// rx/tx_prio%d_pause, _pause_duration, rx_prio%d_pause_transition; the
// per-priority traffic group's rx_prio%d_discards; the per-TC buffer and
// congestion groups' rx_prio%d_buf_discard, rx_prio%d_cong_discard,
// rx_prio%d_marked). The per-priority byte and packet counters are left
// out: traffic volume per priority is 32 series per netdev that no check
// reads.
const DefaultStats = `rx_(pcs_symbol_err|symbol_err|corrected_bits|crc_errors|discards|bits)_phy` +
	`|tx_discards_phy|rx_err_lane_[0-9]+_phy|link_down_events_phy|rx_out_of_buffer` +
	`|rx_buffer_passed_thres_phy|(rx|tx)_pause_ctrl_phy|(rx|tx)_prio[0-7]_pause(_duration)?` +
	`|rx_prio[0-7]_(pause_transition|discards|buf_discard|cong_discard|marked)` +
	`|tx_pause_storm_(warning|error)_events`

// EthtoolInfo is what the SIOCETHTOOL ioctl reports for a netdev.
type EthtoolInfo struct {
	Driver          string
	DriverVersion   string
	FirmwareVersion string
	BusInfo         string
	// SpeedMbps is the link speed; absent when the driver does not know it
	// (link down, IPoIB before the port is active).
	SpeedMbps Opt[uint64]
	// Stats are the statistics whose name the filter selected, by name.
	Stats []Stat
	// Link is the ethtool netlink link state (why a link is down, where
	// the driver says); nil on a kernel without ethtool netlink (before
	// 5.6).
	Link *LinkState
	// FEC is the FEC block counters; nil where the driver has none.
	FEC *FECStats
}

// Stat is one ethtool statistic.
type Stat struct {
	Name  string
	Value uint64
}

// Ethtool queries the running kernel's netdevs. It needs no privileges:
// the get commands it uses (GDRVINFO, GSET, GSTRINGS, GSTATS, and the
// netlink LINKSTATE_GET and FEC_GET) are allowed to any user; only the
// opt-in ModuleEEPROM needs CAP_NET_ADMIN. It sees the network namespace
// of the process.
type Ethtool struct {
	// Stats selects statistics by name (anchored by the caller); nil reads
	// none.
	Stats *regexp.Regexp
	// ModuleEEPROM also reads each RoCE netdev's transceiver memory
	// (module.go): needs CAP_NET_ADMIN, and each page is a firmware
	// access.
	ModuleEEPROM bool
}

// Query reads driver information, link speed and the selected statistics
// of one netdev. The driver information is required; a driver without
// statistics or settings support just leaves those out.
func (e *Ethtool) Query(name string) (*EthtoolInfo, error) {
	h, err := ethtool.NewEthtool()
	if err != nil {
		return nil, fmt.Errorf("ethtool socket: %w", err)
	}
	defer h.Close()
	drv, err := h.DriverInfo(name)
	if err != nil {
		return nil, fmt.Errorf("ethtool %s: driver info: %w", name, err)
	}
	info := &EthtoolInfo{Driver: drv.Driver, DriverVersion: drv.Version, FirmwareVersion: drv.FwVersion, BusInfo: drv.BusInfo}

	// ETHTOOL_GSET through CmdGet, not the library's GetLinkSettings: the
	// latter sizes GLINKSETTINGS for 92 link modes, newer kernels have more,
	// and its fallback prints a warning on stdout on every call.
	var cmd ethtool.EthtoolCmd
	if speed, err := h.CmdGet(&cmd, name); err == nil && speed != 0 && speed != math.MaxUint32 && speed != math.MaxUint16 {
		info.SpeedMbps = some(uint64(speed))
	}

	// The link state and FEC statistics exist only over ethtool netlink,
	// which the ioctl library does not speak (genl.go).
	linkErr := queryLink(name, info)

	if e.Stats != nil && drv.NStats > 0 {
		stats, err := h.Stats(name)
		if err != nil {
			return info, errors.Join(fmt.Errorf("ethtool %s: statistics: %w", name, err), linkErr)
		}
		var bad []error
		seen := map[string]bool{}
		for raw, v := range stats {
			n, err := CleanStatName(raw)
			if err != nil {
				bad = append(bad, fmt.Errorf("ethtool %s: statistic %q: %w", name, raw, err))
				continue
			}
			// Two raw names that clean to one ("x " and "x") would make
			// duplicate series; the first wins.
			if e.Stats.MatchString(n) && !seen[n] {
				seen[n] = true
				info.Stats = append(info.Stats, Stat{Name: n, Value: v})
			}
		}
		sort.Slice(info.Stats, func(i, j int) bool { return info.Stats[i].Name < info.Stats[j].Name })
		if len(bad) > 0 {
			return info, errors.Join(append(bad, linkErr)...)
		}
	}
	return info, linkErr
}
