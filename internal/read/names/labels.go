// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package names

import (
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// The label policy: host text that becomes a label value is bounded, in
// length and in how many distinct values one device gives one family, so
// that no host (a broken driver, a hostile fixture, a firmware that
// writes junk) can make a series unbounded in size or a family unbounded
// in count. Every reader whose text reaches a label applies it:
//
//   - Free text (node_desc, hca_type, board_id, fw_ver, hw_rev, a netdev
//     name, a GPU's driver and the NVIDIA module version, a fabric node's
//     description) goes through Label: valid UTF-8, at most
//     MaxLabelBytes, cut on a character boundary. The cut value is still
//     served.
//   - A name a driver chooses (a counter file under counters/ and
//     hw_counters/, a devlink reporter, component or version, a hwmon
//     sensor label, an ethtool statistic) must be a Token (kernel
//     identifier characters) or a Name (printable ASCII), at most
//     MaxNameBytes; anything else is refused: its series is absent.
//   - One device (or port) gives one family at most MaxNamesPerFamily
//     names (counter files of one directory); the rest, in name order,
//     are left out.
//
// Each value cut, refused or left out is counted (Limited), exported as
// rdma_label_values_limited_total{reason}.
const (
	// MaxLabelBytes bounds a free-text label value: an InfiniBand
	// NodeDescription is 64 bytes (IBTA SMP), kernel names are shorter
	// still; twice that is room for any real value.
	MaxLabelBytes = 128
	// MaxNameBytes bounds a driver-chosen name: ethtool's are at most 32
	// (ETH_GSTRING_LEN), mlx5's longest hw counter 31, devlink's
	// component names shorter.
	MaxNameBytes = 64
	// MaxNamesPerFamily bounds the names one device or port gives one
	// family: mlx5 has about 80 hw counters a port, the fixtures' largest
	// directory 93; one host gave 12,036 (a driver's runaway).
	MaxNamesPerFamily = 512
)

// Reason is why the policy limited a value.
type Reason int

const (
	// Cut: a free-text value was longer than MaxLabelBytes (or not
	// UTF-8) and was served shortened (or repaired).
	Cut Reason = iota
	// Refused: a driver-chosen name was not a Token or Name; its series
	// is absent.
	Refused
	// OverCap: a name beyond MaxNamesPerFamily; its series is absent.
	OverCap
	reasons
)

// String is the reason label's value.
func (r Reason) String() string {
	switch r {
	case Cut:
		return "cut"
	case Refused:
		return "refused"
	case OverCap:
		return "over_cap"
	}
	return "unknown"
}

// Reasons lists every reason, for exporting each counter (zero
// included).
func Reasons() []Reason { return []Reason{Cut, Refused, OverCap} }

// limited counts what the policy limited since the process started, by
// reason: the readers are many and run in many goroutines; one counter
// per reason serves them all.
var limited [reasons]atomic.Uint64

// Limit counts n values limited for reason r.
func Limit(r Reason, n int) {
	if r >= 0 && r < reasons && n > 0 {
		limited[r].Add(uint64(n))
	}
}

// Limited returns how many values were limited for reason r.
func Limited(r Reason) uint64 {
	if r < 0 || r >= reasons {
		return 0
	}
	return limited[r].Load()
}

// Label returns free text fit to be a label value: invalid UTF-8
// replaced (U+FFFD) and the value cut to at most MaxLabelBytes on a
// character boundary. A value it changes is counted (Cut).
func Label(s string) string {
	if len(s) <= MaxLabelBytes && utf8.ValidString(s) {
		return s
	}
	Limit(Cut, 1)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= MaxLabelBytes {
		return s
	}
	cut := MaxLabelBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Token reports whether s is a driver-chosen name in kernel identifier
// characters (letters, digits, _ . : -), 1 to MaxNameBytes long: counter
// files, devlink reporters, components and versions.
func Token(s string) bool {
	if s == "" || len(s) > MaxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// Name reports whether s is a driver-chosen name in printable ASCII
// (spaces inside allowed: "Package id 0"), 1 to MaxNameBytes long: hwmon
// sensor labels, ethtool statistics.
func Name(s string) bool {
	if s == "" || len(s) > MaxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
