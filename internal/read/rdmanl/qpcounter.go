// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Counter attributes (include/uapi/rdma/rdma_netlink.h) and their values
// (enum rdma_nl_counter_mode, enum rdma_nl_counter_mask).
const (
	attrStatMode          = 74 // RDMA_NLDEV_ATTR_STAT_MODE, u32
	attrStatRes           = 75 // RDMA_NLDEV_ATTR_STAT_RES, u32
	attrStatAutoModeMask  = 76 // RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK, u32
	attrStatCounter       = 77 // RDMA_NLDEV_ATTR_STAT_COUNTER, nested table
	attrStatCounterEntry  = 78 // RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY
	attrStatCounterID     = 79 // RDMA_NLDEV_ATTR_STAT_COUNTER_ID, u32
	counterModeNone       = 0
	counterModeAuto       = 1
	counterModeManual     = 2
	counterMaskQPType     = 1
	counterMaskPID        = 1 << 1
	counterMaskKnown      = counterMaskQPType | counterMaskPID
	maxCounterMaskBitName = 32
)

// QPCounterMode is one port's QP counter mode (`rdma statistic qp mode`):
// none (no counter bound; the kernel's initial mode), auto (the kernel
// binds each new QP to a counter by the Mask criteria) or manual (QPs are
// bound by `rdma statistic qp bind`).
type QPCounterMode struct {
	Device string
	Port   uint32
	Mode   uint32
	// Mask is the auto mode's criteria (RDMA_COUNTER_MASK_*); zero
	// outside auto mode.
	Mask uint32
}

// ModeName is the mode as a label value: none, auto, manual, or
// unknown for a value this build does not know.
func (m QPCounterMode) ModeName() string {
	switch m.Mode {
	case counterModeNone:
		return "none"
	case counterModeAuto:
		return "auto"
	case counterModeManual:
		return "manual"
	}
	return "unknown"
}

// Criteria is the auto mode mask as `rdma statistic qp mode` prints it
// ("type", "pid", "type,pid"), an unknown bit as "bitN"; empty outside
// auto mode.
func (m QPCounterMode) Criteria() string {
	var parts []string
	if m.Mask&counterMaskQPType != 0 {
		parts = append(parts, "type")
	}
	if m.Mask&counterMaskPID != 0 {
		parts = append(parts, "pid")
	}
	for i := 0; i < maxCounterMaskBitName; i++ {
		if bit := uint32(1) << i; m.Mask&bit != 0 && bit&counterMaskKnown == 0 {
			parts = append(parts, "bit"+strconv.Itoa(i))
		}
	}
	return strings.Join(parts, ",")
}

// ByTypeOnly is auto mode with the QP type the only criterion: then there
// is one counter per QP type and port, and its values can be exported by
// QP type (bounded). With the PID criterion a counter is per process, in
// manual mode per the operator's choice: their values are not exported
// per counter, only how many are bound.
func (m QPCounterMode) ByTypeOnly() bool {
	return m.Mode == counterModeAuto && m.Mask == counterMaskQPType
}

// QPTypeCounters are the hardware counters of one port's auto-mode
// counters of one QP type, summed.
type QPTypeCounters struct {
	// QPType is the type as iproute2 names it (RC, UD, ...).
	QPType   string
	Counters []Counter
	// QPs is how many QPs are bound to them.
	QPs uint64
}

// PortQPCounters is one port's bound QP counters (`rdma statistic qp
// show link DEV/PORT`): how many counters and QPs, and the values by QP
// type when the mode is ByTypeOnly.
type PortQPCounters struct {
	Device   string
	Port     uint32
	Counters uint64
	QPs      uint64
	// ByType is set only in auto mode by QP type alone.
	ByType []QPTypeCounters
	// Truncated: the object cap was reached during this dump.
	Truncated bool
}

// QPTypeName is an ib_qp_type as iproute2's qp_types_to_str names it.
func QPTypeName(t uint8) string {
	names := [...]string{"SMI", "GSI", "RC", "UC", "UD", "RAW_IPV6", "RAW_ETHERTYPE", "UNKNOWN", "RAW_PACKET", "XRC_INI", "XRC_TGT"}
	if int(t) < len(names) {
		return names[t]
	}
	if t == 0xff {
		return "DRIVER"
	}
	return "UNKNOWN"
}

