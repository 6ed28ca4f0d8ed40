// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"fmt"
	"strconv"
	"strings"
)

// Rate is a parsed ports/N/rate attribute.
type Rate struct {
	// Gbps is the active rate in Gb/s, lanes × lane rate (2.5 for 1X SDR).
	Gbps float64
	// Width is the number of lanes: 1, 2, 4, 8 or 12.
	Width int
	// Speed is the per-lane speed name: SDR, DDR, QDR, FDR10, FDR, EDR, HDR,
	// NDR or XDR. Kernels before the SDR suffix was added printed none
	// ("10 Gb/sec (4X)"); Speed is then derived from the lane rate.
	Speed string
}

// BytesPerSecond is the active rate in bytes per second.
func (r Rate) BytesPerSecond() float64 { return r.Gbps * 1e9 / 8 }

// WidthLabel is the width as the kernel and ibstat print it: "4X".
func (r Rate) WidthLabel() string { return strconv.Itoa(r.Width) + "X" }

// laneGbps is the per-lane data rate of each speed name as the kernel computes
// it (drivers/infiniband/core/sysfs.c, rate_show and its successors).
var laneGbps = map[string]float64{
	"SDR": 2.5, "DDR": 5, "QDR": 10, "FDR10": 10, "FDR": 14,
	"EDR": 25, "HDR": 50, "NDR": 100, "XDR": 200,
}

// LaneGbps is the per-lane data rate of a speed name ("HDR": 50), as the
// kernel's rate file counts it: the one table, shared with the fabric
// parser so a fabric link and the local port it ends on agree.
func LaneGbps(speed string) (float64, bool) {
	g, ok := laneGbps[speed]
	return g, ok
}

var validWidths = map[int]bool{1: true, 2: true, 4: true, 8: true, 12: true}

// ParseRate parses every form the kernel has printed for ports/N/rate:
// "%d%s Gb/sec (%dX%s)" with an optional ".5" and an optional speed name
// ("2.5 Gb/sec (1X SDR)", "10 Gb/sec (4X)", "40 Gb/sec (4X FDR10)",
// "200 Gb/sec (2X NDR)"), with or without the trailing newline.
//
// On Ethernet (RoCE) ports mlx5 maps the Ethernet link mode onto an IB
// (width, speed) pair, so the same format appears; only Gbps is meaningful
// there.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	num, rest, ok := strings.Cut(s, " Gb/sec (")
	if !ok || !strings.HasSuffix(rest, ")") {
		return Rate{}, fmt.Errorf("rate %q: want \"<n> Gb/sec (<w>X <speed>)\"", s)
	}
	gbps, err := strconv.ParseFloat(num, 64)
	if err != nil || !(gbps >= 0 && gbps <= 1e6) {
		return Rate{}, fmt.Errorf("rate %q: bad number %q", s, num)
	}
	rest = strings.TrimSuffix(rest, ")")
	w, speed, ok := strings.Cut(rest, "X")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: no width", s)
	}
	width, err := strconv.Atoi(w)
	if err != nil || !validWidths[width] {
		return Rate{}, fmt.Errorf("rate %q: bad width %q", s, w)
	}
	speed = strings.TrimSpace(speed)
	if speed == "" {
		speed = speedForLane(gbps / float64(width))
	} else if _, known := laneGbps[speed]; !known {
		return Rate{}, fmt.Errorf("rate %q: unknown speed %q", s, speed)
	}
	return Rate{Gbps: gbps, Width: width, Speed: speed}, nil
}

// speedForLane names a lane rate for the old format that printed no name.
// Only SDR was ever printed without one; an unknown rate stays unnamed.
func speedForLane(g float64) string {
	for _, name := range []string{"SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "XDR"} {
		if laneGbps[name] == g {
			return name
		}
	}
	return ""
}
