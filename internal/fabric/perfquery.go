// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// PMA ClassPortInfo capability bits perfquery prints in its block headers
// ("CapMask: 0x1300", "CapMask2: 0x0000002"), libibmad iba_types.h.
const (
	capExtWidth       = 1 << 9  // IB_PM_EXT_WIDTH_SUPPORTED: PortCountersExtended
	capExtWidthNoIETF = 1 << 10 // IB_PM_EXT_WIDTH_NOIETF_SUP: its data counters only
	capXmitWait       = 1 << 12 // IB_PM_PC_XMIT_WAIT_SUP: PortXmitWait is valid
	// cap2AddlExt is IB_PM_IS_ADDL_PORT_CTRS_EXT_SUP in CapabilityMask2:
	// PortCountersExtended also carries 64-bit error counters and XmitWait.
	cap2AddlExt = 1 << 1
)

// pqBlock is one port's answer in perfquery output.
type pqBlock struct {
	lid, port  int
	extended   bool // "# Port extended counters"
	cap, cap2  uint64
	values     [NumCounters]uint64
	seen       [NumCounters]bool
	malformed  bool // a field of ours with a value that is not a number
	hasHeader2 bool // the extended header carried CapMask2
}

// extendedAdvertised reports whether the PMA answers PortCountersExtended
// for data and packet counters.
func (b *pqBlock) extendedAdvertised() bool { return b.cap&(capExtWidth|capExtWidthNoIETF) != 0 }

// fieldIndex maps perfquery's field names to counters.
var fieldIndex = func() map[string]CounterID {
	m := make(map[string]CounterID, NumCounters)
	for id, c := range Counters {
		m[c.Field] = CounterID(id)
	}
	return m
}()

// maxPQLine bounds one perfquery output line (its longest, a block header,
// is under 100 bytes).
const maxPQLine = 4 << 10

// parsePerfquery reads perfquery output (PortCounters or, with -x,
// PortCountersExtended; one block per port with -l) and calls got for
// each complete block. It reads line by line and keeps one block at a
// time, so memory does not grow with the output. Lines that are neither a
// block header nor a "Name:....value" field are counted in junk; the first
// error perfquery printed on standard output ("perfquery: iberror: failed:
// perfquery" when -l stops at a failed port) is returned in errText.
func parsePerfquery(r io.Reader, got func(*pqBlock)) (junk int, errText string, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxPQLine)
	var cur *pqBlock
	flush := func() {
		if cur != nil {
			got(cur)
			cur = nil
		}
	}
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if line[0] == '#' {
			flush()
			b, ok := parsePQHeader(line)
			if !ok {
				junk++
				continue
			}
			cur = b
			continue
		}
		if bytes.Contains(line, []byte("iberror:")) {
			if errText == "" {
				errText = string(line[:min(len(line), 300)])
			}
			flush() // what follows the error is not this port's
			continue
		}
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok || cur == nil {
			junk++
			continue
		}
		id, ours := fieldIndex[string(name)]
		if !ours {
			continue // PortSelect, CounterSelect, QP1Dropped, unicast/multicast, ...
		}
		v, perr := strconv.ParseUint(string(bytes.TrimLeft(val, ".")), 10, 64)
		if perr != nil {
			cur.malformed = true
			continue
		}
		cur.values[id], cur.seen[id] = v, true
	}
	flush()
	if err := sc.Err(); err != nil {
		return junk, errText, fmt.Errorf("reading perfquery output: %w", err)
	}
	return junk, errText, nil
}