// modeRequest is the body `rdma statistic qp mode` sends: a STAT_GET
// doit naming the port, STAT_RES = RES_QP, and any STAT_MODE (its
// presence makes the kernel answer with the mode, not the counters).
func modeRequest(d Device, port uint32) []byte {
	b := appendAttr(nil, attrDevIndex, u32Data(d.Index))
	b = appendAttr(b, attrPortIndex, u32Data(port))
	b = appendAttr(b, attrStatMode, u32Data(counterModeManual))
	return appendAttr(b, attrStatRes, u32Data(attrResQP))
}

// countersRequest is the body of `rdma statistic qp show link DEV/PORT`:
// a STAT_GET dump naming the port with STAT_RES = RES_QP.
func countersRequest(d Device, port uint32) []byte {
	b := appendAttr(nil, attrDevIndex, u32Data(d.Index))
	b = appendAttr(b, attrPortIndex, u32Data(port))
	return appendAttr(b, attrStatRes, u32Data(attrResQP))
}

// DecodeQPCounterMode decodes the reply to the mode request
// (stat_get_doit_qp): the handle, PORT_INDEX, STAT_MODE, and in auto mode
// STAT_AUTO_MODE_MASK.
func DecodeQPCounterMode(msg []byte) (QPCounterMode, error) {
	as, err := attrs(msg)
	if err != nil {
		return QPCounterMode{}, fmt.Errorf("qp counter mode: %w", err)
	}
	dev, port, err := handle(as)
	if err != nil {
		return QPCounterMode{}, fmt.Errorf("qp counter mode: %w", err)
	}
	m := QPCounterMode{Device: dev, Port: port}
	var haveMode, haveMask bool
	for _, a := range as {
		switch a.typ {
		case attrStatMode:
			m.Mode, err = a.u32()
			haveMode = true
		case attrStatAutoModeMask:
			m.Mask, err = a.u32()
			haveMask = true
		}
		if err != nil {
			return QPCounterMode{}, fmt.Errorf("qp counter mode %s/%d: %w", dev, port, err)
		}
	}
	if !haveMode || (m.Mode == counterModeAuto && !haveMask) {
		// iproute2 fails the same reply (qp_link_get_mode_parse_cb).
		return QPCounterMode{}, fmt.Errorf("qp counter mode %s/%d: reply without mode or auto mask", dev, port)
	}
	if m.Mode != counterModeAuto {
		m.Mask = 0
	}
	return m, nil
}

// qpCounter is one entry of the counter dump (fill_res_counter_entry).
type qpCounter struct {
	port     uint32
	qpType   uint8
	haveType bool
	qps      uint64
	values   []Counter
}

// decodeQPCounters walks one message of the counter dump: the handle,
// then STAT_COUNTER entries {PORT_INDEX, STAT_COUNTER_ID, STAT_MODE,
// RES_TYPE (auto by type), RES_PID or RES_KERN_NAME (auto by PID), RES_QP
// {QP_ENTRY {LQPN}}, STAT_HWCOUNTERS}; each goes to f until it returns
// false. The owner is read by no one: no PID becomes a label.
func decodeQPCounters(msg []byte, f func(qpCounter) bool) error {
	as, err := attrs(msg)
	if err != nil {
		return fmt.Errorf("qp counters: %w", err)
	}
	for _, a := range as {
		if a.typ != attrStatCounter {
			continue
		}
		entries, err := attrs(a.data)
		if err != nil {
			return fmt.Errorf("qp counters: %w", err)
		}
		for _, e := range entries {
			if e.typ != attrStatCounterEntry {
				continue
			}
			qc, err := decodeQPCounter(e.data)
			if err != nil {
				return err
			}
			if !f(qc) {
				return nil
			}
		}
	}
	return nil
}

