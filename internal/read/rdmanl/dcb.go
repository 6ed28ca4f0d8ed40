// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// DCB netlink (include/uapi/linux/dcbnl.h): a message is struct dcbmsg
// {u8 dcb_family; u8 cmd; u16 pad} and attributes.
const (
	dcbMsgLen = 4

	dcbCmdIEEEGet = 21 // DCB_CMD_IEEE_GET

	dcbAttrIfname = 1  // DCB_ATTR_IFNAME, string
	dcbAttrIEEE   = 13 // DCB_ATTR_IEEE, nested
	dcbAttrDCBX   = 14 // DCB_ATTR_DCBX, u8

	ieeeAttrETS      = 1 // DCB_ATTR_IEEE_ETS, struct ieee_ets
	ieeeAttrPFC      = 2 // DCB_ATTR_IEEE_PFC, struct ieee_pfc
	ieeeAttrAppTable = 3 // DCB_ATTR_IEEE_APP_TABLE, nested
	ieeeAttrApp      = 1 // DCB_ATTR_IEEE_APP, struct dcb_app

	// struct ieee_pfc: pfc_cap, pfc_en, mbc, (pad), delay u16, (pad to
	// 8), requests[8] u64, indications[8] u64.
	ieeePFCLen         = 136
	ieeePFCRequests    = 8
	ieeePFCIndications = 72
	// struct ieee_ets: willing, ets_cap, cbs, tc_tx_bw[8], tc_rx_bw[8],
	// tc_tsa[8], prio_tc[8], ...
	ieeeETSMinLen = 3 + 4*8
	dcbAppLen     = 4
)

// Application priority selectors (IEEE 802.1Qaz, dcbnl.h).
const (
	// AppSelDSCP maps a DSCP value to a priority: an mlx5 port in trust
	// dscp lists all 64 (mlx5e_dcbnl_dscp_app).
	AppSelDSCP = 5
)

// ETS transmission selection algorithms (IEEE_8021QAZ_TSA_*).
var tsaNames = map[uint8]string{0: "strict", 1: "cbs", 2: "ets", 255: "vendor"}

// TSAName is the name of an ETS algorithm, "" for an unknown one.
func TSAName(v uint8) string { return tsaNames[v] }

// App is one entry of the application priority table.
type App struct {
	Selector uint8
	Priority uint8
	Protocol uint16
}

// ETS is the IEEE 802.1Qaz transmission selection configuration.
type ETS struct {
	// TxBW is each traffic class's bandwidth share in percent, TSA its
	// algorithm, PrioTC each priority's traffic class.
	TxBW, TSA, PrioTC [8]uint8
}

// PFC is the IEEE 802.1Qbb priority flow control state.
type PFC struct {
	// Cap is how many priorities may be lossless; Enabled the bitmap of
	// lossless priorities (bit p for priority p).
	Cap, Enabled uint8
	// Requests and Indications count the PFC pause frames sent and
	// received per priority (the driver's, mlx5: the PPCNT per-priority
	// group).
	Requests, Indications [8]uint64
}

// DCB is a netdev's reply to DCB_CMD_IEEE_GET.
type DCB struct {
	Netdev string
	PFC    *PFC
	ETS    *ETS
	Apps   []App
	// DCBX is the DCBX mode bitmap (DCB_CAP_DCBX_*); absent when the
	// driver has no getdcbx.
	DCBX sysattr.Opt[uint8]
}

// TrustDSCP reports whether the app table maps DSCP values: the port
// classifies by DSCP (trust dscp), else by the VLAN PCP.
func (d *DCB) TrustDSCP() bool {
	for _, a := range d.Apps {
		if a.Selector == AppSelDSCP {
			return true
		}
	}
	return false
}

// DSCPPriority is the priority the app table gives a DSCP value.
func (d *DCB) DSCPPriority(dscp uint16) (uint8, bool) {
	for _, a := range d.Apps {
		if a.Selector == AppSelDSCP && a.Protocol == dscp {
			return a.Priority, true
		}
	}
	return 0, false
}

