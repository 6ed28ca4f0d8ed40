// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// LinkState is the ethtool netlink LINKSTATE_GET reply of a netdev: whether
// the link is up and, when a driver says why it is not (mlx5 since Linux
// 5.10, from the firmware's PDDR troubleshooting page), the extended state
// and substate ethtool prints as "Link detected: no (No cable)".
type LinkState struct {
	// Link is ETHTOOL_A_LINKSTATE_LINK; absent when the driver cannot tell
	// (no get_link: ifb, some virtual devices).
	Link Opt[bool]
	// ExtState and ExtSubstate are absent unless the driver reports them
	// (mlx5 does only while the link is down).
	ExtState    Opt[ExtState]
	ExtSubstate Opt[uint8]
	// DownEvents is ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT, the link-down events
	// since the driver loaded (Linux 6.8+, drivers that count them).
	DownEvents Opt[uint32]
}

// ExtState is an ethtool link extended state (enum ethtool_link_ext_state).
type ExtState uint8

// The extended states, as include/uapi/linux/ethtool.h numbers them.
const (
	ExtStateAutoneg             ExtState = unix.ETHTOOL_LINK_EXT_STATE_AUTONEG
	ExtStateLinkTrainingFailure ExtState = unix.ETHTOOL_LINK_EXT_STATE_LINK_TRAINING_FAILURE
	ExtStateLinkLogicalMismatch ExtState = unix.ETHTOOL_LINK_EXT_STATE_LINK_LOGICAL_MISMATCH
	ExtStateBadSignalIntegrity  ExtState = unix.ETHTOOL_LINK_EXT_STATE_BAD_SIGNAL_INTEGRITY
	ExtStateNoCable             ExtState = unix.ETHTOOL_LINK_EXT_STATE_NO_CABLE
	ExtStateCableIssue          ExtState = unix.ETHTOOL_LINK_EXT_STATE_CABLE_ISSUE
	ExtStateEEPROMIssue         ExtState = unix.ETHTOOL_LINK_EXT_STATE_EEPROM_ISSUE
	ExtStateCalibrationFailure  ExtState = unix.ETHTOOL_LINK_EXT_STATE_CALIBRATION_FAILURE
	ExtStatePowerBudgetExceeded ExtState = unix.ETHTOOL_LINK_EXT_STATE_POWER_BUDGET_EXCEEDED
	ExtStateOverheat            ExtState = unix.ETHTOOL_LINK_EXT_STATE_OVERHEAT
	// ExtStateModule (Linux 5.17) is not in x/sys/unix yet.
	ExtStateModule ExtState = 10
)

// extStateNames are the label values of the extended states: ethtool's
// words (netlink/settings.c, linkstate_reply_cb), lower case and
// underscored so they are stable label values.
var extStateNames = [...]string{
	ExtStateAutoneg:             "autoneg",
	ExtStateLinkTrainingFailure: "link_training_failure",
	ExtStateLinkLogicalMismatch: "logical_mismatch",
	ExtStateBadSignalIntegrity:  "bad_signal_integrity",
	ExtStateNoCable:             "no_cable",
	ExtStateCableIssue:          "cable_issue",
	ExtStateEEPROMIssue:         "eeprom_issue",
	ExtStateCalibrationFailure:  "calibration_failure",
	ExtStatePowerBudgetExceeded: "power_budget_exceeded",
	ExtStateOverheat:            "overheat",
	ExtStateModule:              "module",
}

// String is the state's label value; a state newer than this table is
// "state_<n>" (bounded: the field is 8 bits).
func (s ExtState) String() string {
	if int(s) < len(extStateNames) {
		return extStateNames[s]
	}
	return "state_" + strconv.Itoa(int(s))
}

// extSubstateNames are the substates of each state that has them
// (enum ethtool_link_ext_substate_*), ethtool's words.
var extSubstateNames = map[ExtState][]string{
	ExtStateAutoneg: {1: "no_partner_detected", 2: "ack_not_received", 3: "next_page_exchange_failed",
		4: "no_partner_detected_during_force_mode", 5: "fec_mismatch_during_override", 6: "no_hcd"},
	ExtStateLinkTrainingFailure: {1: "kr_frame_lock_not_acquired", 2: "kr_link_inhibit_timeout",
		3: "kr_link_partner_did_not_set_receiver_ready", 4: "remote_fault"},
	ExtStateLinkLogicalMismatch: {1: "pcs_did_not_acquire_block_lock", 2: "pcs_did_not_acquire_am_lock",
		3: "pcs_did_not_get_align_status", 4: "fc_fec_is_not_locked", 5: "rs_fec_is_not_locked"},
	ExtStateBadSignalIntegrity: {1: "large_number_of_physical_errors", 2: "unsupported_rate",
		3: "serdes_reference_clock_lost", 4: "serdes_alos"},
	ExtStateCableIssue: {1: "unsupported_cable", 2: "cable_test_failure"},
	ExtStateModule:     {1: "cmis_not_ready"},
}

