// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Query names one kind of request, as rdma_netlink_requests labels it.
type Query string

// Queries.
const (
	QueryDevice        Query = "device"
	QueryStatistic     Query = "statistic"
	QueryCounterStatus Query = "counter_status"
	QueryResource      Query = "resource"
	// QueryResourceObjects is one per-object dump (qp, cq, mr, pd, ctx)
	// of one device, for the per-process totals.
	QueryResourceObjects Query = "resource_objects"
	// QueryQPCounterMode is one port's QP counter mode request, and
	// QueryQPCounters one port's dump of its bound QP counters.
	QueryQPCounterMode Query = "qp_counter_mode"
	QueryQPCounters    Query = "qp_counters"
	QueryDCB           Query = "dcb"
	QueryPause         Query = "pause"
)

// Status is how a request ended. Every status but StatusError is a state
// of the host or its kernel, not a fault of the read: its series are
// absent and the status says why, on every scrape, without an error.
type Status string

// Statuses.
const (
	StatusOK Status = "ok"
	// StatusUnsupported: the kernel or the driver does not implement the
	// command for this device or port (EOPNOTSUPP, or EINVAL from a
	// kernel that predates the command or a port without counters).
	StatusUnsupported Status = "unsupported"
	// StatusNoNetlink: the socket family is missing (no ib_core loaded:
	// EPROTONOSUPPORT), so there is no RDMA netlink at all.
	StatusNoNetlink Status = "no_netlink"
	// StatusDenied: EPERM or EACCES (a seccomp or LSM policy).
	StatusDenied Status = "denied"
	// StatusNoDevice: the device or netdev is not in this namespace.
	StatusNoDevice Status = "no_device"
	// StatusTruncated: the reply exceeded the configured cap; what fit
	// is kept.
	StatusTruncated Status = "truncated"
	// StatusError: anything else (a timeout, a malformed reply).
	StatusError Status = "error"
)

// Classify maps a request's error to its status.
func Classify(err error) Status {
	switch {
	case err == nil:
		return StatusOK
	case errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.EAFNOSUPPORT):
		return StatusNoNetlink
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		return StatusUnsupported
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return StatusDenied
	case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return StatusNoDevice
	}
	return StatusError
}

// DefaultMaxDevices caps the device and resource dumps: a host with
// SR-IOV has a few hundred RDMA devices, more is a runaway.
const DefaultMaxDevices = 1024

// Options control Read.
type Options struct {
	// Keep selects devices by name (nil: all): an excluded device gets no
	// per-port request (restricted ConnectX-7 functions log a firmware
	// error for every counter query) and no series.
	Keep func(device string) bool
	// MaxDevices caps the dumps; 0 is DefaultMaxDevices.
	MaxDevices int
	// Stats, Status and Resources select the queries (the device dump
	// always runs when any does).
	Stats, Status, Resources bool
	// ProcessResources dumps every object of each kept device (qp, cq,
	// mr, pd, ctx: one dump each) and counts them by owning process
	// (ProcessName) or kernel module. Off by default: on mlx5 each QP in
	// the dump costs the kernel a QUERY_QP firmware command.
	ProcessResources bool
	// ProcessName names a user process by the PID the kernel gives (in
	// the reader's PID namespace); false when it cannot. Nil names none.
	ProcessName func(pid uint32) (string, bool)
	// MaxProcesses caps the named processes per device (0:
	// DefaultMaxProcesses); the rest are summed into OtherProcesses.
	MaxProcesses int
	// MaxObjects caps the objects (resource objects and QP counters)
	// decoded per Read (0: DefaultMaxObjects); reaching it abandons the
	// dump under way, so the kernel stops building it, and skips the
	// rest, each counted truncated.
	MaxObjects int
	// QPCounters reads each port's QP counter mode and, in auto or manual
	// mode, its bound QP counters (`rdma statistic qp mode`, `rdma
	// statistic qp show`).
	QPCounters bool
}

func (o Options) maxObjects() int {
	if o.MaxObjects <= 0 {
		return DefaultMaxObjects
	}
	return o.MaxObjects
}

// Snapshot is what one Read got.
type Snapshot struct {
	Devices   []Device
	Stats     []PortStats
	Status    []PortStatus
	Resources []Resources
	// ProcessResources are the per-process totals, one per device and
	// object type that answered or was cut at the object cap.
	ProcessResources []ProcessResources
	// QPCounterModes and QPCounters are the ports' QP counter modes and,
	// where counters can be bound, their bound counters.
	QPCounterModes []QPCounterMode
	QPCounters     []PortQPCounters
	// Outcomes counts the requests of each query by how they ended.
	Outcomes map[Query]map[Status]int
	// Errors are the StatusError and StatusTruncated outcomes' errors;
	// the object cap is a setting, not a fault, and adds none.
	Errors []error
}

func (s *Snapshot) outcome(q Query, err error) Status {
	st := Classify(err)
	switch {
	case errors.Is(err, errTruncated):
		st = StatusTruncated
	case errors.Is(err, ErrInterrupted):
		st = StatusError
	}
	return s.outcomeStatus(q, st, err)
}

