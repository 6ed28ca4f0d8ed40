// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"errors"
	"os"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/read/roce"
)

// ErrNotLive is the answer of a kernel-only source on a tree that is not
// the live /sys (Options.Kernel is nil): its series are absent.
var ErrNotLive = errors.New("not the running kernel's /sys: RDMA and DCB netlink are not asked")

// RDMANetlink is what NETLINK_RDMA answers now (live, read by every
// snapshot that asks: its counters change between scrapes): per-port
// statistics with the optional counters, which optional counters are
// enabled, and the resource totals per device. Devices the filter
// excludes are never asked.
func (s *Snapshot) RDMANetlink(ctx context.Context) (*rdmanl.Snapshot, error) {
	return s.rdmanl.get(func() (*rdmanl.Snapshot, error) {
		if s.h.opts.Kernel == nil {
			return nil, ErrNotLive
		}
		o := s.h.opts.RDMANetlink
		o.Keep = s.h.Keep
		if o.ProcessResources {
			o.ProcessName = processNamer(s.h.fs.Proc)
		}
		return rdmanl.Read(ctx, s.h.opts.Kernel, o), nil
	})
}

// processNamer names the processes the kernel reports by PID from
// PID/comm below the proc root, one bounded read each. The kernel gives
// PIDs in rdma_doctor's own PID namespace, so a proc root of another
// namespace (a container's --path.procfs=/host/proc without hostPID)
// would put other processes' names on them: there, when the proc root's
// "self" is not this process's PID, it names none, and their objects
// count as unnamed.
func processNamer(proc hostfs.FS) func(pid uint32) (string, bool) {
	self, err := proc.ReadLink("self")
	if err != nil || self != strconv.Itoa(os.Getpid()) {
		return func(uint32) (string, bool) { return "", false }
	}
	return func(pid uint32) (string, bool) {
		b, err := proc.ReadFile(strconv.FormatUint(uint64(pid), 10) + "/comm")
		if err != nil {
			// The process exited between the dump and the read.
			return "", false
		}
		n := rdmanl.CleanComm(b)
		return n, n != ""
	}
}

// RoCE is the lossless configuration of the RoCE netdevs (live: the PFC
// counters of the DCB reply change between scrapes): ECN per priority,
// the CNP priority and the default RoCE ToS from the tree, and PFC, ETS,
// the DCB app table and global pause from the running kernel when
// Options.Kernel is set and the kernel has the netdev.
func (s *Snapshot) RoCE(ctx context.Context) (*roce.Snapshot, error) {
	return s.roce.get(func() (*roce.Snapshot, error) {
		nds, err := s.Netdevs(ctx)
		if nds == nil {
			return nil, err
		}
		opts := roce.Options{Ifindexes: &s.h.ifindexes}
		if s.h.opts.Kernel != nil {
			opts.Conn, opts.Pause = s.h.opts.Kernel, roce.EthtoolPause
		}
		return roce.Read(ctx, s.h.fs.Sys, nds.Netdevs, opts), nil
	})
}

// NeedRoCE judges a RoCE reading.
var NeedRoCE = cannotRead[roce.Snapshot]("roce", "the RoCE lossless state")