// parsePQHeader parses
//
//	# Port counters: Lid 3 port 1 (CapMask: 0x1300)
//	# Port extended counters: Lid 2 port 1 (CapMask: 0x1300 CapMask2: 0x0000000)
//
// (perfquery.c dump_perfcounters / dump_perfcounters_ext).
func parsePQHeader(line []byte) (*pqBlock, bool) {
	b := &pqBlock{}
	var rest []byte
	switch {
	case bytes.HasPrefix(line, []byte("# Port counters: ")):
		rest = line[len("# Port counters: "):]
	case bytes.HasPrefix(line, []byte("# Port extended counters: ")):
		rest = line[len("# Port extended counters: "):]
		b.extended = true
	default:
		return nil, false
	}
	var fb [12][]byte
	f := fields(rest, fb[:0])
	// Lid <n> port <n> (CapMask: <hex>[ CapMask2: <hex>)]
	if len(f) < 6 || len(f) == cap(fb) || string(f[0]) != "Lid" || string(f[2]) != "port" || string(f[4]) != "(CapMask:" {
		return nil, false
	}
	lid, err1 := strconv.ParseUint(string(f[1]), 10, 16)
	port, err2 := strconv.ParseUint(string(f[3]), 10, 8)
	capm, err3 := strconv.ParseUint(string(bytes.TrimSuffix(f[5], []byte(")"))), 0, 16)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, false
	}
	b.lid, b.port, b.cap = int(lid), int(port), capm
	if len(f) >= 8 && string(f[6]) == "CapMask2:" {
		c2, err := strconv.ParseUint(string(bytes.TrimSuffix(f[7], []byte(")"))), 0, 32)
		if err != nil {
			return nil, false
		}
		b.cap2, b.hasHeader2 = c2, true
	}
	return b, true
}

// applyBasic fills a port's values from its PortCounters block; ok is
// false when the block lacks a field the PMA must answer (then nothing is
// taken). The data and packet counters are the 32-bit ones; applyExtended
// replaces them where PortCountersExtended answers.
func applyBasic(pc *PortCounters, b *pqBlock) bool {
	if b.malformed || b.extended {
		return false
	}
	xmitWait := b.cap&capXmitWait != 0
	for id := range NumCounters {
		if id == TransmitWait && !xmitWait {
			continue // not implemented: absent, not zero
		}
		if !b.seen[id] {
			return false
		}
	}
	for id := range NumCounters {
		if id == TransmitWait && !xmitWait {
			continue
		}
		bits := Counters[id].Spec.Bits
		if bits == 0 {
			bits = 32 // data and packets in PortCounters
		}
		pc.Values[id] = Value{V: b.values[id], Bits: uint8(bits), Present: true}
	}
	return true
}

// completeAddl reports whether a PortCountersExtended block carries every
// counter: its PMA advertises the additional extended counters
// (CapabilityMask2) and every field is there (PortXmitWait only where
// CapabilityMask says it is valid), so the PortCounters run adds nothing.
func (b *pqBlock) completeAddl() bool {
	if b.malformed || !b.extended || b.cap2&cap2AddlExt == 0 {
		return false
	}
	for id := range NumCounters {
		if id == TransmitWait && b.cap&capXmitWait == 0 {
			continue
		}
		if !b.seen[id] {
			return false
		}
	}
	return true
}

// applyAddl takes every counter, 64 bits wide, from a block completeAddl
// accepted (PortXmitWait absent, not zero, where it is not valid).
func (b *pqBlock) applyAddl(pc *PortCounters) {
	for id := range NumCounters {
		if id == TransmitWait && b.cap&capXmitWait == 0 {
			continue
		}
		pc.Values[id] = Value{V: b.values[id], Bits: 64, Present: true}
	}
}

// extendedData are the counters PortCountersExtended always carries.
var extendedData = []CounterID{DataReceived, DataTransmitted, PacketsReceived, PacketsTransmitted}

// applyExtended takes the 64-bit data and packet counters from a
// PortCountersExtended block, and its error counters and XmitWait only
// when CapabilityMask2 advertises them (a PMA that does not leaves those
// bytes undefined: ibsim's come back garbled through umad2sim).
func applyExtended(pc *PortCounters, b *pqBlock) bool {
	if b.malformed || !b.extended {
		return false
	}
	for _, id := range extendedData {
		if !b.seen[id] {
			return false
		}
	}
	for _, id := range extendedData {
		pc.Values[id] = Value{V: b.values[id], Bits: 64, Present: true}
	}
	if b.cap2&cap2AddlExt == 0 {
		return true
	}
	for id := range NumCounters {
		if b.seen[id] {
			pc.Values[id] = Value{V: b.values[id], Bits: 64, Present: true}
		}
	}
	return true
}