// outcomeStatus counts a request that ended with st.
func (s *Snapshot) outcomeStatus(q Query, st Status, err error) Status {
	if s.Outcomes == nil {
		s.Outcomes = map[Query]map[Status]int{}
	}
	if s.Outcomes[q] == nil {
		s.Outcomes[q] = map[Status]int{}
	}
	s.Outcomes[q][st]++
	if err != nil && (st == StatusError || st == StatusTruncated) {
		s.Errors = append(s.Errors, fmt.Errorf("rdma netlink %s: %w", q, err))
	}
	return st
}

// errTruncated marks a dump cut at MaxDevices.
var errTruncated = errors.New("dump cut at the device cap")

// dump runs a dump request and decodes each message with dec, stopping
// at max messages.
func dump[T any](ctx context.Context, c Conn, typ uint16, max int, dec func([]byte) (T, error)) ([]T, error) {
	var out []T
	var decErr error
	n := 0
	err := c.Exec(ctx, unix.NETLINK_RDMA, typ, unix.NLM_F_DUMP, nil, func(msg []byte) bool {
		n++
		if n > max {
			decErr = errTruncated
			return false
		}
		v, err := dec(msg)
		if err != nil {
			decErr = errors.Join(decErr, err)
			return true
		}
		out = append(out, v)
		return true
	})
	if err != nil {
		return nil, err
	}
	if errors.Is(decErr, errTruncated) {
		return out, fmt.Errorf("%w (%d)", errTruncated, max)
	}
	return out, decErr
}

// portRequest is a doit request for one port; the reply is one message.
func portRequest[T any](ctx context.Context, c Conn, cmd int, d Device, port uint32, dec func([]byte) (T, error)) (T, error) {
	body := appendAttr(appendAttr(nil, attrDevIndex, u32Data(d.Index)), attrPortIndex, u32Data(port))
	return request(ctx, c, cmd, d, port, body, dec)
}

// request is a doit request about a port with body; the reply is one
// message, which dec decodes.
func request[T any](ctx context.Context, c Conn, cmd int, d Device, port uint32, body []byte, dec func([]byte) (T, error)) (T, error) {
	var v T
	var got bool
	var decErr error
	err := c.Exec(ctx, unix.NETLINK_RDMA, nldevType(cmd), unix.NLM_F_ACK, body, func(msg []byte) bool {
		if got {
			return false
		}
		got = true
		v, decErr = dec(msg)
		return false
	})
	if err == nil && !got {
		err = fmt.Errorf("%s/%d: no reply", d.Name, port)
	}
	if err == nil {
		err = decErr
	}
	return v, err
}

// Read asks the kernel what opts select. It never fails as a whole: each
// request's outcome is counted, and what answered is kept.
func Read(ctx context.Context, c Conn, opts Options) *Snapshot {
	s := &Snapshot{}
	if !opts.Stats && !opts.Status && !opts.Resources && !opts.ProcessResources && !opts.QPCounters {
		return s
	}
	max := opts.MaxDevices
	if max <= 0 {
		max = DefaultMaxDevices
	}
	keep := opts.Keep
	if keep == nil {
		keep = func(string) bool { return true }
	}
	devs, err := dump(ctx, c, nldevType(cmdGet), max, DecodeDevice)
	if st := s.outcome(QueryDevice, err); st != StatusOK && st != StatusTruncated {
		return s
	}
	for _, d := range devs {
		if keep(d.Name) {
			s.Devices = append(s.Devices, d)
		}
	}
	for _, d := range s.Devices {
		// Ports are numbered from 1; a switch's port 0 has no counters
		// here. The count is the kernel's, capped like a dump.
		for p := uint32(1); p <= d.Ports && p <= 256 && ctx.Err() == nil; p++ {
			if opts.Stats {
				st, err := portRequest(ctx, c, cmdStatGet, d, p, DecodeStat)
				if s.outcome(QueryStatistic, err) == StatusOK {
					s.Stats = append(s.Stats, st)
				}
			}
			if opts.Status {
				st, err := portRequest(ctx, c, cmdStatGetStatus, d, p, DecodeStatus)
				if s.outcome(QueryCounterStatus, err) == StatusOK {
					s.Status = append(s.Status, st)
				}
			}
		}
	}
	b := &budget{left: opts.maxObjects()}
	if opts.QPCounters && ctx.Err() == nil {
		s.readQPCounters(ctx, c, opts, b)
	}
	if opts.ProcessResources && ctx.Err() == nil {
		s.readProcessResources(ctx, c, opts, b)
	}
	if opts.Resources && ctx.Err() == nil {
		res, err := dump(ctx, c, nldevType(cmdResGet), max, DecodeResources)
		s.outcome(QueryResource, err)
		for _, r := range res {
			if keep(r.Device) {
				s.Resources = append(s.Resources, r)
			}
		}
	}
	return s
}
