// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package roce reads the lossless configuration of each RoCE netdev: ECN
// per priority and the CNP priority (/sys/class/net/<if>/ecn, present on
// MLNX_OFED and DOCA kernels), the default RoCE ToS (the rdma_cm configfs
// tree), and, from the running kernel only, PFC, ETS and the DCB
// application table (DCB netlink, internal/read/rdmanl) and the global pause
// setting (ETHTOOL_GPAUSEPARAM). The sysfs and configfs parts come from
// the host tree, so a fixture host has them; the kernel parts exist only
// for netdevs the running kernel has under the same name and ifindex, so
// a fixture host never has them.
package roce

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/safchain/ethtool"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing; a missing value is never zero.
type Opt[T any] = sysattr.Opt[T]

// Priorities is the number of IEEE 802.1p priorities.
const Priorities = 8

// ECN points, the directories below /sys/class/net/<if>/ecn.
const (
	// PointNP is the notification point (the receiver: sends CNPs on
	// ECN-marked packets).
	PointNP = "roce_np"
	// PointRP is the reaction point (the sender: slows down on CNPs).
	PointRP = "roce_rp"
)

// Points are the ECN points in the order they are reported.
var Points = []string{PointNP, PointRP}

// Pause is the global (802.3x) flow control setting.
type Pause struct {
	Autoneg, RX, TX bool
}

// Netdev is the lossless state of one RoCE netdev.
type Netdev struct {
	Name   string
	Device string
	Port   int
	// ECN is enable/<p> of each point; a point is absent from the map
	// when its directory is (an upstream kernel).
	ECN map[string][Priorities]Opt[bool]
	// CNPPriority and CNPDSCP are the notification point's
	// cnp_802p_prio and cnp_dscp (cnpFile says where).
	CNPPriority, CNPDSCP Opt[uint64]
	// DefaultToS is the rdma_cm default_roce_tos of the port; absent when
	// the configfs directory was not created (mkdir) or configfs is not
	// mounted: then RDMA-CM uses ToS 0.
	DefaultToS Opt[uint64]
	// Live is set when the running kernel has this netdev; DCB and Pause
	// were asked only then, with their outcomes in DCBStatus and
	// PauseStatus.
	Live        bool
	DCB         *rdmanl.DCB
	DCBStatus   rdmanl.Status
	Pause       *Pause
	PauseStatus rdmanl.Status
}

// Snapshot is the lossless state of every RoCE netdev.
type Snapshot struct {
	Netdevs []Netdev
	// Errors are unreadable or malformed files and failed kernel queries
	// (StatusError only).
	Errors []error
}

// Options control Read.
type Options struct {
	// Conn asks the running kernel for DCB; nil asks nothing.
	Conn rdmanl.Conn
	// Pause reads a netdev's global pause setting; nil asks nothing.
	Pause func(netdev string) (Pause, error)
	// Interfaces lists the kernel's interfaces by name and ifindex; nil
	// looks each RoCE netdev up with an ioctl on Ifindexes's socket.
	Interfaces func() (map[string]int, error)
	// Ifindexes is the kept socket of those lookups (the host's, shared
	// with the netdev reader); nil opens one for this read.
	Ifindexes *netdev.Ifindexes
}

// EthtoolPause reads ETHTOOL_GPAUSEPARAM, allowed to any user.
func EthtoolPause(name string) (Pause, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return Pause{}, fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	p, err := e.GetPause(name)
	if err != nil {
		return Pause{}, fmt.Errorf("ethtool %s: pause: %w", name, err)
	}
	return Pause{Autoneg: p.Autoneg != 0, RX: p.RxPause != 0, TX: p.TxPause != 0}, nil
}

// kernelIndexes is the running kernel's ifindex of each RoCE netdev of
// nds that it has: one ioctl each (netdev.KernelIfindex), not a netlink
// dump of every interface.
func kernelIndexes(ix *netdev.Ifindexes, nds []netdev.Netdev) (map[string]int, error) {
	k, release, err := ix.Lookup()
	defer release()
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for i := range nds {
		if nds[i].Kind != netdev.KindRoCE {
			continue
		}
		if idx, ok := k.Index(nds[i].Name); ok {
			m[nds[i].Name] = idx
		}
	}
	return m, nil
}

type reader struct {
	sys  hostfs.FS
	errs []error
}

// value reads one integer attribute; a missing file is absent, not an
// error (the attributes are MLNX_OFED's or created on demand).
func (r *reader) value(p string) Opt[uint64] {
	b, err := r.sys.ReadFile(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.errs = append(r.errs, err)
		}
		return Opt[uint64]{}
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		r.errs = append(r.errs, &sysattr.ParseError{Path: "/sys/" + p, Err: err})
		return Opt[uint64]{}
	}
	return sysattr.Some(v)
}

