// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// The QP counter replies are built in the layout nldev.c writes:
// stat_get_doit_qp (handle, PORT_INDEX, STAT_MODE, in auto mode
// STAT_AUTO_MODE_MASK) and fill_res_counter_entry (PORT_INDEX,
// STAT_COUNTER_ID, fill_stat_counter_mode's STAT_MODE and RES_TYPE or
// owner, RES_QP of QP_ENTRY {LQPN}, STAT_HWCOUNTERS). The modes are those
// of iproute2 commit 1b2ca7ad's `rdma statistic qp mode` (mlx5_0..3,
// mlx5_2/1 auto type on, the others off), the counter that of commit
// 5937552b's `rdma stat qp show` (mlx5_2/1 cntn 5, LQPN 178, every
// counter 0, pid 31609 comm client.1); see testdata/README.md.

// qpCounterNames are the counters of commit 5937552b's counter 5.
var qpCounterNames = []string{"rx_write_requests", "rx_read_requests", "rx_atomic_requests", "out_of_buffer",
	"out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "implied_nak_seq_err",
	"local_ack_timeout_err", "resp_local_length_error", "resp_cqe_error", "req_cqe_error",
	"req_remote_invalid_request", "req_remote_access_errors", "resp_remote_access_errors",
	"resp_cqe_flush_error", "req_cqe_flush_error"}

func modeMsg(index uint32, name string, port, mode, mask uint32) []byte {
	b := handleAttrs(index, name, port)
	b = append(b, newAttr(attrStatMode, u32Data(mode)).encode()...)
	if mode == counterModeAuto {
		b = append(b, newAttr(attrStatAutoModeMask, u32Data(mask)).encode()...)
	}
	return b
}

type qpc struct {
	id, port uint32
	qpType   int // -1: none
	pid      uint32
	lqpns    []uint32
}

func countersMsg(index uint32, name string, cs ...qpc) []byte {
	table := newAttr(attrStatCounter, nil)
	for _, c := range cs {
		e := table.add(attrStatCounterEntry, nil)
		e.add(attrPortIndex, u32Data(c.port))
		e.add(attrStatCounterID, u32Data(c.id))
		e.add(attrStatMode, u32Data(counterModeAuto))
		if c.qpType >= 0 {
			e.add(attrResType, []byte{uint8(c.qpType)})
		}
		if c.pid != 0 {
			e.add(attrResPID, u32Data(c.pid))
		}
		qps := e.add(attrResQP, nil)
		for _, q := range c.lqpns {
			qps.add(attrResQPEntry, nil).add(attrResLQPN, u32Data(q))
		}
		hw := e.add(attrStatHWCounters, nil)
		for _, n := range qpCounterNames {
			he := hw.add(attrStatHWCounterEntry, nil)
			he.add(attrStatHWCounterEntryName, stringData(n))
			he.add(attrStatHWCounterEntryValue, u64(0))
		}
	}
	return append(handleAttrs(index, name, 0), table.encode()...)
}

func modeKey(index, port uint32) string {
	return fmt.Sprintf("%d 1=%d 3=%d %d=%d %d=%d", cmdStatGet, index, port, attrStatMode, counterModeManual, attrStatRes, attrResQP)
}

func countersKey(index, port uint32) string {
	return fmt.Sprintf("%d 1=%d 3=%d %d=%d", cmdStatGet, index, port, attrStatRes, attrResQP)
}

func qpModeHost(mask2 uint32) *fakeConn {
	return &fakeConn{replies: map[string][][]byte{
		"1":           {deviceMsg(0, "mlx5_0", 1), deviceMsg(1, "mlx5_1", 1), deviceMsg(2, "mlx5_2", 1), deviceMsg(3, "mlx5_3", 1)},
		modeKey(0, 1): {modeMsg(0, "mlx5_0", 1, counterModeNone, 0)},
		modeKey(1, 1): {modeMsg(1, "mlx5_1", 1, counterModeNone, 0)},
		modeKey(2, 1): {modeMsg(2, "mlx5_2", 1, counterModeAuto, mask2)},
		modeKey(3, 1): {modeMsg(3, "mlx5_3", 1, counterModeNone, 0)},
		countersKey(2, 1): {countersMsg(2, "mlx5_2",
			qpc{id: 5, port: 1, qpType: 2, pid: 31609, lqpns: []uint32{178}})},
	}}
}

