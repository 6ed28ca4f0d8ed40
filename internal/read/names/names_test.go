// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package names

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDevice(t *testing.T) {
	for s, want := range map[string]bool{"mlx5_0": true, "mlx5_bond_0": true, "rocep1s0f1": true, "siw_eth0": true,
		"-i": false, "": false, "mlx5 0": false, "a;b": false} {
		if got := Device(s); got != want {
			t.Errorf("Device(%q) = %v", s, got)
		}
	}
}

func TestHost(t *testing.T) {
	for h, ok := range map[string]bool{"10.0.0.1": true, "fe80::1": true, "node-01.cluster.example": true, "node01.": true,
		"": false, "-oProxyCommand=x": false, "a..b": false, "host_name": false, "a b": false} {
		if err := Host(h); (err == nil) != ok {
			t.Errorf("Host(%q) = %v", h, err)
		}
	}
}

// Printable shows every character a terminal acts on escaped, keeps tab,
// newline and ordinary UTF-8, and returns a clean string as it is.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"mlx5_0":                        "mlx5_0",
		"nœud-ü\tHCA-1\n":               "nœud-ü\tHCA-1\n",
		"\x1b]0;owned\x07":              `\x1b]0;owned\x07`,
		"a\x1b[2Jb\rc\x7f\x00":          `a\x1b[2Jb\x0dc\x7f\x00`,
		"csi\u009b31m":                  `csi\u009b31m`,
		"rtl\u202egpj.exe\u2066x\u2069": `rtl\u202egpj.exe\u2066x\u2069`,
		"host\xff\xc3":                  `host\xff\xc3`,
		"":                              "",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	clean := "mlx5_0/1 LinkUp 4X NDR"
	if got := Printable(clean); got != clean || testing.AllocsPerRun(10, func() { Printable(clean) }) != 0 {
		t.Errorf("a clean string is copied")
	}
}

// Label cuts free text to MaxLabelBytes on a character boundary, repairs
// invalid UTF-8, leaves a short value as it is, and counts what it
// changes.
func TestLabel(t *testing.T) {
	before := Limited(Cut)
	if got := Label("dgx01 HCA-1"); got != "dgx01 HCA-1" || Limited(Cut) != before {
		t.Errorf("a short value changed or counted: %q", got)
	}
	long := strings.Repeat("é", 100_000) // 200 kB, 2-byte characters
	got := Label("x" + long)
	if len(got) > MaxLabelBytes || !utf8.ValidString(got) || !strings.HasPrefix(got, "xéé") || len(got) < MaxLabelBytes-1 {
		t.Errorf("Label(200 kB) = %d bytes %q", len(got), got)
	}
	if got := Label("node\xff"); got != "node\uFFFD" {
		t.Errorf("Label(invalid) = %q", got)
	}
	if n := Limited(Cut) - before; n != 2 {
		t.Errorf("%d cuts counted, want 2", n)
	}
}

func TestTokenAndName(t *testing.T) {
	for s, want := range map[string][2]bool{
		"rx_write_requests":     {true, true},
		"fw.psid":               {true, true},
		"Package id 0":          {false, true},
		"":                      {false, false},
		strings.Repeat("a", 64): {true, true},
		strings.Repeat("a", 65): {false, false},
		"ctr\x1b[2J":            {false, false},
		"nœud":                  {false, false},
	} {
		if Token(s) != want[0] || Name(s) != want[1] {
			t.Errorf("Token(%q) = %v, Name = %v, want %v", s, Token(s), Name(s), want)
		}
	}
}
