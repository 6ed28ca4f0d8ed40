// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Conn sends one netlink request and hands each reply message's payload
// (after the netlink header) to keep, until keep returns false; the rest
// of the reply is drained unseen. An NLMSG_ERROR reply is the error,
// a syscall.Errno. Cancelling ctx abandons the request: the socket is
// closed, so a dump the kernel builds as it is read (every nldev dump)
// stops being built, and Exec returns ctx's error.
type Conn interface {
	Exec(ctx context.Context, proto int, typ uint16, flags int, body []byte, keep func(msg []byte) bool) error
}

// DefaultTimeout bounds one request's send and every receive when the
// context has no earlier deadline: the kernel answers nldev and DCB
// requests at once, but an nldev statistic read waits on the device's
// firmware.
const DefaultTimeout = 5 * time.Second

// Live is the running kernel, in the network namespace of the process.
// Each request opens its own socket: requests are few per scrape and a
// socket left between scrapes would be state to keep healthy.
type Live struct {
	// Timeout overrides DefaultTimeout.
	Timeout time.Duration
}

// Exec implements Conn with the library's request and receive loop on a
// socket whose timeouts are ours (the library's own sockets use a 60 s
// package-wide timeout).
func (l Live) Exec(ctx context.Context, proto int, typ uint16, flags int, body []byte, keep func([]byte) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := l.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left < t {
			t = left
		}
	}
	if t <= 0 {
		return context.DeadlineExceeded
	}
	s, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), proto)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer s.Close()
	// A dump is built as it is read: draining one the caller no longer
	// wants still costs the kernel every object (a firmware command per
	// QP on mlx5). Closing the socket on cancel stops it.
	stop := context.AfterFunc(ctx, s.Close)
	defer stop()
	tv := unix.NsecToTimeval(t.Nanoseconds())
	if err := s.SetSendTimeout(&tv); err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	if err := s.SetReceiveTimeout(&tv); err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	req := nl.NewNetlinkRequest(int(typ), flags)
	req.AddRawData(body)
	req.Sockets = map[int]*nl.SocketHandle{proto: {Socket: s}}
	err = req.ExecuteIter(proto, 0, keep)
	if cerr := ctx.Err(); cerr != nil {
		// Abandoned: whatever the socket said after the close is moot.
		return cerr
	}
	if errors.Is(err, nl.ErrDumpInterrupted) {
		return ErrInterrupted
	}
	return err
}

// ErrInterrupted is a dump the kernel marked inconsistent (a device came
// or went during it); its messages are dropped and the next read retries.
var ErrInterrupted = errors.New("netlink dump interrupted")
