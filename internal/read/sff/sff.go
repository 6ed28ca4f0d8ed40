// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package sff decodes the digital diagnostics of a pluggable transceiver's
// management memory: module temperature, supply voltage and, per lane, Rx
// power, Tx bias and Tx power, with the module's own alarm and warning
// thresholds. The module type comes from byte 0 (SFF-8024 identifier) and
// picks the memory map: SFF-8472 for SFP (diagnostics at I2C address
// 0x51), SFF-8636 for QSFP+/QSFP28 (monitors in lower page 00h,
// thresholds in page 03h), CMIS for QSFP-DD, OSFP and QSFP+ with CMIS
// (module monitors in lower page 00h, what is implemented in page 01h,
// thresholds in page 02h, lane monitors in page 11h).
//
// The decoder asks a Reader for each half page it needs, and only those:
// a read is a firmware access on most NICs. What a module does not
// implement is absent, never zero.
package sff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing.
type Opt[T any] = sysattr.Opt[T]

func some[T any](v T) Opt[T] { return sysattr.Some(v) }

// I2C addresses of the management memory (7-bit).
const (
	AddrA0 = 0x50
	// AddrA2 is SFF-8472's diagnostics address.
	AddrA2 = 0x51
)

// HalfPage is the size of one read: the lower half of page 00h (offset
// 0) or the upper half of a page (offset 128). The kernel's
// MODULE_EEPROM_GET reads at most this much without crossing offset 128.
const HalfPage = 128

// Reader reads length bytes at offset (0-255) of a page of the memory
// at an I2C address, bank 0. Offsets below 128 exist for page 0 only.
type Reader interface {
	Read(addr, page uint8, offset, length int) ([]byte, error)
}

// Identifier is the SFF-8024 identifier, byte 0 of the memory.
type Identifier uint8

// The identifiers decoded here (SFF-8024 Table 4-1).
const (
	IDSFP      Identifier = 0x03
	IDQSFP     Identifier = 0x0C
	IDQSFPPlus Identifier = 0x0D
	IDQSFP28   Identifier = 0x11
	IDQSFPDD   Identifier = 0x18
	IDOSFP     Identifier = 0x19
	IDQSFPCMIS Identifier = 0x1E
)

// String is the identifier's label value.
func (id Identifier) String() string {
	switch id {
	case IDSFP:
		return "sfp"
	case IDQSFP:
		return "qsfp"
	case IDQSFPPlus:
		return "qsfp_plus"
	case IDQSFP28:
		return "qsfp28"
	case IDQSFPDD:
		return "qsfp_dd"
	case IDOSFP:
		return "osfp"
	case IDQSFPCMIS:
		return "qsfp_cmis"
	}
	return fmt.Sprintf("0x%02x", uint8(id))
}

// Spec is the memory map a module follows.
type Spec string

// The memory maps.
const (
	SFF8472 Spec = "sff8472"
	SFF8636 Spec = "sff8636"
	CMIS    Spec = "cmis"
)

// SpecOf is the memory map of an identifier; false for one not decoded.
func SpecOf(id Identifier) (Spec, bool) {
	switch id {
	case IDSFP:
		return SFF8472, true
	case IDQSFP, IDQSFPPlus, IDQSFP28:
		return SFF8636, true
	case IDQSFPDD, IDOSFP, IDQSFPCMIS:
		return CMIS, true
	}
	return "", false
}

// Errors of Decode.
var (
	// ErrUnknownIdentifier is a byte 0 this package has no memory map
	// for (0x00 is what an empty or unreadable cage often returns).
	ErrUnknownIdentifier = errors.New("unknown module identifier")
	// ErrTruncated is a read that returned fewer bytes than asked.
	ErrTruncated = errors.New("truncated module memory")
)

