// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// IPoIB hardware address flag bits (first byte), drivers/infiniband/ulp/ipoib/ipoib.h.
const (
	// FlagRC is IPOIB_FLAGS_RC: set by the connected-mode code
	// (ipoib_cm_dev_init) when connected mode can be used. Enhanced IPoIB
	// (mlx5 rdma_netdev) never runs that code, so its addresses start 0x00.
	FlagRC = 0x80
	// FlagUC is IPOIB_FLAGS_UC (unused by Linux).
	FlagUC = 0x40
)

// IPoIBAddress is a parsed 20-byte IPoIB hardware address: a flags byte, the
// 24-bit QP number and the 16-byte port GID.
type IPoIBAddress struct {
	Flags byte
	QPN   uint32
	// GID as sysfs prints GIDs (8 groups of 4 hex digits).
	GID string
}

// ConnectedModeSupported reports whether the interface can run connected
// mode: the kernel accepts "connected" in the mode file only with FlagRC
// set (IPOIB_CM_SUPPORTED in ipoib_set_mode).
func (a IPoIBAddress) ConnectedModeSupported() bool { return a.Flags&FlagRC != 0 }

// ParseIPoIBAddress parses /sys/class/net/<ib>/address
// ("80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:31:fd:c1").
func ParseIPoIBAddress(s string) (IPoIBAddress, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ":")
	if len(parts) != 20 {
		return IPoIBAddress{}, fmt.Errorf("IPoIB address %q: want 20 colon-separated bytes", s)
	}
	var b [20]byte
	for i, p := range parts {
		if len(p) != 2 {
			return IPoIBAddress{}, fmt.Errorf("IPoIB address %q: byte %d is %q", s, i, p)
		}
		v, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return IPoIBAddress{}, fmt.Errorf("IPoIB address %q: byte %d is not hex", s, i)
		}
		b[i] = byte(v)
	}
	var gid strings.Builder
	for i := 4; i < 20; i += 2 {
		if i > 4 {
			gid.WriteByte(':')
		}
		fmt.Fprintf(&gid, "%02x%02x", b[i], b[i+1])
	}
	return IPoIBAddress{
		Flags: b[0],
		QPN:   uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]),
		GID:   gid.String(),
	}, nil
}

// IPoIB modes as the mode file prints them.
const (
	ModeDatagram  = "datagram"
	ModeConnected = "connected"
)

// ParseMode parses /sys/class/net/<ib>/mode.
func ParseMode(s string) (string, error) {
	switch m := strings.TrimSpace(s); m {
	case ModeDatagram, ModeConnected:
		return m, nil
	default:
		return "", fmt.Errorf("IPoIB mode %q: want datagram or connected", m)
	}
}

// GID types as exported in the rdma_netdev_roce_gids gid_type label.
const (
	GIDRoCEv1 = "RoCE v1"
	GIDRoCEv2 = "RoCE v2"
)

// ParseGIDType parses ports/<n>/gid_attrs/types/<i>. The kernel names the
// v1 type "IB/RoCE v1" (the same type serves IB GIDs); on a RoCE port it is
// RoCE v1.
func ParseGIDType(s string) (string, error) {
	switch t := strings.TrimSpace(s); t {
	case "IB/RoCE v1", "RoCE v1":
		return GIDRoCEv1, nil
	case "RoCE v2":
		return GIDRoCEv2, nil
	default:
		return "", fmt.Errorf("GID type %q: want \"IB/RoCE v1\" or \"RoCE v2\"", t)
	}
}

// ParseBool01 parses the 0/1 attributes carrier and disable_ipv6.
func ParseBool01(s string) (bool, error) {
	switch strings.TrimSpace(s) {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("%q: want 0 or 1", strings.TrimSpace(s))
}

// ParseOperState parses operstate (RFC 2863 names as the kernel prints them).
func ParseOperState(s string) (string, error) {
	switch st := strings.TrimSpace(s); st {
	case "unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up":
		return st, nil
	default:
		return "", fmt.Errorf("operstate %q: not an RFC 2863 state", st)
	}
}

// errStatName is returned for ethtool statistic names that cannot be a
// label value.
var errStatName = errors.New("not a printable statistic name")

// CleanStatName turns an ethtool statistic name (a 32-byte ETH_GSTRING,
// NUL-trimmed by the library) into a label value: surrounding blanks
// removed (mlx5 once shipped "tx_pause_storm_warning_events " with a
// trailing space), and then a driver-chosen name as the label policy has
// it (names.Name: printable ASCII, at most names.MaxNameBytes). What it
// refuses is counted there too.
func CleanStatName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !names.Name(s) {
		names.Limit(names.Refused, 1)
		return "", errStatName
	}
	return s, nil
}
