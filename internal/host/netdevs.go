// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"

	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
)

// netdevSource is the slow part of the netdevs: which they are, their
// kind, port, GID types and IPoIB settings.
var netdevSource = register(&Source[*netdev.Snapshot]{name: "netdev", read: func(ctx context.Context, s *Snapshot) (*netdev.Snapshot, error) {
	// The ports and their link layers are the class's: read once.
	class, _ := s.Class(ctx)
	return netdev.Read(ctx, s.h.fs, netdev.Options{Keep: s.h.Keep, Mapper: s.h.opts.Mapper,
		Ethtool: s.h.opts.Ethtool, CharDevices: true, Class: class, Ifindexes: &s.h.ifindexes})
}})

// Netdevs are the IPoIB and RoCE netdevs of the RDMA ports: which they
// are, their kind, port, GID types and IPoIB settings are slow; operstate,
// carrier, flags, MTU and the ethtool query are read by every snapshot.
func (s *Snapshot) Netdevs(ctx context.Context) (*netdev.Snapshot, error) {
	return s.netdevs.get(func() (*netdev.Snapshot, error) {
		base, fresh, err := getFresh(ctx, s, netdevSource)
		if fresh || base == nil {
			return base, err
		}
		return netdev.Refresh(ctx, s.h.netFS, base, s.h.opts.Ethtool, &s.h.ifindexes)
	})
}

// NeedNetdevs judges a Netdevs reading; NeedModule whether the netdev
// read asks for the transceiver memory (Options.Ethtool.ModuleEEPROM):
// without it every netdev's Module is nil by design, not unreadable.
var (
	NeedNetdevs = cannotRead[netdev.Snapshot]("netdev", "the netdevs")
	NeedModule  = &Need[bool]{name: "module", why: func(asked bool, _ error) string {
		if !asked {
			return "the transceiver memory is read only with --collector.netdev.module-eeprom (each page is a firmware " +
				"access; it needs CAP_NET_ADMIN)"
		}
		return ""
	}}
)
