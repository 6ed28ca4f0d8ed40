// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"errors"
	"fmt"
	"sort"
)

// nldev commands and attributes the library's nl package does not name
// (include/uapi/rdma/rdma_netlink.h: enum rdma_nldev_command and enum
// rdma_nldev_attr, an ABI whose order never changes).
const (
	nlClientNLDEV    = 5  // RDMA_NL_NLDEV, the nldev client
	nlClientShift    = 10 // RDMA_NL_GET_CLIENT_SHIFT
	cmdGet           = 1  // RDMA_NLDEV_CMD_GET
	cmdResGet        = 9  // RDMA_NLDEV_CMD_RES_GET
	cmdStatGet       = 17 // RDMA_NLDEV_CMD_STAT_GET
	cmdStatGetStatus = 24 // RDMA_NLDEV_CMD_STAT_GET_STATUS, Linux 5.18

	attrDevIndex                = 1  // RDMA_NLDEV_ATTR_DEV_INDEX, u32
	attrDevName                 = 2  // RDMA_NLDEV_ATTR_DEV_NAME, string
	attrPortIndex               = 3  // RDMA_NLDEV_ATTR_PORT_INDEX, u32
	attrFWVersion               = 5  // RDMA_NLDEV_ATTR_FW_VERSION, string
	attrResSummary              = 15 // RDMA_NLDEV_ATTR_RES_SUMMARY, nested table
	attrResSummaryEntry         = 16 // RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY
	attrResSummaryEntryName     = 17 // RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, string
	attrResSummaryEntryCurr     = 18 // RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR, u64
	attrStatHWCounters          = 80 // RDMA_NLDEV_ATTR_STAT_HWCOUNTERS, nested table
	attrStatHWCounterEntry      = 81 // RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY
	attrStatHWCounterEntryName  = 82 // RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, string
	attrStatHWCounterEntryValue = 83 // RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, u64

	attrStatHWCounterIndex   = 94 // RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX, u32
	attrStatHWCounterDynamic = 95 // RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC, u8
)

// nldevType is the netlink message type of an nldev command.
func nldevType(cmd int) uint16 {
	return uint16(nlClientNLDEV<<nlClientShift | cmd)
}

// Device is one RDMA device as RDMA_NLDEV_CMD_GET dumps it.
type Device struct {
	Index uint32
	Name  string
	// Ports is the number of ports (PORT_INDEX in a device reply).
	Ports uint32
}

// Counter is one hardware counter of a port.
type Counter struct {
	Name  string
	Value uint64
}

// PortStats is the reply to RDMA_NLDEV_CMD_STAT_GET for one port: the
// counters `rdma statistic show link DEV/PORT` prints. The kernel leaves
// out optional counters that are not enabled.
type PortStats struct {
	Device   string
	Port     uint32
	Counters []Counter
}

// CounterStatus is one counter of a RDMA_NLDEV_CMD_STAT_GET_STATUS reply:
// Optional is whether the kernel flags it optional (it carries
// RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC), Enabled its value. Index is
// the counter's place in the port's table (HWCOUNTER_INDEX), what
// RDMA_NLDEV_CMD_STAT_SET names a counter by; HasIndex says the reply
// carried it.
type CounterStatus struct {
	Name     string
	Optional bool
	Enabled  bool
	Index    uint32
	HasIndex bool
}

// PortStatus is the reply to RDMA_NLDEV_CMD_STAT_GET_STATUS for one port:
// what `rdma statistic mode supported` prints.
type PortStatus struct {
	Device   string
	Port     uint32
	Counters []CounterStatus
}

// Resources is one device's entry of the RDMA_NLDEV_CMD_RES_GET dump: the
// resource totals `rdma resource show` prints (pd, cq, qp, cm_id, mr,
// ctx, srq), by the kernel's names.
type Resources struct {
	Device string
	Totals map[string]uint64
}

// DecodeDevice decodes one RDMA_NLDEV_CMD_GET reply.
func DecodeDevice(msg []byte) (Device, error) {
	as, err := attrs(msg)
	if err != nil {
		return Device{}, fmt.Errorf("device: %w", err)
	}
	var d Device
	var haveIndex bool
	for _, a := range as {
		switch a.typ {
		case attrDevIndex:
			if d.Index, err = a.u32(); err != nil {
				return Device{}, fmt.Errorf("device: %w", err)
			}
			haveIndex = true
		case attrDevName:
			if d.Name, err = a.str(); err != nil {
				return Device{}, fmt.Errorf("device: %w", err)
			}
		case attrPortIndex:
			if d.Ports, err = a.u32(); err != nil {
				return Device{}, fmt.Errorf("device %s: %w", d.Name, err)
			}
		}
	}
	if !haveIndex || d.Name == "" {
		return Device{}, fmt.Errorf("device reply without index or name")
	}
	return d, nil
}

// handle reads the device name and port every per-port reply starts with.
func handle(as []attr) (dev string, port uint32, err error) {
	for _, a := range as {
		switch a.typ {
		case attrDevName:
			if dev, err = a.str(); err != nil {
				return "", 0, err
			}
		case attrPortIndex:
			if port, err = a.u32(); err != nil {
				return "", 0, err
			}
		}
	}
	if dev == "" || port == 0 {
		return "", 0, fmt.Errorf("reply without device name or port")
	}
	return dev, port, nil
}

