// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package sff

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/sff/sfftest"
)

type half = sfftest.Half

type memory = sfftest.Memory

func hp(addr, page uint8, upper bool) half { return half{Addr: addr, Page: page, Upper: upper} }

func hexBytes(t testing.TB, s string) []byte { return sfftest.HexBytes(t, s) }

// recorded loads a testdata dump (README.md names each source).
func recorded(t testing.TB, name string, spec Spec) *memory {
	return sfftest.Load(t, "testdata/"+name, spec == SFF8472)
}

// near compares decoded values with the expected ones to well below the
// last digit the specs' units give.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func wantOpt(t *testing.T, what string, got Opt[float64], want float64) {
	t.Helper()
	if !got.OK || !near(got.V, want) {
		t.Errorf("%s: %+v, want %v", what, got, want)
	}
}

func wantLimits(t *testing.T, what string, got Opt[Limits], want Limits) {
	t.Helper()
	if !got.OK || !near(got.V.HighAlarm, want.HighAlarm) || !near(got.V.LowAlarm, want.LowAlarm) ||
		!near(got.V.HighWarning, want.HighWarning) || !near(got.V.LowWarning, want.LowWarning) {
		t.Errorf("%s thresholds: %+v, want %+v", what, got, want)
	}
}

func wantReads(t *testing.T, m *memory, want ...half) {
	t.Helper()
	if fmt.Sprint(m.Reads) != fmt.Sprint(want) {
		t.Errorf("reads %v, want %v", m.Reads, want)
	}
}

// A QSFP28 optic on mlxsw: the thresholds are the ones ethtool printed
// for the same bytes; temperature and voltage are the lower page words
// (0x2779 = 39.47 °C, 0x82c5 = 3.3477 V). The lanes read zero (no light
// at the time of the recording): zero is the module's word, so present.
func TestDecodeSFF8636Recorded(t *testing.T) {
	mem := recorded(t, "sff8636-qsfp28-mellanox-mlxsw.txt", SFF8636)
	m, err := Decode(mem)
	if err != nil {
		t.Fatal(err)
	}
	if m.Identifier != IDQSFP28 || m.Spec != SFF8636 || m.Absent != "" {
		t.Fatalf("%+v", m)
	}
	if m.Vendor != "Mellanox" || m.PartNumber != "MMA1B00-SS1" {
		t.Errorf("vendor %q part %q", m.Vendor, m.PartNumber)
	}
	wantOpt(t, "temperature", m.Temperature, 0x2779/256.0)
	wantOpt(t, "voltage", m.Voltage, 3.3477)
	if len(m.Lanes) != 4 {
		t.Fatalf("%d lanes", len(m.Lanes))
	}
	for i, l := range m.Lanes {
		for what, o := range map[string]Opt[float64]{"rx power": l.RxPower, "tx bias": l.TxBias, "tx power": l.TxPower} {
			wantOpt(t, fmt.Sprintf("lane %d %s", i+1, what), o, 0)
		}
	}
	th := m.Thresholds
	if th == nil {
		t.Fatal("no thresholds")
	}
	// ethtool: "Module temperature high alarm threshold : 80.00 degrees C" ...
	wantLimits(t, "temperature", th.Temperature, Limits{80, -10, 70, 0})
	// ethtool prints the voltage alarms (3.5000 V, 3.1000 V); the
	// warnings are the next words, 0x875a and 0x7a76.
	wantLimits(t, "voltage", th.Voltage, Limits{3.5, 3.1, 3.465, 3.135})
	wantLimits(t, "tx bias", th.TxBias, Limits{8.5e-3, 5.492e-3, 8e-3, 6e-3})
	wantLimits(t, "tx power", th.TxPower, Limits{3.4673e-3, 0.0724e-3, 1.7378e-3, 0.1445e-3})
	wantLimits(t, "rx power", th.RxPower, Limits{3.4673e-3, 0.0467e-3, 1.7378e-3, 0.0933e-3})
	wantReads(t, mem, hp(AddrA0, 0, false), hp(AddrA0, 0, true), hp(AddrA0, 3, true))
}