// Why monitors are absent (Module.Absent): a bounded set.
const (
	// AbsentNoDDM: SFF-8472 byte 92 bit 6 clear, no diagnostics.
	AbsentNoDDM = "no_ddm"
	// AbsentExternalCal: SFF-8472 externally calibrated diagnostics,
	// whose slope and offset constants this package does not apply.
	AbsentExternalCal = "externally_calibrated"
	// AbsentCopper: an SFF-8636 copper cable (SFF-8636 byte 147):
	// no optical lane monitors; passive ones no module monitors either.
	AbsentCopper = "copper"
	// AbsentFlat: a CMIS module with flat memory (lower page byte 2
	// bit 7): no page 01h to say what is monitored, no lane monitors.
	AbsentFlat = "flat_memory"
	// AbsentNotReady: SFF-8636 Data_Not_Ready (byte 2 bit 0): the
	// monitors are not valid yet.
	AbsentNotReady = "not_ready"
)

// Module is the decoded memory of one transceiver.
type Module struct {
	Identifier Identifier
	Spec       Spec
	// Vendor and PartNumber are the trimmed ASCII fields; empty when the
	// field holds anything but printable ASCII.
	Vendor, PartNumber string
	// Temperature is the module temperature in °C.
	Temperature Opt[float64]
	// Voltage is the supply voltage in volts.
	Voltage Opt[float64]
	// Lanes are the media lanes' monitors (1 for SFP, 4 for SFF-8636,
	// up to 8 for CMIS); nil when the module has no lane monitors.
	Lanes []Lane
	// Thresholds are the module's own alarm and warning limits; nil when
	// the module has none (or the page holding them was not read).
	Thresholds *Thresholds
	// Absent says why the monitors are absent (Absent* constants), ""
	// when they were decoded.
	Absent string
}

// Lane is the monitors of one media lane, in base units.
type Lane struct {
	// RxPower is the received optical power in watts (average, or OMA
	// where an SFF-8636 module says so).
	RxPower Opt[float64]
	// TxBias is the laser bias current in amperes.
	TxBias Opt[float64]
	// TxPower is the transmitted optical power in watts.
	TxPower Opt[float64]
}

// Limits are the four thresholds of one quantity, in its base unit.
type Limits struct {
	HighAlarm, LowAlarm, HighWarning, LowWarning float64
}

// Thresholds are a module's alarm and warning limits, module-wide (the
// same for every lane).
type Thresholds struct {
	Temperature, Voltage, RxPower, TxBias, TxPower Opt[Limits]
}

// Units of the monitor words (SFF-8472 §9.2, SFF-8636 §6.2.4, CMIS
// §8.2.5 and §8.9.4).
const (
	voltUnit  = 100e-6 // 100 µV
	powerUnit = 0.1e-6 // 0.1 µW
	biasUnit  = 2e-6   // 2 µA
)

func u16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }

func temperature(b []byte, off int) float64 { return float64(int16(u16(b, off))) / 256 }
func voltage(b []byte, off int) float64     { return float64(u16(b, off)) * voltUnit }
func power(b []byte, off int) float64       { return float64(u16(b, off)) * powerUnit }
func bias(b []byte, off int) float64        { return float64(u16(b, off)) * biasUnit }

// limits reads four thresholds in the order the specs keep them: high
// alarm, low alarm, high warning, low warning.
func limits(b []byte, off int, conv func([]byte, int) float64) Opt[Limits] {
	return some(Limits{HighAlarm: conv(b, off), LowAlarm: conv(b, off+2), HighWarning: conv(b, off+4), LowWarning: conv(b, off+6)})
}

// read asks r for a half page and checks its length.
func read(r Reader, addr, page uint8, offset int) ([]byte, error) {
	b, err := r.Read(addr, page, offset, HalfPage)
	if err != nil {
		return nil, fmt.Errorf("module memory 0x%02x page 0x%02x offset %d: %w", addr, page, offset, err)
	}
	if len(b) < HalfPage {
		return nil, fmt.Errorf("%w: 0x%02x page 0x%02x offset %d: %d of %d bytes", ErrTruncated, addr, page, offset, len(b), HalfPage)
	}
	return b[:HalfPage], nil
}

// text is a fixed-width ASCII field, trimmed; "" when it holds anything
// but printable ASCII (a label value must stay clean and bounded).
func text(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return ""
		}
	}
	return strings.TrimSpace(string(b))
}

