// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// nldev resource commands and attributes the library's nl package does
// not name (include/uapi/rdma/rdma_netlink.h, enum rdma_nldev_command and
// enum rdma_nldev_attr: an ABI whose order never changes).
const (
	cmdResQPGet  = 10 // RDMA_NLDEV_CMD_RES_QP_GET
	cmdResCQGet  = 12 // RDMA_NLDEV_CMD_RES_CQ_GET
	cmdResMRGet  = 13 // RDMA_NLDEV_CMD_RES_MR_GET
	cmdResPDGet  = 14 // RDMA_NLDEV_CMD_RES_PD_GET
	cmdResCtxGet = 22 // RDMA_NLDEV_CMD_RES_CTX_GET, Linux 5.14

	attrResQP       = 19 // RDMA_NLDEV_ATTR_RES_QP, nested table
	attrResQPEntry  = 20 // RDMA_NLDEV_ATTR_RES_QP_ENTRY
	attrResLQPN     = 21 // RDMA_NLDEV_ATTR_RES_LQPN, u32
	attrResType     = 26 // RDMA_NLDEV_ATTR_RES_TYPE, u8
	attrResPID      = 28 // RDMA_NLDEV_ATTR_RES_PID, u32
	attrResKernName = 29 // RDMA_NLDEV_ATTR_RES_KERN_NAME, string
	attrResCQ       = 35
	attrResCQEntry  = 36
	attrResMR       = 40
	attrResMREntry  = 41
	attrResPD       = 46
	attrResPDEntry  = 47
	attrResCtx      = 86
	attrResCtxEntry = 87
)

// resKind is one per-object resource dump: the object type as `rdma
// resource show` names it, its command, and the table and entry
// attributes of its reply (nldev.c, fill_entries).
type resKind struct {
	name         string
	cmd          int
	table, entry uint16
}

// resKinds are the dumps that carry an owner per object (fill_res_name_pid):
// qp, cq, mr, pd, ctx. cm_id and srq have owners too but are not asked:
// their totals are in rdma_device_resources and their owners are those of
// the QPs they serve.
func resKinds() []resKind {
	return []resKind{
		{"qp", cmdResQPGet, attrResQP, attrResQPEntry},
		{"cq", cmdResCQGet, attrResCQ, attrResCQEntry},
		{"mr", cmdResMRGet, attrResMR, attrResMREntry},
		{"pd", cmdResPDGet, attrResPD, attrResPDEntry},
		{"ctx", cmdResCtxGet, attrResCtx, attrResCtxEntry},
	}
}

// DefaultMaxProcesses and DefaultMaxObjects are the caps of the
// per-process resource read when Options leave them zero.
const (
	DefaultMaxProcesses = 32
	DefaultMaxObjects   = 65536
)

// OtherProcesses is the process name the objects of the processes past
// the cap are summed under.
const OtherProcesses = "other"

// owner is who created one object: a user process by PID, or a kernel
// module by name (the kernel sends exactly one of the two, or neither
// when the task is gone or not in the reader's PID namespace).
type owner struct {
	pid  uint32
	kern string
}

// ProcessResources is one device's objects of one type by owner: user
// processes by name (/proc/PID/comm, as `rdma resource show` prints
// them), kernel modules as "[kern_name]" (iproute2's notation, so a
// module and a process of the same name stay apart).
type ProcessResources struct {
	Device string
	// Type is qp, cq, mr, pd or ctx.
	Type string
	// Objects counts the objects by owner name; past the device's
	// process cap the rest are under OtherProcesses.
	Objects map[string]uint64
	// Unnamed counts user objects whose process could not be named: the
	// kernel gave no PID (the task exited, or it is not in the reader's
	// PID namespace) or its comm could not be read.
	Unnamed uint64
	// Capped: the device had more processes than the cap.
	Capped bool
	// Truncated: the object cap was reached during or before this dump;
	// the counts are what was read before it.
	Truncated bool
}

// procDump is one (device, type) dump's tallies before names.
type procDump struct {
	dev       Device
	kind      resKind
	owners    map[owner]uint64
	none      uint64
	truncated bool
}

// errObjectCap marks a read stopped at Options.MaxObjects.
var errObjectCap = errors.New("object cap reached")

// budget is what is left of a scrape's object cap.
type budget struct{ left int }