// An 800G DR8 OSFP (CMIS 5.1) carrying light on all eight lanes: page
// 01h advertises temperature, voltage and all three lane monitors (bias
// multiplier x1). Values are the words of the recording in the CMIS
// units; the hexdump came without a decode.
func TestDecodeCMISRecordedDR8(t *testing.T) {
	mem := recorded(t, "cmis-osfp-dr8-juniper-qfx5240.txt", CMIS)
	m, err := Decode(mem)
	if err != nil {
		t.Fatal(err)
	}
	if m.Identifier != IDOSFP || m.Spec != CMIS || m.Absent != "" || m.Identifier.String() != "osfp" {
		t.Fatalf("%+v", m)
	}
	if m.Vendor != "JUNIPER-1G1" || m.PartNumber != "740-174932" {
		t.Errorf("vendor %q part %q", m.Vendor, m.PartNumber)
	}
	wantOpt(t, "temperature", m.Temperature, 0x39ee/256.0)
	wantOpt(t, "voltage", m.Voltage, 3.3057)
	tx := []uint16{0x4d0b, 0x3a21, 0x3b9e, 0x3521, 0x4538, 0x2dc1, 0x48ff, 0x3bc5}
	rx := []uint16{0x4232, 0x4285, 0x521b, 0x42de, 0x40a9, 0x4b4f, 0x29d3, 0x3b8f}
	if len(m.Lanes) != 8 {
		t.Fatalf("%d lanes, want 8", len(m.Lanes))
	}
	for i, l := range m.Lanes {
		wantOpt(t, fmt.Sprintf("lane %d tx power", i+1), l.TxPower, float64(tx[i])*1e-7)
		wantOpt(t, fmt.Sprintf("lane %d rx power", i+1), l.RxPower, float64(rx[i])*1e-7)
		wantOpt(t, fmt.Sprintf("lane %d tx bias", i+1), l.TxBias, 0x88af*2e-6)
	}
	// Lane 1 Rx: 1.6946 mW (+2.29 dBm); the bias 69.982 mA.
	wantOpt(t, "lane 1 rx power", m.Lanes[0].RxPower, 1.6946e-3)
	th := m.Thresholds
	if th == nil {
		t.Fatal("no thresholds")
	}
	wantLimits(t, "temperature", th.Temperature, Limits{76, -6, 73, -3})
	wantLimits(t, "voltage", th.Voltage, Limits{3.7, 3.0, 3.6, 3.05})
	wantLimits(t, "tx power", th.TxPower, Limits{3.981e-3, 0.257e-3, 3.1622e-3, 0.3235e-3})
	wantLimits(t, "tx bias", th.TxBias, Limits{130e-3, 10e-3, 125e-3, 15e-3})
	wantLimits(t, "rx power", th.RxPower, Limits{4.7863e-3, 0.1288e-3, 3.8018e-3, 0.1819e-3})
	wantReads(t, mem, hp(AddrA0, 0, false), hp(AddrA0, 0, true), hp(AddrA0, 1, true),
		hp(AddrA0, 2, true), hp(AddrA0, 0x11, true))
}

// A copper active electrical cable (Credo, CMIS 5.0): page 01h byte 160
// is 0x00, no lane monitor is implemented, so there are no lanes (not
// eight zeros) and page 11h is never read; temperature and voltage are.
func TestDecodeCMISRecordedAEC(t *testing.T) {
	mem := recorded(t, "cmis-osfp-aec-credo-qfx5240.txt", CMIS)
	m, err := Decode(mem)
	if err != nil {
		t.Fatal(err)
	}
	if m.Vendor != "Credo" || m.PartNumber != "CAC845301A2NC2XA" {
		t.Errorf("vendor %q part %q", m.Vendor, m.PartNumber)
	}
	wantOpt(t, "temperature", m.Temperature, 0x3344/256.0)
	wantOpt(t, "voltage", m.Voltage, 3.298)
	if m.Lanes != nil {
		t.Errorf("lanes %+v, want none", m.Lanes)
	}
	th := m.Thresholds
	if th == nil {
		t.Fatal("no thresholds")
	}
	wantLimits(t, "temperature", th.Temperature, Limits{75, -5, 70, 0})
	wantLimits(t, "voltage", th.Voltage, Limits{3.565, 3.035, 3.465, 3.135})
	if th.RxPower.OK || th.TxBias.OK || th.TxPower.OK {
		t.Errorf("lane thresholds of a module without lane monitors: %+v", th)
	}
	wantReads(t, mem, hp(AddrA0, 0, false), hp(AddrA0, 0, true), hp(AddrA0, 1, true), hp(AddrA0, 2, true))
}

