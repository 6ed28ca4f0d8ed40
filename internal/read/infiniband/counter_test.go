// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"errors"
	"testing"
)

func TestParseCounter(t *testing.T) {
	for in, want := range map[string]uint64{
		"0\n": 0, "205128687774249": 205128687774249, "4294967295\n": 4294967295, "18446744073709551615": ^uint64(0),
	} {
		got, err := ParseCounter(in)
		if err != nil || got != want {
			t.Errorf("ParseCounter(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseCounter("N/A (no PMA)\n"); !errors.Is(err, ErrNoPMA) {
		t.Errorf("N/A (no PMA): err = %v, want ErrNoPMA", err)
	}
	for _, in := range []string{"", "garbage", "-5", "99999999999999999999999", "1.5"} {
		if _, err := ParseCounter(in); err == nil || errors.Is(err, ErrNoPMA) {
			t.Errorf("ParseCounter(%q): err = %v, want a parse error", in, err)
		}
	}
}

func TestSaturated(t *testing.T) {
	spec := func(f string) CounterSpec {
		s, ok := LookupCounter(f)
		if !ok {
			t.Fatalf("no spec for %s", f)
		}
		return s
	}
	// Real values from shared/realdata/tools/sysfs-counters-cx7-saturated-gpud-pr943.txt.
	for _, tc := range []struct {
		file string
		v    uint64
		ext  bool
		want bool
	}{
		{"link_downed", 255, true, true},
		{"link_downed", 254, true, false},
		{"port_xmit_discards", 65535, true, true},
		{"port_xmit_wait", 4294967295, true, true},
		{"excessive_buffer_overrun_errors", 15, true, true},
		{"symbol_error", 0, true, false},
		{"port_rcv_data", 205128687774249, true, false},
		{"port_rcv_data", 4294967295, false, true},
		{"port_rcv_data", 4294967295, true, false},
		{"port_xmit_packets", ^uint64(0), true, true},
	} {
		if got := spec(tc.file).Saturated(tc.v, tc.ext); got != tc.want {
			t.Errorf("%s=%d ext=%v: saturated %v, want %v", tc.file, tc.v, tc.ext, got, tc.want)
		}
	}
}

func FuzzParseCounter(f *testing.F) {
	for _, s := range []string{"0\n", "205128687774249", "N/A (no PMA)\n", "garbage", "4294967295"} {
		f.Add(s)
	}
	addFixtureSeeds(f, "*/ports/*/counters/*")
	addFixtureSeeds(f, "*/ports/*/hw_counters/*")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseCounter(s)
		if err == nil && v > 0 && len(s) == 0 {
			t.Fatalf("ParseCounter(%q) = %d", s, v)
		}
	})
}