// hwcounters walks the RDMA_NLDEV_ATTR_STAT_HWCOUNTERS table: each entry's
// attributes go to f.
func hwcounters(as []attr, f func(entry []attr) error) error {
	for _, a := range as {
		if a.typ != attrStatHWCounters {
			continue
		}
		entries, err := attrs(a.data)
		if err != nil {
			return fmt.Errorf("hwcounters: %w", err)
		}
		for _, e := range entries {
			if e.typ != attrStatHWCounterEntry {
				continue
			}
			fields, err := attrs(e.data)
			if err != nil {
				return fmt.Errorf("hwcounter entry: %w", err)
			}
			if err := f(fields); err != nil {
				return err
			}
		}
	}
	return nil
}

// hwcounter decodes one HWCOUNTER_ENTRY: a counter's name and value,
// both required.
func hwcounter(fields []attr) (Counter, error) {
	var c Counter
	var haveValue bool
	for _, f := range fields {
		var err error
		switch f.typ {
		case attrStatHWCounterEntryName:
			c.Name, err = f.str()
		case attrStatHWCounterEntryValue:
			c.Value, err = f.u64()
			haveValue = true
		}
		if err != nil {
			return Counter{}, err
		}
	}
	if c.Name == "" || !haveValue {
		return Counter{}, errors.New("counter without name or value")
	}
	return c, nil
}

// DecodeStat decodes one RDMA_NLDEV_CMD_STAT_GET reply (the default
// counter of a port).
func DecodeStat(msg []byte) (PortStats, error) {
	as, err := attrs(msg)
	if err != nil {
		return PortStats{}, fmt.Errorf("statistic: %w", err)
	}
	dev, port, err := handle(as)
	if err != nil {
		return PortStats{}, fmt.Errorf("statistic: %w", err)
	}
	s := PortStats{Device: dev, Port: port}
	seen := map[string]bool{}
	err = hwcounters(as, func(fields []attr) error {
		c, err := hwcounter(fields)
		if err != nil {
			return fmt.Errorf("statistic %s/%d: %w", dev, port, err)
		}
		if !seen[c.Name] {
			seen[c.Name] = true
			s.Counters = append(s.Counters, c)
		}
		return nil
	})
	if err != nil {
		return PortStats{}, err
	}
	sort.Slice(s.Counters, func(i, j int) bool { return s.Counters[i].Name < s.Counters[j].Name })
	return s, nil
}

// DecodeStatus decodes one RDMA_NLDEV_CMD_STAT_GET_STATUS reply.
func DecodeStatus(msg []byte) (PortStatus, error) {
	as, err := attrs(msg)
	if err != nil {
		return PortStatus{}, fmt.Errorf("counter status: %w", err)
	}
	dev, port, err := handle(as)
	if err != nil {
		return PortStatus{}, fmt.Errorf("counter status: %w", err)
	}
	s := PortStatus{Device: dev, Port: port}
	seen := map[string]bool{}
	err = hwcounters(as, func(fields []attr) error {
		var c CounterStatus
		for _, f := range fields {
			switch f.typ {
			case attrStatHWCounterEntryName:
				n, err := f.str()
				if err != nil {
					return fmt.Errorf("counter status %s/%d: %w", dev, port, err)
				}
				c.Name = n
			case attrStatHWCounterIndex:
				v, err := f.u32()
				if err != nil {
					return fmt.Errorf("counter status %s/%d: %w", dev, port, err)
				}
				c.Index, c.HasIndex = v, true
			case attrStatHWCounterDynamic:
				v, err := f.u8()
				if err != nil {
					return fmt.Errorf("counter status %s/%d: %w", dev, port, err)
				}
				c.Optional, c.Enabled = true, v != 0
			}
		}
		if c.Name == "" {
			return fmt.Errorf("counter status %s/%d: counter without name", dev, port)
		}
		if !seen[c.Name] {
			seen[c.Name] = true
			s.Counters = append(s.Counters, c)
		}
		return nil
	})
	if err != nil {
		return PortStatus{}, err
	}
	sort.Slice(s.Counters, func(i, j int) bool { return s.Counters[i].Name < s.Counters[j].Name })
	return s, nil
}

// DecodeResources decodes one message of the RDMA_NLDEV_CMD_RES_GET dump.
func DecodeResources(msg []byte) (Resources, error) {
	as, err := attrs(msg)
	if err != nil {
		return Resources{}, fmt.Errorf("resource: %w", err)
	}
	r := Resources{Totals: map[string]uint64{}}
	for _, a := range as {
		switch a.typ {
		case attrDevName:
			if r.Device, err = a.str(); err != nil {
				return Resources{}, fmt.Errorf("resource: %w", err)
			}
		case attrResSummary:
			entries, err := attrs(a.data)
			if err != nil {
				return Resources{}, fmt.Errorf("resource summary: %w", err)
			}
			for _, e := range entries {
				if e.typ != attrResSummaryEntry {
					continue
				}
				fields, err := attrs(e.data)
				if err != nil {
					return Resources{}, fmt.Errorf("resource summary entry: %w", err)
				}
				var name string
				var v uint64
				var haveValue bool
				for _, f := range fields {
					switch f.typ {
					case attrResSummaryEntryName:
						name, err = f.str()
					case attrResSummaryEntryCurr:
						v, err = f.u64()
						haveValue = true
					}
					if err != nil {
						return Resources{}, fmt.Errorf("resource summary entry: %w", err)
					}
				}
				if name == "" || !haveValue {
					return Resources{}, fmt.Errorf("resource summary entry without name or value")
				}
				r.Totals[name] = v
			}
		}
	}
	if r.Device == "" {
		return Resources{}, fmt.Errorf("resource reply without device name")
	}
	return r, nil
}
