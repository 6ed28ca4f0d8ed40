// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// cmdStatSet is RDMA_NLDEV_CMD_STAT_SET (include/uapi/rdma/rdma_netlink.h,
// enum rdma_nldev_command: 16, between GET_CHARDEV and STAT_GET), which
// the library's nl package does not name. It needs CAP_NET_ADMIN
// (RDMA_NL_ADMIN_PERM in nldev_cb_table).
const cmdStatSet = 16

// ErrNoDevice is the error of a device name the kernel has no RDMA device
// of (removed, renamed, or in another namespace), or a port it lacks.
var ErrNoDevice = fmt.Errorf("no such RDMA device or port: %w", unix.ENODEV)

// ErrNotOptional is the error of a counter name the port does not offer
// as an optional counter; the kernel would refuse its index with EINVAL.
var ErrNotOptional = errors.New("not an optional counter of the port")

// EncodeStatSet is the body of the RDMA_NLDEV_CMD_STAT_SET request that
// makes indices exactly the enabled optional counters of the port:
// DEV_INDEX and PORT_INDEX (u32), then STAT_HWCOUNTERS nesting one
// STAT_HWCOUNTER_INDEX (u32) per counter, as iproute2's `rdma statistic
// set link DEV/PORT optional-counters a,b` sends it (rdma/stat.c,
// stat_one_set_link_opcounters). The kernel
// (nldev_stat_set_counter_dynamic_doit) enables the optional counters
// listed and disables every other one, so the set is the whole set: an
// empty one disables them all (`rdma statistic unset`). Indices are
// sorted and deduplicated so one set has one encoding.
func EncodeStatSet(devIndex, port uint32, indices []uint32) []byte {
	idx := slices.Clone(indices)
	slices.Sort(idx)
	idx = slices.Compact(idx)
	b := appendAttr(nil, attrDevIndex, u32Data(devIndex))
	b = appendAttr(b, attrPortIndex, u32Data(port))
	// libmnl's mnl_attr_nest_start sets NLA_F_NESTED; so do we.
	var table []byte
	for _, i := range idx {
		table = appendAttr(table, attrStatHWCounterIndex, u32Data(i))
	}
	return appendAttr(b, attrStatHWCounters|nlaFNested, table)
}

// DecodeStatSet reads a RDMA_NLDEV_CMD_STAT_SET body back the way the
// kernel does: the device and port, and every u32 nested in
// STAT_HWCOUNTERS (whatever its type, as nla_for_each_nested and
// nla_get_u32 take it). For tests and fakes of the kernel.
func DecodeStatSet(body []byte) (devIndex, port uint32, indices []uint32, err error) {
	as, err := attrs(body)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("stat set: %w", err)
	}
	var haveDev, havePort, haveTable bool
	for _, a := range as {
		switch a.typ {
		case attrDevIndex:
			devIndex, err = a.u32()
			haveDev = true
		case attrPortIndex:
			port, err = a.u32()
			havePort = true
		case attrStatHWCounters:
			haveTable = true
			var entries []attr
			if entries, err = attrs(a.data); err == nil {
				for _, e := range entries {
					var v uint32
					if v, err = e.u32(); err != nil {
						break
					}
					indices = append(indices, v)
				}
			}
		}
		if err != nil {
			return 0, 0, nil, fmt.Errorf("stat set: %w", err)
		}
	}
	if !haveDev || !havePort || !haveTable {
		// nldev_stat_set_doit: EINVAL without them.
		return 0, 0, nil, fmt.Errorf("stat set without device, port or counter table: %w", unix.EINVAL)
	}
	return devIndex, port, indices, nil
}

// findDevice is the device of that name in the kernel's device dump.
func findDevice(ctx context.Context, c Conn, name string) (Device, error) {
	// A dump cut short or with an undecodable entry still names the
	// devices it decoded.
	devs, err := dump(ctx, c, nldevType(cmdGet), DefaultMaxDevices, DecodeDevice)
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	if err != nil {
		return Device{}, err
	}
	return Device{}, fmt.Errorf("%s: %w", name, ErrNoDevice)
}

