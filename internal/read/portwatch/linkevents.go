// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package portwatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// LinkEvents subscribes to the running kernel's link notifications
// (rtnetlink, the RTNLGRP_LINK group: RTM_NEWLINK and RTM_DELLINK, sent
// when a netdev's flags, carrier or operational state change, or it comes
// or goes) in the network namespace of the calling thread, and sends on
// the channel it returns after each batch that holds one: Options.Events.
// A RoCE port's state is its netdev's carrier (mlx5_ib asks the netdev),
// and IPoIB turns its carrier off when its port leaves ACTIVE, so a round
// run at once sees those ports change; an InfiniBand port without a netdev
// sends nothing here (its link_downed tells the rounds instead).
//
// The socket is read through the runtime's poller: a host whose links do
// not change costs no wake-up. Sends never block: one pending is enough,
// the round it asks for reads every port. Messages the kernel could not
// queue (ENOBUFS, a burst larger than the socket's buffer) ask for a round
// too. The channel is closed when ctx ends or the socket fails.
func LinkEvents(ctx context.Context) (<-chan struct{}, error) {
	c, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{Groups: unix.RTMGRP_LINK})
	if err != nil {
		return nil, fmt.Errorf("rtnetlink link notifications: %w", err)
	}
	ch := make(chan struct{}, 1)
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	go func() {
		defer close(ch)
		defer stop()
		defer c.Close()
		for {
			msgs, err := c.Receive()
			if err != nil && !errors.Is(err, unix.ENOBUFS) {
				return // closed (ctx ended) or failed
			}
			if err != nil || isLink(msgs) {
				select {
				case ch <- struct{}{}:
				default: // a round is already asked for
				}
			}
		}
	}()
	return ch, nil
}

// isLink reports whether msgs hold a link notification.
func isLink(msgs []netlink.Message) bool {
	for _, m := range msgs {
		if t := m.Header.Type; t == unix.RTM_NEWLINK || t == unix.RTM_DELLINK {
			return true
		}
	}
	return false
}