// Decode reads and decodes a module's diagnostics. It returns an error
// for an unknown identifier and for a read that fails or comes back
// short; a module whose optional pages could not be read is returned
// with what was decoded, along with the error.
func Decode(r Reader) (*Module, error) {
	lower, err := read(r, AddrA0, 0, 0)
	if err != nil {
		return nil, err
	}
	id := Identifier(lower[0])
	spec, ok := SpecOf(id)
	if !ok {
		return nil, fmt.Errorf("%w 0x%02x", ErrUnknownIdentifier, lower[0])
	}
	m := &Module{Identifier: id, Spec: spec}
	switch spec {
	case SFF8472:
		err = decode8472(r, lower, m)
	case SFF8636:
		err = decode8636(r, lower, m)
	default:
		err = decodeCMIS(r, lower, m)
	}
	return m, err
}

// decode8472 decodes an SFP: identity and diagnostic type in A0h, the
// diagnostics in A2h (SFF-8472 rev 12.4 Tables 4-1, 8-5, 9-5, 9-11).
func decode8472(r Reader, a0 []byte, m *Module) error {
	m.Vendor, m.PartNumber = text(a0[20:36]), text(a0[40:56])
	diag := a0[92]
	switch {
	case diag&0x40 == 0:
		m.Absent = AbsentNoDDM
		return nil
	case diag&0x20 == 0 && diag&0x10 != 0:
		m.Absent = AbsentExternalCal
		return nil
	}
	a2, err := read(r, AddrA2, 0, 0)
	if err != nil {
		return err
	}
	m.Temperature = some(temperature(a2, 96))
	m.Voltage = some(voltage(a2, 98))
	m.Lanes = []Lane{{TxBias: some(bias(a2, 100)), TxPower: some(power(a2, 102)), RxPower: some(power(a2, 104))}}
	// Byte 93 bit 7: alarm and warning flags (and their thresholds in
	// A2h bytes 0-39) implemented.
	if a0[93]&0x80 != 0 {
		m.Thresholds = &Thresholds{
			Temperature: limits(a2, 0, temperature), Voltage: limits(a2, 8, voltage),
			TxBias: limits(a2, 16, bias), TxPower: limits(a2, 24, power), RxPower: limits(a2, 32, power),
		}
	}
	return nil
}

// decode8636 decodes a QSFP+/QSFP28 (SFF-8636 rev 2.10a: lower page
// Table 6-7, upper page 00h Table 6-14, page 03h Table 6-26).
func decode8636(r Reader, lower []byte, m *Module) error {
	upper, err := read(r, AddrA0, 0, HalfPage)
	if err != nil {
		return err
	}
	// upper is page 00h bytes 128-255: byte n is upper[n-128].
	m.Vendor, m.PartNumber = text(upper[148-128:164-128]), text(upper[168-128:184-128])
	if lower[2]&0x01 != 0 {
		m.Absent = AbsentNotReady
		return nil
	}
	// Byte 147 bits 7-4, transmitter technology: 1010b and 1011b are
	// passive copper, 1100b-1111b active copper: no laser, no lane
	// monitors.
	tech := upper[147-128] >> 4
	if tech >= 0xA {
		m.Absent = AbsentCopper
		if tech >= 0xC {
			m.Temperature = some(temperature(lower, 22))
			m.Voltage = some(voltage(lower, 26))
		}
		return nil
	}
	m.Temperature = some(temperature(lower, 22))
	m.Voltage = some(voltage(lower, 26))
	// Byte 220 bit 2: Tx power measurement supported.
	txPower := upper[220-128]&0x04 != 0
	m.Lanes = make([]Lane, 4)
	for i := range m.Lanes {
		l := &m.Lanes[i]
		l.RxPower = some(power(lower, 34+2*i))
		l.TxBias = some(bias(lower, 42+2*i))
		if txPower {
			l.TxPower = some(power(lower, 50+2*i))
		}
	}
	// Byte 2 bit 2, Flat_mem: only page 00h; otherwise page 03h holds
	// the thresholds (p3[n-128] is byte n; temperature at 128).
	if lower[2]&0x04 != 0 {
		return nil
	}
	p3, err := read(r, AddrA0, 3, HalfPage)
	if err != nil {
		return err
	}
	t := &Thresholds{
		Temperature: limits(p3, 0, temperature), Voltage: limits(p3, 144-128, voltage),
		RxPower: limits(p3, 176-128, power), TxBias: limits(p3, 184-128, bias),
	}
	if txPower {
		t.TxPower = limits(p3, 192-128, power)
	}
	m.Thresholds = t
	return nil
}