func TestQPCountersByType(t *testing.T) {
	c := qpModeHost(counterMaskQPType)
	// A port whose driver has no counters, and a policy refusing one.
	c.errs = map[string]error{modeKey(1, 1): unix.EOPNOTSUPP, modeKey(3, 1): unix.EPERM}
	s := Read(context.Background(), c, Options{QPCounters: true})
	if len(s.Errors) != 0 {
		t.Fatalf("errors %v", s.Errors)
	}
	want := map[Query]map[Status]int{
		QueryDevice:        {StatusOK: 1},
		QueryQPCounterMode: {StatusOK: 2, StatusUnsupported: 1, StatusDenied: 1},
		QueryQPCounters:    {StatusOK: 1},
	}
	if !reflect.DeepEqual(s.Outcomes, want) {
		t.Errorf("outcomes %v, want %v", s.Outcomes, want)
	}
	for _, r := range c.requests {
		if r == countersKey(0, 1) {
			t.Errorf("counters of a port in mode none asked")
		}
	}
	if len(s.QPCounterModes) != 2 {
		t.Fatalf("modes %+v", s.QPCounterModes)
	}
	m0, m2 := s.QPCounterModes[0], s.QPCounterModes[1]
	if m0.ModeName() != "none" || m0.Criteria() != "" || m2.ModeName() != "auto" || m2.Criteria() != "type" || !m2.ByTypeOnly() {
		t.Errorf("modes %+v %q %q, %+v %q %q", m0, m0.ModeName(), m0.Criteria(), m2, m2.ModeName(), m2.Criteria())
	}
	if len(s.QPCounters) != 1 {
		t.Fatalf("counters %+v", s.QPCounters)
	}
	pc := s.QPCounters[0]
	if pc.Device != "mlx5_2" || pc.Port != 1 || pc.Counters != 1 || pc.QPs != 1 || pc.Truncated {
		t.Errorf("port counters %+v", pc)
	}
	if len(pc.ByType) != 1 || pc.ByType[0].QPType != "RC" || pc.ByType[0].QPs != 1 || len(pc.ByType[0].Counters) != len(qpCounterNames) {
		t.Fatalf("by type %+v", pc.ByType)
	}
	if c := pc.ByType[0].Counters[0]; c != (Counter{"duplicate_request", 0}) {
		t.Errorf("first counter %+v", c)
	}
}

// TestQPCountersByPID: with the PID criterion each counter is one
// process's: only how many are bound is kept, no values, no PID.
func TestQPCountersByPID(t *testing.T) {
	c := qpModeHost(counterMaskQPType | counterMaskPID)
	s := Read(context.Background(), c, Options{QPCounters: true})
	if len(s.QPCounters) != 1 {
		t.Fatalf("counters %+v", s.QPCounters)
	}
	pc := s.QPCounters[0]
	if pc.Counters != 1 || pc.QPs != 1 || pc.ByType != nil {
		t.Errorf("port counters %+v", pc)
	}
	if len(s.QPCounterModes) != 4 {
		t.Fatalf("modes %+v", s.QPCounterModes)
	}
	if m := s.QPCounterModes[2]; m.Device != "mlx5_2" || m.Criteria() != "type,pid" || m.ByTypeOnly() {
		t.Errorf("mode %+v criteria %q", m, m.Criteria())
	}
}

func TestQPCountersTruncated(t *testing.T) {
	c := qpModeHost(counterMaskQPType)
	k := countersKey(2, 1)
	c.replies[k] = append(c.replies[k], countersMsg(2, "mlx5_2", qpc{id: 6, port: 1, qpType: 4, lqpns: []uint32{179}}))
	s := Read(context.Background(), c, Options{QPCounters: true, MaxObjects: 1})
	if got := s.Outcomes[QueryQPCounters]; !reflect.DeepEqual(got, map[Status]int{StatusTruncated: 1}) {
		t.Errorf("outcomes %v", got)
	}
	if len(s.QPCounters) != 1 || !s.QPCounters[0].Truncated || s.QPCounters[0].ByType != nil {
		t.Errorf("counters %+v", s.QPCounters)
	}
	if c.delivered[k] != 2 {
		t.Errorf("%d messages taken, want 2", c.delivered[k])
	}
}

func TestDecodeQPCounterModeMalformed(t *testing.T) {
	for name, msg := range map[string][]byte{
		"no mode":       handleAttrs(2, "mlx5_2", 1),
		"auto, no mask": append(handleAttrs(2, "mlx5_2", 1), newAttr(attrStatMode, u32Data(counterModeAuto)).encode()...),
		"short mode":    append(handleAttrs(2, "mlx5_2", 1), newAttr(attrStatMode, []byte{1}).encode()...),
		"no port":       modeMsg(2, "mlx5_2", 0, counterModeNone, 0),
		"length past":   {200, 0, 1, 0, 0, 0, 0, 0},
	} {
		if _, err := DecodeQPCounterMode(msg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	m, err := DecodeQPCounterMode(modeMsg(2, "mlx5_2", 1, counterModeManual, 0))
	if err != nil || m.ModeName() != "manual" || m.Criteria() != "" {
		t.Errorf("manual: %+v %v", m, err)
	}
	if got := (QPCounterMode{Mode: counterModeAuto, Mask: 1 | 1<<5}).Criteria(); got != "type,bit5" {
		t.Errorf("unknown bit: %q", got)
	}
}
