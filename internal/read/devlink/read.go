// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package devlink

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// Query names one kind of request, as rdma_devlink_requests labels it.
type Query string

// Queries.
const (
	QueryHealth Query = "health"
	QueryInfo   Query = "info"
)

// Status is how a request ended. Every status but StatusError and
// StatusTruncated is a state of the host or its kernel, not a fault of
// the read: the series are absent and the status says why.
type Status string

// Statuses.
const (
	StatusOK Status = "ok"
	// StatusUnsupported: the driver does not implement the command
	// (EOPNOTSUPP).
	StatusUnsupported Status = "unsupported"
	// StatusNoDevlink: the kernel has no devlink family.
	StatusNoDevlink Status = "no_devlink"
	// StatusDenied: EPERM or EACCES (a seccomp or LSM policy; the GET
	// commands need no capability).
	StatusDenied Status = "denied"
	// StatusNoDevice: no devlink instance has the handle (ENODEV): the
	// driver registers none (rxe, siw, older drivers) or the function is
	// not in this network namespace.
	StatusNoDevice Status = "no_device"
	// StatusTruncated: the dump had more reporters than the cap; what fit
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
	case errors.Is(err, ErrNoDevlink):
		return StatusNoDevlink
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, syscall.ENOTSUP):
		return StatusUnsupported
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return StatusDenied
	case errors.Is(err, unix.ENODEV):
		return StatusNoDevice
	case errors.Is(err, errTruncated):
		return StatusTruncated
	}
	return StatusError
}

// DefaultMaxReporters caps the reporters kept from one dump: an SR-IOV
// host in switchdev mode has a vnic reporter per representor port, a few
// hundred; more is a runaway.
const DefaultMaxReporters = 4096

// Options control Read.
type Options struct {
	// Handles are the instances read: the kept RDMA devices' PCI
	// functions. Info is asked of each alone (INFO_GET runs firmware
	// queries, and an excluded function must not be touched); the
	// reporter dump asks no driver anything and is filtered to them.
	Handles []Handle
	// Health and Info select the queries.
	Health, Info bool
	// MaxReporters caps the dump; 0 is DefaultMaxReporters.
	MaxReporters int
}

// Snapshot is what one Read got.
type Snapshot struct {
	Reporters []Reporter
	Infos     []Info
	// Outcomes counts the requests of each query by how they ended.
	Outcomes map[Query]map[Status]int
	// Errors are the StatusError and StatusTruncated outcomes' errors
	// and the messages that did not decode.
	Errors []error
	// Skipped counts the reporters and versions left out because a name
	// or value is not a bounded label value (ice's fw.app.name is "ICE
	// OS Default Package"): a driver's free text, not a fault.
	Skipped int
}

var errTruncated = errors.New("dump cut at the reporter cap")

func (s *Snapshot) outcome(q Query, err error) Status {
	st := Classify(err)
	if s.Outcomes == nil {
		s.Outcomes = map[Query]map[Status]int{}
	}
	if s.Outcomes[q] == nil {
		s.Outcomes[q] = map[Status]int{}
	}
	s.Outcomes[q][st]++
	if st == StatusError || st == StatusTruncated {
		s.Errors = append(s.Errors, fmt.Errorf("devlink %s: %w", q, err))
	}
	return st
}

// labelValue bounds the driver-chosen names that become label values
// (reporter and component names, versions): kernel identifiers, never
// free text, as the label policy has it (names.Token); what it refuses is
// counted there too.
func labelValue(s string) bool {
	if names.Token(s) {
		return true
	}
	names.Limit(names.Refused, 1)
	return false
}

// Read asks c for what opts select. It never fails as a whole: each
// request's outcome is counted and its error kept.
func Read(ctx context.Context, c Conn, opts Options) *Snapshot {
	s := &Snapshot{}
	want := make(map[Handle]bool, len(opts.Handles))
	for _, h := range opts.Handles {
		want[h] = true
	}
	if opts.Health && len(want) > 0 {
		s.readHealth(ctx, c, want, opts.MaxReporters)
	}
	if opts.Info {
		for _, h := range opts.Handles {
			if st := s.readInfo(ctx, c, h); st == StatusNoDevlink || ctx.Err() != nil {
				break
			}
		}
	}
	return s
}

func (s *Snapshot) readHealth(ctx context.Context, c Conn, want map[Handle]bool, max int) {
	if max <= 0 {
		max = DefaultMaxReporters
	}
	msgs, err := c.Execute(ctx, unix.DEVLINK_CMD_HEALTH_REPORTER_GET, netlink.Request|netlink.Dump, nil)
	if err == nil && len(msgs) > max {
		msgs, err = msgs[:max], fmt.Errorf("%w: %d reporters", errTruncated, len(msgs))
	}
	s.outcome(QueryHealth, err)
	for _, m := range msgs {
		r, err := DecodeReporter(m)
		if err != nil {
			s.Errors = append(s.Errors, fmt.Errorf("devlink health: %w", err))
			continue
		}
		if !want[r.Handle] {
			continue
		}
		if !labelValue(r.Name) {
			s.Skipped++
			continue
		}
		s.Reporters = append(s.Reporters, r)
	}
}

func (s *Snapshot) readInfo(ctx context.Context, c Conn, h Handle) Status {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.DEVLINK_ATTR_BUS_NAME, h.Bus)
	ae.String(unix.DEVLINK_ATTR_DEV_NAME, h.Device)
	attrs, err := ae.Encode()
	if err != nil {
		return s.outcome(QueryInfo, err)
	}
	msgs, err := c.Execute(ctx, unix.DEVLINK_CMD_INFO_GET, netlink.Request, attrs)
	if err == nil && len(msgs) != 1 {
		err = fmt.Errorf("%w: %d messages for %s", ErrBadReply, len(msgs), h)
	}
	var in Info
	if err == nil {
		in, err = DecodeInfo(msgs[0])
	}
	if err == nil && in.Handle != h {
		err = fmt.Errorf("%w: asked %s, answered %s", ErrBadReply, h, in.Handle)
	}
	if err != nil {
		return s.outcome(QueryInfo, fmt.Errorf("%s: %w", h, err))
	}
	for _, vs := range []*[]Version{&in.Fixed, &in.Running, &in.Stored} {
		kept := (*vs)[:0]
		for _, v := range *vs {
			if labelValue(v.Name) && labelValue(v.Value) {
				kept = append(kept, v)
			} else {
				s.Skipped++
			}
		}
		*vs = kept
	}
	s.Infos = append(s.Infos, in)
	return s.outcome(QueryInfo, nil)
}
