// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in    string
		gbps  float64
		width int
		speed string
	}{
		// Every form the kernel has printed; the first seven are in
		// shared/realdata (sysfs trees and tool outputs).
		{"10 Gb/sec (4X)\n", 10, 4, "SDR"},
		{"40 Gb/sec (4X QDR)\n", 40, 4, "QDR"},
		{"100 Gb/sec (4X EDR)\n", 100, 4, "EDR"},
		{"25 Gb/sec (1X EDR)\n", 25, 1, "EDR"},
		{"400 Gb/sec (4X NDR)", 400, 4, "NDR"},
		{"200 Gb/sec (2X NDR)", 200, 2, "NDR"},
		{"2.5 Gb/sec (1X SDR)\n", 2.5, 1, "SDR"},
		{"40 Gb/sec (4X FDR10)\n", 40, 4, "FDR10"},
		{"56 Gb/sec (4X FDR)\n", 56, 4, "FDR"},
		{"168 Gb/sec (12X FDR)\n", 168, 12, "FDR"},
		{"100 Gb/sec (2X HDR)\n", 100, 2, "HDR"},
		{"200 Gb/sec (4X HDR)\n", 200, 4, "HDR"},
		{"800 Gb/sec (4X XDR)\n", 800, 4, "XDR"},
		{"2400 Gb/sec (12X XDR)\n", 2400, 12, "XDR"},
		{"20 Gb/sec (4X DDR)\n", 20, 4, "DDR"},
		{"30 Gb/sec (12X)\n", 30, 12, "SDR"},
		{"5 Gb/sec (2X)", 5, 2, "SDR"},
	} {
		r, err := ParseRate(tc.in)
		if err != nil {
			t.Errorf("ParseRate(%q): %v", tc.in, err)
			continue
		}
		if r.Gbps != tc.gbps || r.Width != tc.width || r.Speed != tc.speed {
			t.Errorf("ParseRate(%q) = %+v, want %v Gb/s %dX %s", tc.in, r, tc.gbps, tc.width, tc.speed)
		}
	}
}

func TestParseRateBytes(t *testing.T) {
	r, err := ParseRate("100 Gb/sec (4X EDR)")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.BytesPerSecond(); got != 12.5e9 {
		t.Errorf("BytesPerSecond = %v, want 12.5e9", got)
	}
	if got := r.WidthLabel(); got != "4X" {
		t.Errorf("WidthLabel = %q", got)
	}
}

func TestParseRateErrors(t *testing.T) {
	for _, in := range []string{
		"", "fast", "400", "400 Gb/sec", "400 Gb/sec (4X NDR", "x Gb/sec (4X NDR)",
		"400 Gb/sec (3X NDR)", "400 Gb/sec (4X WDR)", "400 Gb/sec (X NDR)", "-1 Gb/sec (4X)",
		"400 Gb/sec (4 NDR)", "NaN Gb/sec (4X)", "Inf Gb/sec (4X)",
	} {
		if r, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %+v, want error", in, r)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10 Gb/sec (4X)\n", "40 Gb/sec (4X QDR)\n", "400 Gb/sec (4X NDR)", "200 Gb/sec (2X NDR)", "2.5 Gb/sec (1X SDR)\n", "fast"} {
		f.Add(s)
	}
	addFixtureSeeds(f, "*/ports/*/rate")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if r.Width <= 0 || r.Gbps < 0 || r.Gbps != r.Gbps {
			t.Fatalf("ParseRate(%q) = %+v: accepted nonsense", s, r)
		}
		if !strings.Contains(s, "Gb/sec") {
			t.Fatalf("ParseRate(%q) accepted a string without a unit", s)
		}
	})
}