// SubstateName is the label value of a substate of the state, "" for
// none (0), "substate_<n>" for one this table does not know.
func SubstateName(s ExtState, sub uint8) string {
	if sub == 0 {
		return ""
	}
	if names := extSubstateNames[s]; int(sub) < len(names) && names[sub] != "" {
		return names[sub]
	}
	return "substate_" + strconv.Itoa(int(sub))
}

// FECStats are the FEC block counters of ETHTOOL_MSG_FEC_GET with
// ETHTOOL_FLAG_STATS (Linux 5.13+; mlx5 reads them from the PPCNT RS-FEC
// or FC-FEC group). A counter the driver does not provide is absent. The
// corrected bits counter is left out: mlx5 exports it already as the
// ethtool statistic rx_corrected_bits_phy.
type FECStats struct {
	CorrectedBlocks     Opt[uint64]
	UncorrectableBlocks Opt[uint64]
}

// ETHTOOL_A_FEC_* and ETHTOOL_A_FEC_STAT_* (include/uapi/linux/
// ethtool_netlink.h; x/sys/unix has neither).
const (
	fecAttrHeader        = 1
	fecAttrStats         = 5
	fecStatCorrected     = 2
	fecStatUncorrectable = 3
)

// ErrBadReply is a netlink reply that does not decode as the kernel
// writes it.
var ErrBadReply = errors.New("malformed ethtool netlink reply")

// DecodeLinkState decodes the attributes of an ETHTOOL_MSG_LINKSTATE_GET
// reply (the generic netlink payload after its 4-byte header). Unknown
// attributes (SQI, newer ones) are skipped.
func DecodeLinkState(b []byte) (LinkState, error) {
	var ls LinkState
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return ls, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_LINKSTATE_LINK:
			if v, ok := u8(ad.Bytes()); ok {
				ls.Link = some(v != 0)
			} else {
				return ls, fmt.Errorf("%w: link attribute of %d bytes", ErrBadReply, len(ad.Bytes()))
			}
		case unix.ETHTOOL_A_LINKSTATE_EXT_STATE:
			if v, ok := u8(ad.Bytes()); ok {
				ls.ExtState = some(ExtState(v))
			} else {
				return ls, fmt.Errorf("%w: ext state attribute of %d bytes", ErrBadReply, len(ad.Bytes()))
			}
		case unix.ETHTOOL_A_LINKSTATE_EXT_SUBSTATE:
			if v, ok := u8(ad.Bytes()); ok {
				ls.ExtSubstate = some(v)
			} else {
				return ls, fmt.Errorf("%w: ext substate attribute of %d bytes", ErrBadReply, len(ad.Bytes()))
			}
		case unix.ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT:
			if p := ad.Bytes(); len(p) == 4 {
				ls.DownEvents = some(binary.NativeEndian.Uint32(p))
			} else {
				return ls, fmt.Errorf("%w: ext down count attribute of %d bytes", ErrBadReply, len(p))
			}
		}
	}
	if err := ad.Err(); err != nil {
		return LinkState{}, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	if ls.ExtSubstate.OK && !ls.ExtState.OK {
		// The kernel sends a substate only with its state.
		return LinkState{}, fmt.Errorf("%w: ext substate without ext state", ErrBadReply)
	}
	return ls, nil
}

// u8 reads an NLA_U8 payload (the kernel pads it to 4 bytes in the
// message; the attribute length says 1).
func u8(p []byte) (uint8, bool) {
	if len(p) != 1 {
		return 0, false
	}
	return p[0], true
}

// DecodeFEC decodes the attributes of an ETHTOOL_MSG_FEC_GET reply for
// its statistics. Each statistic is an array of u64: the total, then one
// per lane; an empty array is a counter the driver does not provide.
func DecodeFEC(b []byte) (FECStats, error) {
	var st FECStats
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return st, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	for ad.Next() {
		if ad.Type() != fecAttrStats {
			continue
		}
		ad.Nested(func(nd *netlink.AttributeDecoder) error {
			for nd.Next() {
				var dst *Opt[uint64]
				switch nd.Type() {
				case fecStatCorrected:
					dst = &st.CorrectedBlocks
				case fecStatUncorrectable:
					dst = &st.UncorrectableBlocks
				default:
					continue
				}
				p := nd.Bytes()
				switch {
				case len(p) == 0:
				case len(p)%8 != 0:
					return fmt.Errorf("FEC statistic %d of %d bytes", nd.Type(), len(p))
				default:
					*dst = some(binary.NativeEndian.Uint64(p[:8]))
				}
			}
			return nil
		})
	}
	if err := ad.Err(); err != nil {
		return FECStats{}, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	return st, nil
}