// A GPON SFP stick without diagnostics (A0h byte 92 = 0x00): identity
// only, every monitor absent, and A2h never read.
func TestDecodeSFF8472RecordedNoDDM(t *testing.T) {
	mem := recorded(t, "sff8472-sfp-noddm-odi-hack-gpon.txt", SFF8472)
	m, err := Decode(mem)
	if err != nil {
		t.Fatal(err)
	}
	if m.Identifier != IDSFP || m.Spec != SFF8472 || m.Absent != AbsentNoDDM {
		t.Fatalf("%+v", m)
	}
	if m.Vendor != "ODI" || m.PartNumber != "DFP-34X-2C2" {
		t.Errorf("vendor %q part %q", m.Vendor, m.PartNumber)
	}
	if m.Temperature.OK || m.Voltage.OK || m.Lanes != nil || m.Thresholds != nil {
		t.Errorf("monitors of a module without DDM: %+v", m)
	}
	wantReads(t, mem, hp(AddrA0, 0, false))
}

// The SFF-8472 diagnostics path. No recording of an SFP with DDM that
// shows its raw A2h monitor bytes was found, so this runs on the recorded
// A0h of the GPON stick with byte 92 set to "DDM, internally calibrated"
// (0x60) and byte 93 bit 7 (flags implemented), and an A2h whose first row
// is the one recorded in sonic-net/sonic-platform-common pull request 7
// (hd of /sys/bus/i2c/devices/2-0050/eeprom at 0x100: an SFP+'s
// temperature and voltage thresholds) and is zero after it: the monitors
// decode as present (zero is a word the module may hold), the thresholds
// as SFF-8472 Table 9-5 lays them out.
func TestDecodeSFF8472DDMLayout(t *testing.T) {
	mem := recorded(t, "sff8472-sfp-noddm-odi-hack-gpon.txt", SFF8472)
	a0 := mem.Halves[hp(AddrA0, 0, false)]
	a0[92], a0[93] = 0x60, 0x80
	a2 := make([]byte, HalfPage)
	copy(a2, hexBytes(t, "5f 00 e7 00 5a 00 ec 00 94 70 6d 60 90 88 71 48"))
	mem.Halves[hp(AddrA2, 0, false)] = a2
	m, err := Decode(mem)
	if err != nil {
		t.Fatal(err)
	}
	wantOpt(t, "temperature", m.Temperature, 0)
	wantOpt(t, "voltage", m.Voltage, 0)
	if len(m.Lanes) != 1 || !m.Lanes[0].RxPower.OK || !m.Lanes[0].TxBias.OK || !m.Lanes[0].TxPower.OK {
		t.Fatalf("lanes %+v", m.Lanes)
	}
	if m.Thresholds == nil {
		t.Fatal("no thresholds")
	}
	wantLimits(t, "temperature", m.Thresholds.Temperature, Limits{95, -25, 90, -20})
	wantLimits(t, "voltage", m.Thresholds.Voltage, Limits{3.8, 2.8, 3.7, 2.9})
	wantReads(t, mem, hp(AddrA0, 0, false), hp(AddrA2, 0, false))
	a0[92] = 0x50 // DDM, externally calibrated
	if m, err := Decode(mem); err != nil || m.Absent != AbsentExternalCal || m.Temperature.OK {
		t.Errorf("externally calibrated: %+v, %v", m, err)
	}
}

