// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// No public source has recorded NETLINK_RDMA reply bytes (strace prints
// them decoded, iproute2's tests use a fake of its own), so the replies
// here are built with the package's own encoder (appendAttr, checked byte
// by byte by TestEncodeStatSet) in the layout the kernel's nldev.c writes:
// fill_nldev_handle (DEV_INDEX, DEV_NAME), PORT_INDEX, then the nested
// STAT_HWCOUNTERS table of HWCOUNTER_ENTRY {ENTRY_NAME, ENTRY_VALUE}
// (stat_get_doit_default_counter), {ENTRY_NAME, HWCOUNTER_INDEX,
// HWCOUNTER_DYNAMIC for optional counters}
// (nldev_stat_get_counter_status_doit), and RES_SUMMARY of
// RES_SUMMARY_ENTRY {NAME, CURR} (fill_res_info). Counter names are the
// mlx5 driver's (drivers/infiniband/hw/mlx5/counters.c): out_of_buffer and
// np_cnp_sent as on the roce-cx6dx fixture's hw_counters, and the
// optional cc_rx_ce_pkts, cc_rx_cnp_pkts, cc_tx_cnp_pkts the issue names.

// tattr is an attribute tree for building replies: its data, then its
// children in order, written by appendAttr as the kernel's nla_nest_start
// and nla_put lay them out.
type tattr struct {
	typ  uint16
	data []byte
	kids []*tattr
}

func newAttr(typ int, data []byte) *tattr { return &tattr{typ: uint16(typ), data: data} }

// add appends a child and returns it, for nesting further.
func (a *tattr) add(typ int, data []byte) *tattr {
	k := newAttr(typ, data)
	a.kids = append(a.kids, k)
	return k
}

func (a *tattr) encode() []byte {
	d := a.data
	for _, k := range a.kids {
		d = append(d, k.encode()...)
	}
	return appendAttr(nil, a.typ, d)
}

func handleAttrs(index uint32, name string, port uint32) []byte {
	b := newAttr(attrDevIndex, u32Data(index)).encode()
	b = append(b, newAttr(attrDevName, stringData(name)).encode()...)
	if port > 0 {
		b = append(b, newAttr(attrPortIndex, u32Data(port)).encode()...)
	}
	return b
}

func deviceMsg(index uint32, name string, ports uint32) []byte {
	b := handleAttrs(index, name, 0)
	b = append(b, newAttr(attrFWVersion, stringData("22.32.2004")).encode()...)
	return append(b, newAttr(attrPortIndex, u32Data(ports)).encode()...)
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint64(b, v)
	return b
}

func statMsg(index uint32, name string, port uint32, counters ...Counter) []byte {
	table := newAttr(attrStatHWCounters|nlaFNested, nil)
	for _, c := range counters {
		e := table.add(attrStatHWCounterEntry|nlaFNested, nil)
		e.add(attrStatHWCounterEntryName, stringData(c.Name))
		e.add(attrStatHWCounterEntryValue, u64(c.Value))
	}
	return append(handleAttrs(index, name, port), table.encode()...)
}

func statusMsg(index uint32, name string, port uint32, counters ...CounterStatus) []byte {
	table := newAttr(attrStatHWCounters, nil)
	for i, c := range counters {
		e := table.add(attrStatHWCounterEntry, nil)
		e.add(attrStatHWCounterEntryName, stringData(c.Name))
		e.add(attrStatHWCounterIndex, u32Data(uint32(i)))
		if c.Optional {
			e.add(attrStatHWCounterDynamic, []byte{map[bool]uint8{true: 1}[c.Enabled]})
		}
	}
	return append(handleAttrs(index, name, port), table.encode()...)
}

func resourceMsg(index uint32, name string, totals [][2]any) []byte {
	table := newAttr(attrResSummary, nil)
	for _, kv := range totals {
		e := table.add(attrResSummaryEntry, nil)
		e.add(attrResSummaryEntryName, stringData(kv[0].(string)))
		e.add(attrResSummaryEntryCurr, u64(uint64(kv[1].(int))))
	}
	return append(handleAttrs(index, name, 0), table.encode()...)
}

// fakeConn replays replies by request: a request key is the message type
// and, for per-port requests, the device index and port.
type fakeConn struct {
	replies  map[string][][]byte
	errs     map[string]error
	requests []string
	// delivered counts the messages handed to keep, by request key: a
	// cancelled request gets no more, as the live socket, closed, does.
	delivered map[string]int
}

func key(typ uint16, body []byte) string {
	k := fmt.Sprintf("%d", typ&(1<<nlClientShift-1))
	as, _ := attrs(body)
	for _, a := range as {
		v, _ := a.u32()
		k += fmt.Sprintf(" %d=%d", a.typ, v)
	}
	return k
}

func portKey(cmd int, index, port uint32) string {
	return fmt.Sprintf("%d %d=%d %d=%d", cmd, attrDevIndex, index, attrPortIndex, port)
}

func (f *fakeConn) Exec(ctx context.Context, proto int, typ uint16, flags int, body []byte, keep func([]byte) bool) error {
	if proto != unix.NETLINK_RDMA {
		return unix.EPROTONOSUPPORT
	}
	k := key(typ, body)
	f.requests = append(f.requests, k)
	if err := f.errs[k]; err != nil {
		return err
	}
	for _, m := range f.replies[k] {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.delivered == nil {
			f.delivered = map[string]int{}
		}
		f.delivered[k]++
		if !keep(m) {
			break
		}
	}
	return nil
}

// ieeeMsg is a DCB_CMD_IEEE_GET reply as dcbnl_ieee_fill writes it
// (built with appendAttr: no recorded bytes exist publicly).
// The ETS and PFC values are those of the mlnx_qos -i output recorded in
// fixtures/recorded/mlnx_qos-dscp-pfc-community-doc2792.txt where a test
// does not say otherwise.
func ieeeMsg(pfcEn uint8, apps []App) []byte {
	b := []byte{unix.AF_UNSPEC, dcbCmdIEEEGet, 0, 0}
	b = append(b, newAttr(dcbAttrIfname, stringData("enp59s0f0np0")).encode()...)
	ieee := newAttr(dcbAttrIEEE|nlaFNested, nil)
	ets := make([]byte, 59)
	copy(ets[3:], []byte{10, 10, 10, 10, 10, 10, 0, 40})
	copy(ets[19:], []byte{2, 2, 2, 2, 2, 2, 0, 2})
	copy(ets[27:], []byte{1, 0, 2, 3, 4, 5, 6, 7})
	ieee.add(ieeeAttrETS, ets)
	pfc := make([]byte, ieeePFCLen)
	pfc[0], pfc[1] = 8, pfcEn
	binary.NativeEndian.PutUint64(pfc[ieeePFCRequests+3*8:], 1234)
	binary.NativeEndian.PutUint64(pfc[ieeePFCIndications+3*8:], 5678)
	ieee.add(ieeeAttrPFC, pfc)
	table := ieee.add(ieeeAttrAppTable|nlaFNested, nil)
	for _, a := range apps {
		v := []byte{a.Selector, a.Priority, 0, 0}
		binary.NativeEndian.PutUint16(v[2:], a.Protocol)
		table.add(ieeeAttrApp, v)
	}
	b = append(b, ieee.encode()...)
	return append(b, newAttr(dcbAttrDCBX, []byte{0x8 | 0x1}).encode()...)
}