func decodeQPCounter(b []byte) (qpCounter, error) {
	fields, err := attrs(b)
	if err != nil {
		return qpCounter{}, fmt.Errorf("qp counter: %w", err)
	}
	var qc qpCounter
	var haveID bool
	for _, f := range fields {
		switch f.typ {
		case attrPortIndex:
			qc.port, err = f.u32()
		case attrStatCounterID:
			_, err = f.u32()
			haveID = true
		case attrResType:
			qc.qpType, err = f.u8()
			qc.haveType = true
		case attrResQP:
			var qps []attr
			if qps, err = attrs(f.data); err == nil {
				for _, q := range qps {
					if q.typ == attrResQPEntry {
						qc.qps++
					}
				}
			}
		}
		if err != nil {
			return qpCounter{}, fmt.Errorf("qp counter: %w", err)
		}
	}
	if !haveID {
		return qpCounter{}, fmt.Errorf("qp counter without id")
	}
	err = hwcounters(fields, func(entry []attr) error {
		c, err := hwcounter(entry)
		if err != nil {
			return fmt.Errorf("qp counter: %w", err)
		}
		qc.values = append(qc.values, c)
		return nil
	})
	return qc, err
}

// readQPCounters reads each kept port's mode and, unless no counter can
// be bound (mode none), its counters.
func (s *Snapshot) readQPCounters(ctx context.Context, c Conn, opts Options, b *budget) {
	for _, d := range s.Devices {
		for p := uint32(1); p <= d.Ports && p <= 256 && ctx.Err() == nil; p++ {
			m, err := request(ctx, c, cmdStatGet, d, p, modeRequest(d, p), DecodeQPCounterMode)
			if s.outcome(QueryQPCounterMode, err) != StatusOK {
				continue
			}
			s.QPCounterModes = append(s.QPCounterModes, m)
			if m.Mode == counterModeNone {
				continue
			}
			pc, err := readPortQPCounters(ctx, c, d, p, m, b)
			if errors.Is(err, errObjectCap) {
				s.outcomeStatus(QueryQPCounters, StatusTruncated, nil)
				s.QPCounters = append(s.QPCounters, pc)
				continue
			}
			if s.outcome(QueryQPCounters, err) == StatusOK {
				s.QPCounters = append(s.QPCounters, pc)
			}
		}
	}
}

// readPortQPCounters dumps one port's counters, one object of b each.
func readPortQPCounters(ctx context.Context, c Conn, d Device, port uint32, m QPCounterMode, b *budget) (PortQPCounters, error) {
	pc := PortQPCounters{Device: d.Name, Port: port}
	type sums struct {
		qps    uint64
		values map[string]uint64
	}
	byType := map[string]*sums{}
	err, decErr := cappedDump(ctx, c, nldevType(cmdStatGet), countersRequest(d, port), b, func(msg []byte) (bool, error) {
		full := false
		err := decodeQPCounters(msg, func(qc qpCounter) bool {
			if qc.port != 0 && qc.port != port {
				return true
			}
			if !b.take() {
				full = true
				return false
			}
			pc.Counters++
			pc.QPs += qc.qps
			if m.ByTypeOnly() && qc.haveType {
				t := QPTypeName(qc.qpType)
				st := byType[t]
				if st == nil {
					st = &sums{values: map[string]uint64{}}
					byType[t] = st
				}
				st.qps += qc.qps
				for _, v := range qc.values {
					st.values[v.Name] += v.Value
				}
			}
			return true
		})
		return full, err
	})
	switch {
	case errors.Is(err, errObjectCap):
		pc.Truncated = true
		return pc, errObjectCap
	case err != nil:
		return PortQPCounters{}, err
	case decErr != nil:
		return PortQPCounters{}, decErr
	}
	if m.ByTypeOnly() {
		types := make([]string, 0, len(byType))
		for t := range byType {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, t := range types {
			tc := QPTypeCounters{QPType: t, QPs: byType[t].qps}
			for n, v := range byType[t].values {
				tc.Counters = append(tc.Counters, Counter{Name: n, Value: v})
			}
			sort.Slice(tc.Counters, func(i, j int) bool { return tc.Counters[i].Name < tc.Counters[j].Name })
			pc.ByType = append(pc.ByType, tc)
		}
	}
	return pc, nil
}