// Variants of the recorded bytes that the specs define: each makes a
// monitor absent, never zero.
func TestDecodeAbsent(t *testing.T) {
	t.Run("sff8636 copper", func(t *testing.T) {
		mem := recorded(t, "sff8636-qsfp28-mellanox-mlxsw.txt", SFF8636)
		mem.Halves[hp(AddrA0, 0, true)][147-128] = 0xA0 // passive copper, unequalized
		m, err := Decode(mem)
		if err != nil || m.Absent != AbsentCopper || m.Temperature.OK || m.Lanes != nil {
			t.Errorf("%+v, %v", m, err)
		}
		mem.Halves[hp(AddrA0, 0, true)][147-128] = 0xC0 // active copper: module monitors only
		m, err = Decode(mem)
		if err != nil || m.Absent != AbsentCopper || !m.Temperature.OK || m.Lanes != nil {
			t.Errorf("%+v, %v", m, err)
		}
	})
	t.Run("sff8636 not ready", func(t *testing.T) {
		mem := recorded(t, "sff8636-qsfp28-mellanox-mlxsw.txt", SFF8636)
		mem.Halves[hp(AddrA0, 0, false)][2] |= 0x01
		m, err := Decode(mem)
		if err != nil || m.Absent != AbsentNotReady || m.Temperature.OK || m.Lanes != nil {
			t.Errorf("%+v, %v", m, err)
		}
	})
	t.Run("sff8636 flat memory, no tx power", func(t *testing.T) {
		mem := recorded(t, "sff8636-qsfp28-mellanox-mlxsw.txt", SFF8636)
		mem.Halves[hp(AddrA0, 0, false)][2] |= 0x04
		mem.Halves[hp(AddrA0, 0, true)][220-128] &^= 0x04
		m, err := Decode(mem)
		if err != nil || m.Thresholds != nil || len(m.Lanes) != 4 || m.Lanes[0].TxPower.OK || !m.Lanes[0].RxPower.OK {
			t.Errorf("%+v, %v", m, err)
		}
		wantReads(t, mem, hp(AddrA0, 0, false), hp(AddrA0, 0, true))
	})
	t.Run("cmis flat memory", func(t *testing.T) {
		mem := recorded(t, "cmis-osfp-dr8-juniper-qfx5240.txt", CMIS)
		mem.Halves[hp(AddrA0, 0, false)][2] |= 0x80
		m, err := Decode(mem)
		if err != nil || m.Absent != AbsentFlat || m.Temperature.OK || m.Lanes != nil || m.Thresholds != nil {
			t.Errorf("%+v, %v", m, err)
		}
		wantReads(t, mem, hp(AddrA0, 0, false), hp(AddrA0, 0, true))
	})
	t.Run("cmis rx power only, bias x4", func(t *testing.T) {
		mem := recorded(t, "cmis-osfp-dr8-juniper-qfx5240.txt", CMIS)
		mem.Halves[hp(AddrA0, 1, true)][159-128] = 0x00
		mem.Halves[hp(AddrA0, 1, true)][160-128] = 0x04 | 0x10
		m, err := Decode(mem)
		if err != nil || m.Temperature.OK || m.Voltage.OK || len(m.Lanes) != 8 || !m.Lanes[0].RxPower.OK || m.Lanes[0].TxBias.OK || m.Lanes[0].TxPower.OK {
			t.Errorf("%+v, %v", m, err)
		}
		mem.Halves[hp(AddrA0, 1, true)][160-128] = 0x01 | 0x10
		m, _ = Decode(mem)
		wantOpt(t, "tx bias x4", m.Lanes[0].TxBias, 4*0x88af*2e-6)
	})
	t.Run("cmis lane count", func(t *testing.T) {
		lower := make([]byte, HalfPage)
		copy(lower[86:], []byte{0x4f, 0x1c, 0x44, 0x01, 0xff}) // 400G DR4 once: 4 lanes (QSFP112)
		if n := cmisMediaLanes(lower); n != 4 {
			t.Errorf("%d lanes, want 4", n)
		}
		lower[86] = 0xff // no application: bank 0's eight
		if n := cmisMediaLanes(lower); n != 8 {
			t.Errorf("%d lanes, want 8", n)
		}
	})
}

