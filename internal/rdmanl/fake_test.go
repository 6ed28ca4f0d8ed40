// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// No public source has recorded NETLINK_RDMA reply bytes (strace prints
// them decoded, iproute2's tests use a fake of its own), so the replies
// here are built with the library's own encoders (nl.NewRtAttr,
// AddRtAttr, Serialize) in the layout the kernel's nldev.c writes:
// fill_nldev_handle (DEV_INDEX, DEV_NAME), PORT_INDEX, then the nested
// STAT_HWCOUNTERS table of HWCOUNTER_ENTRY {ENTRY_NAME, ENTRY_VALUE}
// (stat_get_doit_default_counter), {ENTRY_NAME, HWCOUNTER_INDEX,
// HWCOUNTER_DYNAMIC for optional counters}
// (nldev_stat_get_counter_status_doit), and RES_SUMMARY of
// RES_SUMMARY_ENTRY {NAME, CURR} (fill_res_info). Counter names are the
// mlx5 driver's (drivers/infiniband/hw/mlx5/counters.c): out_of_buffer and
// np_cnp_sent as on the roce-cx6dx fixture's hw_counters, and the
// optional cc_rx_ce_pkts, cc_rx_cnp_pkts, cc_tx_cnp_pkts the issue names.

func handleAttrs(index uint32, name string, port uint32) []byte {
	b := nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_DEV_INDEX, nl.Uint32Attr(index)).Serialize()
	b = append(b, nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_DEV_NAME, nl.ZeroTerminated(name)).Serialize()...)
	if port > 0 {
		b = append(b, nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_PORT_INDEX, nl.Uint32Attr(port)).Serialize()...)
	}
	return b
}

func deviceMsg(index uint32, name string, ports uint32) []byte {
	b := handleAttrs(index, name, 0)
	b = append(b, nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_FW_VERSION, nl.ZeroTerminated("22.32.2004")).Serialize()...)
	return append(b, nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_PORT_INDEX, nl.Uint32Attr(ports)).Serialize()...)
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	nl.NativeEndian().PutUint64(b, v)
	return b
}

func statMsg(index uint32, name string, port uint32, counters ...Counter) []byte {
	table := nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTERS|nlaFNested, nil)
	for _, c := range counters {
		e := table.AddRtAttr(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY|nlaFNested, nil)
		e.AddRtAttr(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, nl.ZeroTerminated(c.Name))
		e.AddRtAttr(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, u64(c.Value))
	}
	return append(handleAttrs(index, name, port), table.Serialize()...)
}

func statusMsg(index uint32, name string, port uint32, counters ...CounterStatus) []byte {
	table := nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTERS, nil)
	for i, c := range counters {
		e := table.AddRtAttr(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY, nil)
		e.AddRtAttr(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, nl.ZeroTerminated(c.Name))
		e.AddRtAttr(attrStatHWCounterIndex, nl.Uint32Attr(uint32(i)))
		if c.Optional {
			e.AddRtAttr(attrStatHWCounterDynamic, nl.Uint8Attr(map[bool]uint8{true: 1}[c.Enabled]))
		}
	}
	return append(handleAttrs(index, name, port), table.Serialize()...)
}

func resourceMsg(index uint32, name string, totals [][2]any) []byte {
	table := nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_RES_SUMMARY, nil)
	for _, kv := range totals {
		e := table.AddRtAttr(nl.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY, nil)
		e.AddRtAttr(nl.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, nl.ZeroTerminated(kv[0].(string)))
		e.AddRtAttr(nl.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR, u64(uint64(kv[1].(int))))
	}
	return append(handleAttrs(index, name, 0), table.Serialize()...)
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
	k := fmt.Sprintf("%d", typ&(1<<nl.RDMA_NL_GET_CLIENT_SHIFT-1))
	as, _ := attrs(body)
	for _, a := range as {
		v, _ := a.u32()
		k += fmt.Sprintf(" %d=%d", a.typ, v)
	}
	return k
}

func portKey(cmd int, index, port uint32) string {
	return fmt.Sprintf("%d %d=%d %d=%d", cmd, nl.RDMA_NLDEV_ATTR_DEV_INDEX, index, nl.RDMA_NLDEV_ATTR_PORT_INDEX, port)
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
// (built with the library's encoders: no recorded bytes exist publicly).
// The ETS and PFC values are those of the mlnx_qos -i output recorded in
// fixtures/recorded/mlnx_qos-dscp-pfc-community-doc2792.txt where a test
// does not say otherwise.
func ieeeMsg(pfcEn uint8, apps []App) []byte {
	b := []byte{unix.AF_UNSPEC, dcbCmdIEEEGet, 0, 0}
	b = append(b, nl.NewRtAttr(dcbAttrIfname, nl.ZeroTerminated("enp59s0f0np0")).Serialize()...)
	ieee := nl.NewRtAttr(dcbAttrIEEE|nlaFNested, nil)
	ets := make([]byte, 59)
	copy(ets[3:], []byte{10, 10, 10, 10, 10, 10, 0, 40})
	copy(ets[19:], []byte{2, 2, 2, 2, 2, 2, 0, 2})
	copy(ets[27:], []byte{1, 0, 2, 3, 4, 5, 6, 7})
	ieee.AddRtAttr(ieeeAttrETS, ets)
	pfc := make([]byte, ieeePFCLen)
	pfc[0], pfc[1] = 8, pfcEn
	nl.NativeEndian().PutUint64(pfc[ieeePFCRequests+3*8:], 1234)
	nl.NativeEndian().PutUint64(pfc[ieeePFCIndications+3*8:], 5678)
	ieee.AddRtAttr(ieeeAttrPFC, pfc)
	table := ieee.AddRtAttr(ieeeAttrAppTable|nlaFNested, nil)
	for _, a := range apps {
		v := []byte{a.Selector, a.Priority, 0, 0}
		nl.NativeEndian().PutUint16(v[2:], a.Protocol)
		table.AddRtAttr(ieeeAttrApp, v)
	}
	b = append(b, ieee.Serialize()...)
	return append(b, nl.NewRtAttr(dcbAttrDCBX, nl.Uint8Attr(0x8|0x1)).Serialize()...)
}