// take counts one object; false once the cap is spent.
func (b *budget) take() bool {
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

// cappedDump runs one RDMA netlink dump request, each message to decode,
// which spends b and says when b ran out (full). A spent budget cancels
// the request, so the kernel stops building the dump, and the answer is
// errObjectCap: the cancel's own error is the cap, not a fault. Without
// it, execErr is the exchange's error and decErr the decoding errors of
// the messages, joined; a budget spent before the request sends nothing.
func cappedDump(ctx context.Context, c Conn, typ uint16, body []byte, b *budget, decode func(msg []byte) (full bool, err error)) (execErr, decErr error) {
	if b.left <= 0 {
		return errObjectCap, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	capped := false
	execErr = c.Exec(ctx, unix.NETLINK_RDMA, typ, unix.NLM_F_DUMP, body, func(msg []byte) bool {
		full, err := decode(msg)
		if err != nil {
			decErr = errors.Join(decErr, err)
		}
		if full {
			capped = true
			cancel()
			return false
		}
		return true
	})
	if capped {
		return errObjectCap, nil
	}
	return execErr, decErr
}

// decodeObjects walks one message of a per-object resource dump: the
// device handle, then the table of entries; each entry's owner goes to f
// until f returns false.
func decodeObjects(msg []byte, table, entry uint16, f func(owner) bool) (dev string, err error) {
	as, err := attrs(msg)
	if err != nil {
		return "", fmt.Errorf("resource objects: %w", err)
	}
	for _, a := range as {
		switch a.typ {
		case attrDevName:
			if dev, err = a.str(); err != nil {
				return "", fmt.Errorf("resource objects: %w", err)
			}
		case table:
			entries, err := attrs(a.data)
			if err != nil {
				return dev, fmt.Errorf("resource objects %s: %w", dev, err)
			}
			for _, e := range entries {
				if e.typ != entry {
					continue
				}
				o, err := decodeOwner(e.data)
				if err != nil {
					return dev, fmt.Errorf("resource objects %s: %w", dev, err)
				}
				if !f(o) {
					return dev, nil
				}
			}
		}
	}
	if dev == "" {
		return "", fmt.Errorf("resource objects reply without device name")
	}
	return dev, nil
}

// decodeOwner reads RES_PID or RES_KERN_NAME from one entry's fields.
func decodeOwner(b []byte) (owner, error) {
	fields, err := attrs(b)
	if err != nil {
		return owner{}, err
	}
	var o owner
	for _, f := range fields {
		switch f.typ {
		case attrResPID:
			if o.pid, err = f.u32(); err != nil {
				return owner{}, err
			}
		case attrResKernName:
			if o.kern, err = f.str(); err != nil {
				return owner{}, err
			}
		}
	}
	return o, nil
}

// readObjects dumps one device's objects of one kind, tallying owners and
// spending b; a spent budget cancels the request, so the kernel stops
// building the dump, and marks the dump truncated.
func readObjects(ctx context.Context, c Conn, d Device, k resKind, b *budget) (procDump, error) {
	pd := procDump{dev: d, kind: k, owners: map[owner]uint64{}}
	body := appendAttr(nil, attrDevIndex, u32Data(d.Index))
	err, decErr := cappedDump(ctx, c, nldevType(k.cmd), body, b, func(msg []byte) (bool, error) {
		full := false
		_, err := decodeObjects(msg, k.table, k.entry, func(o owner) bool {
			if !b.take() {
				full = true
				return false
			}
			if o.pid == 0 && o.kern == "" {
				pd.none++
			} else {
				pd.owners[o]++
			}
			return true
		})
		return full, err
	})
	switch {
	case errors.Is(err, errObjectCap):
		pd.truncated = true
		return pd, errObjectCap
	case err != nil:
		return procDump{}, err
	}
	return pd, decErr
}

// nameDumps names the owners of one device's dumps and applies the
// process cap: the max processes with the most objects of the device
// (all types together) keep their names, the rest are summed into
// OtherProcesses. Kernel owners are modules, a set the host's loaded
// modules bound, and are not capped.
func nameDumps(dumps []procDump, max int, name func(pid uint32) (string, bool)) []ProcessResources {
	names := map[uint32]string{}
	resolve := func(pid uint32) (string, bool) {
		if n, ok := names[pid]; ok {
			return n, n != ""
		}
		n, ok := "", false
		if name != nil {
			n, ok = name(pid)
		}
		if !ok {
			n = ""
		}
		names[pid] = n
		return n, ok
	}
	totals := map[string]uint64{}
	for _, d := range dumps {
		for o, n := range d.owners {
			if o.kern == "" {
				if pn, ok := resolve(o.pid); ok {
					totals[pn] += n
				}
			}
		}
	}
	procs := make([]string, 0, len(totals))
	for p := range totals {
		procs = append(procs, p)
	}
	sort.Slice(procs, func(i, j int) bool {
		if totals[procs[i]] != totals[procs[j]] {
			return totals[procs[i]] > totals[procs[j]]
		}
		return procs[i] < procs[j]
	})
	capped := len(procs) > max
	kept := map[string]bool{}
	for i, p := range procs {
		if i < max {
			kept[p] = true
		}
	}
	out := make([]ProcessResources, 0, len(dumps))
	for _, d := range dumps {
		r := ProcessResources{Device: d.dev.Name, Type: d.kind.name, Objects: map[string]uint64{},
			Unnamed: d.none, Capped: capped, Truncated: d.truncated}
		for o, n := range d.owners {
			switch pn, ok := resolve(o.pid); {
			case o.kern != "":
				r.Objects["["+o.kern+"]"] += n
			case !ok:
				r.Unnamed += n
			case kept[pn]:
				r.Objects[pn] += n
			default:
				r.Objects[OtherProcesses] += n
			}
		}
		out = append(out, r)
	}
	return out
}

// readProcessResources dumps every kept device's objects of every kind.
func (s *Snapshot) readProcessResources(ctx context.Context, c Conn, opts Options, b *budget) {
	max := opts.MaxProcesses
	if max <= 0 {
		max = DefaultMaxProcesses
	}
	for _, d := range s.Devices {
		var dumps []procDump
		for _, k := range resKinds() {
			if ctx.Err() != nil {
				return
			}
			pd, err := readObjects(ctx, c, d, k, b)
			if errors.Is(err, errObjectCap) {
				// A setting reached, not a fault: counted, and
				// rdma_resource_dump_truncated says which.
				s.outcomeStatus(QueryResourceObjects, StatusTruncated, nil)
				dumps = append(dumps, pd)
				continue
			}
			if s.outcome(QueryResourceObjects, err) == StatusOK {
				dumps = append(dumps, pd)
			}
		}
		s.ProcessResources = append(s.ProcessResources, nameDumps(dumps, max, opts.ProcessName)...)
	}
}

// CleanComm is a /proc/PID/comm as a label value: the first line, at most
// TASK_COMM_LEN-1 bytes (what the kernel keeps), every byte that is not
// printable ASCII as '?'. Empty when nothing is left.
func CleanComm(b []byte) string {
	s := string(b)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 15 {
		s = s[:15]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