// Unreadable, short or unknown memory is an error value, never a panic
// or a plausible module; a missing optional page keeps what was read.
func TestDecodeErrors(t *testing.T) {
	empty := &memory{Halves: map[half][]byte{}}
	if m, err := Decode(empty); err == nil || m != nil {
		t.Errorf("no memory: %+v, %v", m, err)
	}
	short := &memory{Halves: map[half][]byte{hp(AddrA0, 0, false): {0x11, 0x07}}}
	if _, err := Decode(short); !errors.Is(err, ErrTruncated) {
		t.Errorf("2 bytes: %v, want ErrTruncated", err)
	}
	unknown := &memory{Halves: map[half][]byte{hp(AddrA0, 0, false): make([]byte, HalfPage)}}
	if _, err := Decode(unknown); !errors.Is(err, ErrUnknownIdentifier) || !strings.Contains(err.Error(), "0x00") {
		t.Errorf("identifier 0: %v, want ErrUnknownIdentifier", err)
	}
	mem := recorded(t, "cmis-osfp-dr8-juniper-qfx5240.txt", CMIS)
	delete(mem.Halves, hp(AddrA0, 0x11, true))
	m, err := Decode(mem)
	if err == nil || m == nil || !m.Temperature.OK || m.Lanes != nil || m.Thresholds == nil {
		t.Errorf("page 11h unreadable: %+v, %v; want the module monitors and an error", m, err)
	}
	if got := text([]byte("Mell\x00nox")); got != "" {
		t.Errorf("non-printable field: %q", got)
	}
}

// FuzzDecode feeds arbitrary memories: the first 128 bytes are the lower
// page, the rest is cut into the upper halves the decoder may ask for.
// Decode must never panic, and a decoded module stays within its bounds.
func FuzzDecode(f *testing.F) {
	for _, s := range []struct {
		name string
		spec Spec
	}{
		{"sff8636-qsfp28-mellanox-mlxsw.txt", SFF8636}, {"cmis-osfp-dr8-juniper-qfx5240.txt", CMIS},
		{"cmis-osfp-aec-credo-qfx5240.txt", CMIS}, {"sff8472-sfp-noddm-odi-hack-gpon.txt", SFF8472},
	} {
		mem := recorded(f, s.name, s.spec)
		var seed []byte
		for _, h := range []half{hp(AddrA0, 0, false), hp(AddrA0, 0, true), hp(AddrA0, 1, true), hp(AddrA0, 2, true), hp(AddrA0, 3, true), hp(AddrA0, 0x11, true)} {
			b := mem.Halves[h]
			if b == nil {
				b = make([]byte, HalfPage)
			}
			seed = append(seed, b...)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		order := []half{hp(AddrA0, 0, false), hp(AddrA0, 0, true), hp(AddrA0, 1, true), hp(AddrA0, 2, true), hp(AddrA0, 3, true), hp(AddrA0, 0x11, true), hp(AddrA2, 0, false)}
		mem := &memory{Halves: map[half][]byte{}}
		for i, h := range order {
			if lo := i * HalfPage; lo < len(b) {
				mem.Halves[h] = b[lo:min(len(b), lo+HalfPage)]
			}
		}
		m, err := Decode(mem)
		if err != nil && m == nil {
			return
		}
		if len(mem.Reads) > len(order) {
			t.Errorf("%d reads", len(mem.Reads))
		}
		if len(m.Lanes) > cmisLanesPerBank || len(m.Vendor) > 16 || len(m.PartNumber) > 16 {
			t.Errorf("out of bounds: %+v", m)
		}
		_ = m.Identifier.String()
	})
}
