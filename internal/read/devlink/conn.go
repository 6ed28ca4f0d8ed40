// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package devlink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Conn sends one devlink request and returns the payloads of its reply
// messages (after the generic netlink header). Tests give recorded or
// built replies; Live asks the running kernel.
type Conn interface {
	Execute(ctx context.Context, cmd uint8, flags netlink.HeaderFlags, attrs []byte) ([][]byte, error)
}

// ErrNoDevlink is a kernel without the devlink family (CONFIG_NET_DEVLINK
// off, or a kernel before 4.6): no reporters, no versions, and no fault.
var ErrNoDevlink = errors.New("no devlink generic netlink family")

// DefaultTimeout bounds one request when the context has no earlier
// deadline: INFO_GET waits on the driver's firmware queries (mlx5: MCQI
// and MCQS access registers), and a device stuck in a firmware command
// must not hold the scrape.
const DefaultTimeout = 2 * time.Second

// Live is the running kernel, in the process's network namespace. Each
// request opens its own socket, as the RDMA netlink reader does: requests
// are few per scrape and a socket kept between scrapes is state to keep
// healthy.
type Live struct {
	// Timeout overrides DefaultTimeout.
	Timeout time.Duration
}

// Execute implements Conn.
func (l Live) Execute(ctx context.Context, cmd uint8, flags netlink.HeaderFlags, attrs []byte) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := l.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	deadline := time.Now().Add(t)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("devlink netlink socket: %w", err)
	}
	defer c.Close()
	if err := c.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("devlink netlink deadline: %w", err)
	}
	f, err := c.GetFamily(unix.DEVLINK_GENL_NAME)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNoDevlink
		}
		return nil, fmt.Errorf("devlink netlink family: %w", err)
	}
	msgs, err := c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: unix.DEVLINK_GENL_VERSION},
		Data:   attrs,
	}, f.ID, flags)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(msgs))
	for i := range msgs {
		out[i] = msgs[i].Data
	}
	return out, nil
}