// decodeCMIS decodes a CMIS module (CMIS 5.2: lower page Table 8-4 and
// 8-10, page 00h Table 8-24, page 01h Table 8-41 and 8-43, page 02h
// Table 8-62, page 11h Table 8-91).
func decodeCMIS(r Reader, lower []byte, m *Module) error {
	upper, err := read(r, AddrA0, 0, HalfPage)
	if err != nil {
		return err
	}
	m.Vendor, m.PartNumber = text(upper[129-128:145-128]), text(upper[148-128:164-128])
	// Lower page byte 2 bit 7, MemoryModel: flat memory has no page 01h
	// advertising monitors, and none of the lane pages.
	if lower[2]&0x80 != 0 {
		m.Absent = AbsentFlat
		return nil
	}
	p1, err := read(r, AddrA0, 1, HalfPage)
	if err != nil {
		return err
	}
	// Page 01h byte 159: module monitors implemented (bit 0
	// temperature, bit 1 supply voltage); byte 160: lane monitors (bit 0
	// Tx bias, bit 1 Tx power, bit 2 Rx power) and bits 4-3 the Tx bias
	// current multiplier (x1, x2, x4).
	mod, lane := p1[159-128], p1[160-128]
	if mod&0x01 != 0 {
		m.Temperature = some(temperature(lower, 14))
	}
	if mod&0x02 != 0 {
		m.Voltage = some(voltage(lower, 16))
	}
	biasMult := float64(uint(1) << ((lane >> 3) & 0x03))
	hasBias, hasTx, hasRx := lane&0x01 != 0, lane&0x02 != 0, lane&0x04 != 0
	var errs []error
	// Page 02h, p2[n-128] is byte n: temperature limits at 128.
	if p2, err := read(r, AddrA0, 2, HalfPage); err == nil {
		t := &Thresholds{}
		if mod&0x01 != 0 {
			t.Temperature = limits(p2, 0, temperature)
		}
		if mod&0x02 != 0 {
			t.Voltage = limits(p2, 136-128, voltage)
		}
		if hasTx {
			t.TxPower = limits(p2, 176-128, power)
		}
		if hasBias {
			t.TxBias = limits(p2, 184-128, func(b []byte, off int) float64 { return bias(b, off) * biasMult })
		}
		if hasRx {
			t.RxPower = limits(p2, 192-128, power)
		}
		m.Thresholds = t
	} else {
		errs = append(errs, err)
	}
	if !hasBias && !hasTx && !hasRx {
		return errors.Join(errs...)
	}
	p11, err := read(r, AddrA0, 0x11, HalfPage)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	m.Lanes = make([]Lane, cmisMediaLanes(lower))
	for i := range m.Lanes {
		l := &m.Lanes[i]
		if hasTx {
			l.TxPower = some(power(p11, 154-128+2*i))
		}
		if hasBias {
			l.TxBias = some(bias(p11, 170-128+2*i) * biasMult)
		}
		if hasRx {
			l.RxPower = some(power(p11, 186-128+2*i))
		}
	}
	return errors.Join(errs...)
}

// cmisLanesPerBank is the lanes page 11h of one bank monitors.
const cmisLanesPerBank = 8

// cmisMediaLanes is how many media lanes the module has: the most any
// advertised application covers (its media lane count times the data
// paths its host lane assignment allows) in the lower page's list
// (bytes 86-117, four bytes each, ended by host interface 0xFF). An
// 800G 2xDR4 module advertises 400G DR4 on 4 lanes twice (assignment
// 0x11): 8 lanes; a 400G QSFP112 DR4 advertises 4. Bank 0 only (8
// lanes); a list without any application is taken as 8.
func cmisMediaLanes(lower []byte) int {
	most := 0
	for off := 86; off+4 <= 118; off += 4 {
		if lower[off] == 0xFF || lower[off] == 0 {
			break
		}
		n := int(lower[off+2]&0x0F) * bits.OnesCount8(lower[off+3])
		most = max(most, n)
	}
	if most == 0 || most > cmisLanesPerBank {
		return cmisLanesPerBank
	}
	return most
}
