// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import "testing"

func TestParseEnum(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Enum
	}{
		{"4: ACTIVE\n", Enum{4, "ACTIVE"}},
		{"5: LinkUp", Enum{5, "LinkUp"}},
		{"7: Phy Test\n", Enum{7, "Phy Test"}},
		{"1: CA\n", Enum{1, "CA"}},
		{"4: RNIC", Enum{4, "RNIC"}},
		{"0: NOP", Enum{0, "NOP"}},
	} {
		got, err := ParseEnum(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseEnum(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "ACTIVE", "x: ACTIVE", "-1: DOWN", "999: X"} {
		if _, err := ParseEnum(in); err == nil {
			t.Errorf("ParseEnum(%q): want error", in)
		}
	}
}

func TestParseGUID(t *testing.T) {
	got, err := ParseGUID("0a7f:bc12:45ef:d23b")
	if err != nil || got != "0x0a7fbc1245efd23b" {
		t.Errorf("ParseGUID = %q, %v", got, err)
	}
	got, err = ParseGUID("58A2:E103:002A:09B8\n")
	if err != nil || got != "0x58a2e103002a09b8" {
		t.Errorf("ParseGUID upper = %q, %v", got, err)
	}
	for _, in := range []string{"", "zzzz", "0a7f:bc12:45ef", "0a7f:bc12:45ef:d23g", "0a7fbc1245efd23b000"} {
		if _, err := ParseGUID(in); err == nil {
			t.Errorf("ParseGUID(%q): want error", in)
		}
	}
}

// A port GUID is GID 0's low half, whatever the subnet prefix; what is not
// a GID, or a GID whose low half is zero (an unset GID, an iWARP MAC GID),
// is no port GUID.
func TestParsePortGUID(t *testing.T) {
	for in, want := range map[string]string{
		// mlx4-qdr port 1: ibstat's "Port GUID: 0x0002c9030031fdc1".
		"fe80:0000:0000:0000:0002:c903:0031:fdc1\n": "0x0002c9030031fdc1",
		// A subnet prefix set by the SM (opensm's subnet_prefix).
		"fec0:0000:0000:0001:946D:AE03:00CD:E72C": "0x946dae0300cde72c",
	} {
		got, err := ParsePortGUID(in)
		if err != nil || got != want {
			t.Errorf("ParsePortGUID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "fe80::2:c903:31:fdc1", "0002:c903:0031:fdc1",
		"fe80:0000:0000:0000:0000:0000:0000:0000", // no port GUID
		"a4bf:012c:5e10:0000:0000:0000:0000:0000", // i40iw: the MAC, low half zero
		"fe80:0000:0000:0000:0002:c903:0031:fdcg",
		"fe8g:0000:0000:0000:0002:c903:0031:fdc1",
		"fe80:0000:0000:0000-0002:c903:0031:fdc1",
	} {
		if g, err := ParsePortGUID(in); err == nil {
			t.Errorf("ParsePortGUID(%q) = %q: want error", in, g)
		}
	}
}

func TestParseHex(t *testing.T) {
	for in, want := range map[string]uint64{"0x0\n": 0, "0x2659e848": 0x2659e848, "0x00010000\n": 0x10000, "0xffff": 65535} {
		got, err := ParseHex(in)
		if err != nil || got != want {
			t.Errorf("ParseHex(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "12", "0x", "0xzz"} {
		if _, err := ParseHex(in); err == nil {
			t.Errorf("ParseHex(%q): want error", in)
		}
	}
}

func FuzzParseEnum(f *testing.F) {
	for _, s := range []string{"4: ACTIVE\n", "5: LinkUp", "1: CA", "7: Phy Test"} {
		f.Add(s)
	}
	addFixtureSeeds(f, "*/ports/*/state")
	addFixtureSeeds(f, "*/ports/*/phys_state")
	addFixtureSeeds(f, "*/node_type")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEnum(s)
		if err == nil && (e.Value < 0 || e.Value > 255) {
			t.Fatalf("ParseEnum(%q) = %+v", s, e)
		}
	})
}

func FuzzParseGUID(f *testing.F) {
	f.Add("0a7f:bc12:45ef:d23b")
	f.Add("58a2:e103:002a:09b8\n")
	addFixtureSeeds(f, "*/node_guid")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGUID(s)
		if err == nil && len(g) != 18 {
			t.Fatalf("ParseGUID(%q) = %q", s, g)
		}
	})
}

func FuzzParsePortGUID(f *testing.F) {
	f.Add("fe80:0000:0000:0000:0002:c903:0031:fdc1\n")
	addFixtureSeeds(f, "*/ports/*/gids/0")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParsePortGUID(s)
		if err == nil && (len(g) != 18 || g == "0x0000000000000000") {
			t.Fatalf("ParsePortGUID(%q) = %q", s, g)
		}
	})
}