// cnp reads a notification point parameter. MLNX_OFED's mlx5 driver
// creates cnp_dscp, cnp_802p_prio and min_time_between_cnps in the
// roce_np directory itself (en_sysfs.c, mlx5e_fill_np_attributes on the
// protocol kobject; NVIDIA's sysinfo-snapshot and recorded hosts read
// ecn/roce_np/cnp_dscp); NVIDIA's ECN page writes ecn/<point>/params/,
// so that directory is the fallback.
func (r *reader) cnp(dir, name string) Opt[uint64] {
	if v := r.value(dir + PointNP + "/" + name); v.OK {
		return v
	}
	return r.value(dir + PointNP + "/params/" + name)
}

// Read reads the RoCE netdevs of nds (those mapped to an RDMA port).
func Read(ctx context.Context, sys hostfs.FS, nds []netdev.Netdev, opts Options) *Snapshot {
	s := &Snapshot{}
	r := &reader{sys: sys}
	var kernel map[string]int
	if opts.Conn != nil || opts.Pause != nil {
		list := opts.Interfaces
		if list == nil {
			list = func() (map[string]int, error) { return kernelIndexes(opts.Ifindexes, nds) }
		}
		var err error
		if kernel, err = list(); err != nil {
			r.errs = append(r.errs, fmt.Errorf("list interfaces: %w", err))
		}
	}
	for i := range nds {
		nd := &nds[i]
		if nd.Kind != netdev.KindRoCE || nd.Device == "" || ctx.Err() != nil {
			continue
		}
		n := Netdev{Name: nd.Name, Device: nd.Device, Port: nd.Port}
		dir := "class/net/" + nd.Name + "/ecn/"
		for _, pt := range Points {
			if _, err := sys.ReadDir(dir + pt + "/enable"); err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					r.errs = append(r.errs, err)
				}
				continue
			}
			var en [Priorities]Opt[bool]
			for p := range Priorities {
				if v := r.value(fmt.Sprintf("%s%s/enable/%d", dir, pt, p)); v.OK {
					en[p] = sysattr.Some(v.V != 0)
				}
			}
			if n.ECN == nil {
				n.ECN = map[string][Priorities]Opt[bool]{}
			}
			n.ECN[pt] = en
		}
		n.CNPPriority = r.cnp(dir, "cnp_802p_prio")
		n.CNPDSCP = r.cnp(dir, "cnp_dscp")
		n.DefaultToS = r.value(fmt.Sprintf("kernel/config/rdma_cm/%s/ports/%d/default_roce_tos", nd.Device, nd.Port))

		if idx, ok := kernel[nd.Name]; ok && nd.IfIndex.OK && uint64(idx) == nd.IfIndex.V {
			n.Live = true
			if opts.Conn != nil {
				d, err := rdmanl.ReadDCB(ctx, opts.Conn, nd.Name)
				n.DCB, n.DCBStatus = d, rdmanl.Classify(err)
				if n.DCBStatus == rdmanl.StatusError {
					r.errs = append(r.errs, err)
				}
			}
			if opts.Pause != nil {
				p, err := opts.Pause(nd.Name)
				n.PauseStatus = rdmanl.Classify(err)
				if err == nil {
					n.Pause = &p
				} else if n.PauseStatus == rdmanl.StatusError {
					r.errs = append(r.errs, err)
				}
			}
		}
		s.Netdevs = append(s.Netdevs, n)
	}
	s.Errors = r.errs
	return s
}

// ToSPriority is the priority a RoCE ToS byte lands on under trust dscp
// with the default DSCP map (priority = DSCP >> 3, the mapping mlnx_qos
// prints when none was set): ToS 106 is DSCP 26, priority 3.
func ToSPriority(tos uint64) uint8 { return uint8(tos>>2) >> 3 }

// PrioStat splits an ethtool statistic that names a direction and a
// priority (mlx5: rx_prio3_pause, tx_prio0_pause_duration,
// rx_prio5_discards): direction, priority and the rest of the name.
func PrioStat(name string) (direction string, prio int, rest string, ok bool) {
	dir, tail, found := strings.Cut(name, "_prio")
	if !found || (dir != "rx" && dir != "tx") || len(tail) < 2 || tail[0] < '0' || tail[0] > '7' || tail[1] != '_' {
		return "", 0, "", false
	}
	return dir, int(tail[0] - '0'), tail[2:], true
}
