// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// genlTimeout bounds one ethtool netlink exchange: the kernel answers
// from the driver's callbacks, and a driver stuck in a firmware command
// must not hold the scrape.
const genlTimeout = 2 * time.Second

// ethtoolGenlVersion is ETHTOOL_GENL_VERSION.
const ethtoolGenlVersion = 1

// errNoEthtoolNetlink is a kernel without the ethtool netlink family
// (before 5.6): no link state, no FEC statistics, and no error.
var errNoEthtoolNetlink = errors.New("no ethtool netlink family")

// genlQuery is one ethtool netlink connection for the queries of one
// netdev.
type genlQuery struct {
	c      *genetlink.Conn
	family uint16
}

func dialEthtoolGenl() (*genlQuery, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("ethtool netlink socket: %w", err)
	}
	if err := c.SetDeadline(time.Now().Add(genlTimeout)); err != nil {
		c.Close()
		return nil, fmt.Errorf("ethtool netlink deadline: %w", err)
	}
	f, err := c.GetFamily(unix.ETHTOOL_GENL_NAME)
	if err != nil {
		c.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, errNoEthtoolNetlink
		}
		return nil, fmt.Errorf("ethtool netlink family: %w", err)
	}
	return &genlQuery{c: c, family: f.ID}, nil
}

func (q *genlQuery) Close() error { return q.c.Close() }

// get sends one ethtool GET command for a netdev by name and returns the
// reply's attributes. headerFlags are ETHTOOL_A_HEADER_FLAGS
// (ETHTOOL_FLAG_STATS).
func (q *genlQuery) get(cmd uint8, headerAttr uint16, name string, headerFlags uint32) ([]byte, error) {
	data, err := encodeRequest(headerAttr, name, headerFlags, nil)
	if err != nil {
		return nil, err
	}
	return q.execute(cmd, data)
}

// encodeRequest encodes the attributes of an ethtool request: the header
// nest naming the netdev, then what extra adds.
func encodeRequest(headerAttr uint16, name string, headerFlags uint32, extra func(*netlink.AttributeEncoder)) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(headerAttr, func(nae *netlink.AttributeEncoder) error {
		nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, name)
		if headerFlags != 0 {
			nae.Uint32(unix.ETHTOOL_A_HEADER_FLAGS, headerFlags)
		}
		return nil
	})
	if extra != nil {
		extra(ae)
	}
	return ae.Encode()
}

// execute sends one request and returns the one reply's attributes.
func (q *genlQuery) execute(cmd uint8, data []byte) ([]byte, error) {
	msgs, err := q.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: ethtoolGenlVersion},
		Data:   data,
	}, q.family, netlink.Request)
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("%w: %d messages", ErrBadReply, len(msgs))
	}
	return msgs[0].Data, nil
}

// unsupported reports an error that means "this driver or kernel cannot
// answer that": the value is absent, and that is no fault.
func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, errNoEthtoolNetlink)
}

// linkState queries ETHTOOL_MSG_LINKSTATE_GET.
func (q *genlQuery) linkState(name string) (*LinkState, error) {
	b, err := q.get(unix.ETHTOOL_MSG_LINKSTATE_GET, unix.ETHTOOL_A_LINKSTATE_HEADER, name, 0)
	if err != nil {
		return nil, err
	}
	ls, err := DecodeLinkState(b)
	if err != nil {
		return nil, err
	}
	return &ls, nil
}

// fec queries ETHTOOL_MSG_FEC_GET with statistics.
func (q *genlQuery) fec(name string) (*FECStats, error) {
	b, err := q.get(unix.ETHTOOL_MSG_FEC_GET, fecAttrHeader, name, unix.ETHTOOL_FLAG_STATS)
	if err != nil {
		return nil, err
	}
	st, err := DecodeFEC(b)
	if err != nil {
		return nil, err
	}
	if !st.CorrectedBlocks.OK && !st.UncorrectableBlocks.OK {
		return nil, nil
	}
	return &st, nil
}

// queryLink fills info's link state and FEC statistics. What the kernel
// or driver does not support is absent without an error.
func queryLink(name string, info *EthtoolInfo) error {
	q, err := dialEthtoolGenl()
	if err != nil {
		if unsupported(err) {
			return nil
		}
		return fmt.Errorf("ethtool %s: %w", name, err)
	}
	defer q.Close()
	var errs []error
	if ls, err := q.linkState(name); err == nil {
		info.Link = ls
	} else if !unsupported(err) {
		errs = append(errs, fmt.Errorf("ethtool %s: link state: %w", name, err))
	}
	if st, err := q.fec(name); err == nil {
		info.FEC = st
	} else if !unsupported(err) {
		errs = append(errs, fmt.Errorf("ethtool %s: FEC statistics: %w", name, err))
	}
	return errors.Join(errs...)
}