// DecodeDCB decodes a DCB_CMD_IEEE_GET reply (dcbmsg and attributes).
func DecodeDCB(msg []byte) (*DCB, error) {
	if len(msg) < dcbMsgLen {
		return nil, fmt.Errorf("dcb: %d bytes, shorter than dcbmsg", len(msg))
	}
	if msg[1] != dcbCmdIEEEGet {
		return nil, fmt.Errorf("dcb: reply to command %d, want IEEE_GET", msg[1])
	}
	as, err := attrs(msg[dcbMsgLen:])
	if err != nil {
		return nil, fmt.Errorf("dcb: %w", err)
	}
	d := &DCB{}
	for _, a := range as {
		switch a.typ {
		case dcbAttrIfname:
			if d.Netdev, err = a.str(); err != nil {
				return nil, fmt.Errorf("dcb: %w", err)
			}
		case dcbAttrDCBX:
			v, err := a.u8()
			if err != nil {
				return nil, fmt.Errorf("dcb: %w", err)
			}
			d.DCBX = sysattr.Some(v)
		case dcbAttrIEEE:
			if err := d.ieee(a.data); err != nil {
				return nil, fmt.Errorf("dcb %s: %w", d.Netdev, err)
			}
		}
	}
	if d.Netdev == "" {
		return nil, fmt.Errorf("dcb: reply without interface name")
	}
	return d, nil
}

func (d *DCB) ieee(b []byte) error {
	as, err := attrs(b)
	if err != nil {
		return err
	}
	ne := binary.NativeEndian
	for _, a := range as {
		switch a.typ {
		case ieeeAttrPFC:
			if len(a.data) < ieeePFCLen {
				return fmt.Errorf("ieee_pfc: %d bytes, want %d", len(a.data), ieeePFCLen)
			}
			p := &PFC{Cap: a.data[0], Enabled: a.data[1]}
			for i := range 8 {
				p.Requests[i] = ne.Uint64(a.data[ieeePFCRequests+8*i:])
				p.Indications[i] = ne.Uint64(a.data[ieeePFCIndications+8*i:])
			}
			d.PFC = p
		case ieeeAttrETS:
			if len(a.data) < ieeeETSMinLen {
				return fmt.Errorf("ieee_ets: %d bytes, want %d", len(a.data), ieeeETSMinLen)
			}
			e := &ETS{}
			copy(e.TxBW[:], a.data[3:11])
			copy(e.TSA[:], a.data[19:27])
			copy(e.PrioTC[:], a.data[27:35])
			d.ETS = e
		case ieeeAttrAppTable:
			apps, err := attrs(a.data)
			if err != nil {
				return fmt.Errorf("app table: %w", err)
			}
			for _, app := range apps {
				if app.typ != ieeeAttrApp {
					continue
				}
				if len(app.data) < dcbAppLen {
					return fmt.Errorf("dcb_app: %d bytes, want %d", len(app.data), dcbAppLen)
				}
				d.Apps = append(d.Apps, App{Selector: app.data[0], Priority: app.data[1], Protocol: ne.Uint16(app.data[2:4])})
			}
		}
	}
	return nil
}

// dcbRequest is the DCB_CMD_IEEE_GET request for one netdev.
func dcbRequest(netdev string) []byte {
	b := []byte{unix.AF_UNSPEC, dcbCmdIEEEGet, 0, 0}
	return appendAttr(b, dcbAttrIfname, stringData(netdev))
}

// ReadDCB asks the kernel for a netdev's IEEE DCB state. A driver without
// DCB (veth, lo, a VF) answers EOPNOTSUPP: Classify says
// StatusUnsupported.
func ReadDCB(ctx context.Context, c Conn, netdev string) (*DCB, error) {
	var d *DCB
	var decErr error
	err := c.Exec(ctx, unix.NETLINK_ROUTE, unix.RTM_GETDCB, 0, dcbRequest(netdev), func(msg []byte) bool {
		if d == nil && decErr == nil {
			d, decErr = DecodeDCB(msg)
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	if decErr != nil {
		return nil, decErr
	}
	if d == nil {
		return nil, fmt.Errorf("dcb %s: no reply", netdev)
	}
	return d, nil
}
