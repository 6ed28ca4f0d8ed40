// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"strings"
	"testing"
)

func TestParseIPoIBAddress(t *testing.T) {
	for _, tc := range []struct {
		in    string
		flags byte
		qpn   uint32
		gid   string
		cm    bool
		err   bool
	}{
		// mlx4 legacy IPoIB (connected mode available), fixture mlx4-qdr ib0
		{"80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:31:fd:c1\n", 0x80, 0x208, "fe80:0000:0000:0000:0002:c903:0031:fdc1", true, false},
		// mlx5 enhanced IPoIB, fixture dgx-h100 ibp26s0
		{"00:00:10:47:fe:80:00:00:00:00:00:00:94:6d:ae:03:00:cd:e7:2c\n", 0, 0x1047, "fe80:0000:0000:0000:946d:ae03:00cd:e72c", false, false},
		{"c0:ff:ff:ff:fe:80:00:00:00:00:00:00:94:6d:ae:03:00:cd:e7:2c", 0xc0, 0xffffff, "fe80:0000:0000:0000:946d:ae03:00cd:e72c", true, false},
		{"0c:42:a1:1d:d1:2a\n", 0, 0, "", false, true}, // an Ethernet MAC
		{"", 0, 0, "", false, true},
		{"80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:31:fd:zz", 0, 0, "", false, true},
		{"800:0:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:31:fd:c1", 0, 0, "", false, true},
	} {
		a, err := ParseIPoIBAddress(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseIPoIBAddress(%q) error %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if err == nil && (a.Flags != tc.flags || a.QPN != tc.qpn || a.GID != tc.gid || a.ConnectedModeSupported() != tc.cm) {
			t.Errorf("ParseIPoIBAddress(%q) = %+v (cm %v), want flags %#x qpn %#x gid %s cm %v", tc.in, a, a.ConnectedModeSupported(), tc.flags, tc.qpn, tc.gid, tc.cm)
		}
	}
}

func TestParseSmall(t *testing.T) {
	type result struct {
		v   any
		err bool
	}
	check := func(name, in string, v any, err error, want result) {
		t.Helper()
		if (err != nil) != want.err || (err == nil && v != want.v) {
			t.Errorf("%s(%q) = %v, %v; want %v (error %v)", name, in, v, err, want.v, want.err)
		}
	}
	for in, want := range map[string]result{"datagram\n": {"datagram", false}, "connected": {"connected", false}, "bogus\n": {nil, true}, "": {nil, true}} {
		v, err := ParseMode(in)
		check("ParseMode", in, v, err, want)
	}
	for in, want := range map[string]result{"IB/RoCE v1\n": {GIDRoCEv1, false}, "RoCE v2\n": {GIDRoCEv2, false}, "RoCE v1": {GIDRoCEv1, false}, "RoCE v3\n": {nil, true}, "": {nil, true}} {
		v, err := ParseGIDType(in)
		check("ParseGIDType", in, v, err, want)
	}
	for in, want := range map[string]result{"1\n": {true, false}, "0\n": {false, false}, "yes\n": {nil, true}, "": {nil, true}, "2": {nil, true}} {
		v, err := ParseBool01(in)
		check("ParseBool01", in, v, err, want)
	}
	for in, want := range map[string]result{"up\n": {"up", false}, "lowerlayerdown\n": {"lowerlayerdown", false}, "UP\n": {nil, true}, "": {nil, true}} {
		v, err := ParseOperState(in)
		check("ParseOperState", in, v, err, want)
	}
	for in, want := range map[string]result{"0\n": {0, false}, "1\n": {1, false}, "0x1\n": {1, false}, "0x0": {0, false}, "-1\n": {nil, true}, "256": {nil, true}, "": {nil, true}, "0x": {nil, true}} {
		v, err := infiniband.ParseDevPort(in)
		check("ParseDevPort", in, v, err, want)
	}
	for in, want := range map[string]result{
		"rx_pcs_symbol_err_phy": {"rx_pcs_symbol_err_phy", false},
		// mlx5's pport_pfc_stall_stats_desc once had a trailing space
		"tx_pause_storm_warning_events ": {"tx_pause_storm_warning_events", false},
		"rx queue 0 packets":             {"rx queue 0 packets", false},
		"":                               {nil, true},
		"   ":                            {nil, true},
		"bad\x01name":                    {nil, true},
		"caf\xc3\xa9":                    {nil, true},
		strings.Repeat("x", names.MaxNameBytes+1): {nil, true}, // the label policy's bound
	} {
		v, err := CleanStatName(in)
		check("CleanStatName", in, v, err, want)
	}
}

func fixtureSeeds(f *testing.F, pattern string) { hostfstest.Seeds(f, "*/sys/"+pattern) }

func FuzzParseIPoIBAddress(f *testing.F) {
	fixtureSeeds(f, "class/net/ib*/address")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseIPoIBAddress(s)
		if err != nil {
			return
		}
		if len(a.GID) != 39 || a.QPN > 0xffffff {
			t.Errorf("%q: %+v", s, a)
		}
	})
}

func FuzzParseGIDType(f *testing.F) {
	fixtureSeeds(f, "class/infiniband/*/ports/*/gid_attrs/types/*")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseGIDType(s); err == nil && v != GIDRoCEv1 && v != GIDRoCEv2 {
			t.Errorf("%q: %q", s, v)
		}
	})
}

func FuzzParseDevPort(f *testing.F) {
	fixtureSeeds(f, "class/net/*/dev_port")
	fixtureSeeds(f, "class/net/*/dev_id")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := infiniband.ParseDevPort(s); err == nil && (v < 0 || v > 255) {
			t.Errorf("%q: %d", s, v)
		}
	})
}

func FuzzParseAttrs(f *testing.F) {
	fixtureSeeds(f, "class/net/*/mode")
	fixtureSeeds(f, "class/net/*/operstate")
	fixtureSeeds(f, "class/net/*/carrier")
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := ParseMode(s); err == nil && m != ModeDatagram && m != ModeConnected {
			t.Errorf("mode %q", m)
		}
		if st, err := ParseOperState(s); err == nil && st != strings.TrimSpace(s) {
			t.Errorf("operstate %q from %q", st, s)
		}
		if _, err := ParseBool01(s); err == nil && strings.TrimSpace(s) != "0" && strings.TrimSpace(s) != "1" {
			t.Errorf("bool from %q", s)
		}
	})
}

func FuzzCleanStatName(f *testing.F) {
	for _, s := range strings.Split(DefaultStats, "|") {
		f.Add(s)
	}
	f.Add("tx_pause_storm_warning_events ")
	f.Add("peer_ifindex")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := CleanStatName(s)
		if err != nil {
			return
		}
		if n != strings.TrimSpace(n) || n == "" || len(n) > names.MaxNameBytes {
			t.Errorf("%q -> %q", s, n)
		}
		for i := 0; i < len(n); i++ {
			if n[i] < 0x20 || n[i] > 0x7e {
				t.Errorf("%q -> %q has byte %#x", s, n, n[i])
			}
		}
	})
}