// portOf finds the device and checks it has the port.
func portOf(ctx context.Context, c Conn, device string, port uint32) (Device, error) {
	d, err := findDevice(ctx, c, device)
	if err != nil {
		return Device{}, err
	}
	if port == 0 || port > d.Ports {
		return Device{}, fmt.Errorf("%s/%d (the device has %d ports): %w", device, port, d.Ports, ErrNoDevice)
	}
	return d, nil
}

// ReadCounterStatus asks the kernel for one port's counters and which
// optional ones are enabled (RDMA_NLDEV_CMD_STAT_GET_STATUS), finding the
// device by name: what `rdma statistic mode supported link DEV/PORT`
// prints.
func ReadCounterStatus(ctx context.Context, c Conn, device string, port uint32) (PortStatus, error) {
	d, err := portOf(ctx, c, device, port)
	if err != nil {
		return PortStatus{}, err
	}
	return portRequest(ctx, c, cmdStatGetStatus, d, port, DecodeStatus)
}

// Optional lists the port's optional counters and the enabled ones, each
// sorted.
func (s PortStatus) Optional() (offered, enabled []string) {
	for _, c := range s.Counters {
		if !c.Optional {
			continue
		}
		offered = append(offered, c.Name)
		if c.Enabled {
			enabled = append(enabled, c.Name)
		}
	}
	sort.Strings(offered)
	sort.Strings(enabled)
	return offered, enabled
}

// SetOptionalCounters makes names exactly the enabled optional counters
// of the port (the kernel replaces the whole set: a counter enabled now
// and not named is disabled). It reads the port's counter table first,
// since the kernel takes indices and they are the driver's to number, then
// sends RDMA_NLDEV_CMD_STAT_SET, then reads the table again and fails
// unless the enabled set is what was asked. A name the port does not
// offer as optional is ErrNotOptional and nothing is sent.
func SetOptionalCounters(ctx context.Context, c Conn, device string, port uint32, names []string) error {
	d, err := portOf(ctx, c, device, port)
	if err != nil {
		return err
	}
	st, err := portRequest(ctx, c, cmdStatGetStatus, d, port, DecodeStatus)
	if err != nil {
		return fmt.Errorf("%s/%d: counter status: %w", device, port, err)
	}
	byName := map[string]CounterStatus{}
	for _, cs := range st.Counters {
		byName[cs.Name] = cs
	}
	want := slices.Clone(names)
	slices.Sort(want)
	want = slices.Compact(want)
	var idx []uint32
	for _, n := range want {
		cs, ok := byName[n]
		if !ok || !cs.Optional {
			offered, _ := st.Optional()
			return fmt.Errorf("%s/%d: %q: %w (offered: %s)", device, port, n, ErrNotOptional, orNone(offered))
		}
		if !cs.HasIndex {
			return fmt.Errorf("%s/%d: %q: the kernel's counter status carries no index", device, port, n)
		}
		idx = append(idx, cs.Index)
	}
	body := EncodeStatSet(d.Index, port, idx)
	// The kernel answers with a STAT_SET message (the handle and port),
	// then the ACK; nothing in it is needed.
	if err := c.Exec(ctx, unix.NETLINK_RDMA, nldevType(cmdStatSet), unix.NLM_F_ACK, body, func([]byte) bool { return false }); err != nil {
		return fmt.Errorf("%s/%d: set optional counters: %w", device, port, err)
	}
	after, err := portRequest(ctx, c, cmdStatGetStatus, d, port, DecodeStatus)
	if err != nil {
		return fmt.Errorf("%s/%d: counter status after the set: %w", device, port, err)
	}
	if _, got := after.Optional(); !slices.Equal(got, want) {
		return fmt.Errorf("%s/%d: asked the kernel for optional counters %s, it has %s enabled", device, port, orNone(want), orNone(got))
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}
