// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
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

// Exec implements Conn on a github.com/mdlayher/netlink socket (the one
// netlink stack of the project) whose deadline is ours. The reply is read
// one datagram at a time rather than with the library's Receive, which
// holds a whole multipart dump in memory before returning it: an nldev
// dump of every QP is as large as the host's QPs, and a capped read must
// hold no more than what it keeps.
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
	c, err := netlink.Dial(proto, nil)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer c.Close()
	// A dump is built as it is read: draining one the caller no longer
	// wants still costs the kernel every object (a firmware command per
	// QP on mlx5). Closing the socket on cancel stops it.
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if err := c.SetDeadline(time.Now().Add(t)); err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	req, err := c.Send(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request | netlink.HeaderFlags(flags)},
		Data:   body,
	})
	if err == nil {
		err = receive(c, req.Header, keep)
	}
	if cerr := ctx.Err(); cerr != nil {
		// Abandoned: whatever the socket said after the close is moot.
		return cerr
	}
	return err
}

// recvBuf is one datagram's buffer: the kernel sizes a dump's datagrams to
// at most 32 KiB (netlink_dump's max_recvmsg_len path); a larger one comes
// back truncated and is an error, not a partial read.
const recvBuf = 64 << 10

// receive reads the reply to req, handing each message's payload to keep
// until it returns false and draining the rest unseen, as the kernel
// answers: messages of another sequence or port are not ours and are
// skipped, NLMSG_ERROR with a non-zero code and NLMSG_DONE with one are
// the request's error (a syscall.Errno), a message without NLM_F_MULTI or
// NLMSG_DONE ends it, and NLM_F_DUMP_INTR on any message is
// ErrInterrupted.
func receive(c *netlink.Conn, req netlink.Header, keep func([]byte) bool) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	buf := make([]byte, recvBuf)
	interrupted, keeping := false, true
	for {
		var n, rflags int
		var rerr error
		if err := raw.Read(func(fd uintptr) bool {
			n, _, rflags, _, rerr = unix.Recvmsg(int(fd), buf, nil, 0)
			return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
		}); err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		if rerr != nil {
			return fmt.Errorf("netlink receive: %w", rerr)
		}
		if rflags&unix.MSG_TRUNC != 0 {
			return fmt.Errorf("netlink receive: datagram over %d bytes truncated", recvBuf)
		}
		b := buf[:n]
		for len(b) > 0 {
			h, data, rest, err := nextMessage(b)
			if err != nil {
				return err
			}
			b = rest
			// Send filled req's sequence and the socket's port id.
			if h.Sequence != req.Sequence || h.PID != req.PID {
				continue
			}
			if h.Flags&netlink.DumpInterrupted != 0 {
				interrupted = true
			}
			switch h.Type {
			case netlink.Error, netlink.Done:
				if len(data) < 4 {
					if h.Type == netlink.Done {
						return doneErr(interrupted)
					}
					return errors.New("netlink: short NLMSG_ERROR")
				}
				if code := int32(binary.NativeEndian.Uint32(data)); code != 0 {
					return syscall.Errno(-code)
				}
				return doneErr(interrupted)
			}
			if keeping {
				keeping = keep(data)
			}
			if h.Flags&netlink.Multi == 0 {
				return doneErr(interrupted)
			}
		}
	}
}

func doneErr(interrupted bool) error {
	if interrupted {
		return ErrInterrupted
	}
	return nil
}

// nlmsgHdrLen is struct nlmsghdr's size.
const nlmsgHdrLen = 16

// nextMessage splits the first netlink message off b: its header, its
// payload, and what follows it (aligned to 4 bytes). A length shorter than
// the header or past the datagram is an error: nothing after it is
// trusted.
func nextMessage(b []byte) (h netlink.Header, data, rest []byte, err error) {
	if len(b) < nlmsgHdrLen {
		return h, nil, nil, fmt.Errorf("netlink: %d bytes left, short of a message header", len(b))
	}
	ne := binary.NativeEndian
	h.Length = ne.Uint32(b[0:4])
	h.Type = netlink.HeaderType(ne.Uint16(b[4:6]))
	h.Flags = netlink.HeaderFlags(ne.Uint16(b[6:8]))
	h.Sequence = ne.Uint32(b[8:12])
	h.PID = ne.Uint32(b[12:16])
	if h.Length < nlmsgHdrLen || int(h.Length) > len(b) {
		return h, nil, nil, fmt.Errorf("netlink: message length %d in a %d-byte datagram", h.Length, len(b))
	}
	next := min((int(h.Length)+3)&^3, len(b))
	return h, b[nlmsgHdrLen:h.Length], b[next:], nil
}

// ErrInterrupted is a dump the kernel marked inconsistent (a device came
// or went during it); its messages are dropped and the next read retries.
var ErrInterrupted = errors.New("netlink dump interrupted")
