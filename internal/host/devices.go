// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"errors"
	"maps"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
)

// The slow sources that follow the class's devices (pciRead).
var (
	pciSource = register(&Source[pciRead]{name: "pci", freshness: SlowFollowingDevices, read: func(ctx context.Context, s *Snapshot) (pciRead, error) {
		return s.readPCI(ctx)
	}})
	placementSource = register(&Source[*irq.Snapshot]{name: "irq", freshness: SlowFollowingDevices, read: func(ctx context.Context, s *Snapshot) (*irq.Snapshot, error) {
		r, err := get(ctx, s, pciSource)
		if err != nil {
			return nil, err
		}
		return irq.ReadWith(ctx, s.h.fs, r.devs)
	}})
)

// PCI is the PCI function of every RDMA device (slow, but read again at
// once when the class's devices change: checkDevices).
func (s *Snapshot) PCI(ctx context.Context) ([]pci.Device, error) {
	r, err := get(ctx, s, pciSource)
	return r.devs, err
}

// Placement is the IRQ placement of every RDMA device (slow, and read
// again with PCI when the class's devices change): its PCI function,
// /proc/interrupts, affinities and irqbalance.
func (s *Snapshot) Placement(ctx context.Context) (*irq.Snapshot, error) {
	return get(ctx, s, placementSource)
}

// NeedPCI and NeedIRQ judge a Placement reading: the PCI functions of
// the devices, and their IRQs (/proc/interrupts may fail alone).
var (
	NeedPCI = &Need[*irq.Snapshot]{name: "pci", why: func(p *irq.Snapshot, err error) string {
		if p == nil {
			return placementReason(err)
		}
		return ""
	}}
	NeedIRQ = &Need[*irq.Snapshot]{name: "irq", why: func(p *irq.Snapshot, err error) string {
		if p == nil {
			return placementReason(err)
		}
		if p.Interrupts == nil {
			return "cannot read /proc/interrupts: " + ErrorsText(p.Errors)
		}
		return ""
	}}
)

func placementReason(err error) string {
	switch {
	case errors.Is(err, infiniband.ErrNoClass):
		return "no RDMA devices: " + err.Error()
	case err != nil:
		return "cannot read the PCI functions and IRQs of the RDMA devices: " + err.Error()
	}
	return "PCI functions and IRQs were not read"
}

// pciRead is the slow PCI source: the devices' PCI functions and the
// class entries they were read for. The PCI functions and IRQ placement
// are cached for SlowRefresh, but the class is read live: a device that
// appears, vanishes or is re-registered (driver reload, firmware reset:
// a new sysfs directory, maybe new IRQ numbers) between two slow reads
// would otherwise have no pci/irq series, stale ones, or ones of the old
// incarnation, while both collectors report success. Each snapshot
// compares the class entries with these (one readdir and a stat per
// device) and reads the slow PCI and IRQ state again when they differ.
type pciRead struct {
	devs    []pci.Device
	entries classEntries
}

// classEntries are the kept devices of the class directory, each with the
// identity of its directory (ok false when it cannot be told: a dangling
// link, an FS without identities).
type classEntries map[string]entryID

type entryID struct {
	id hostfs.Identity
	ok bool
}

// classEntriesOf is the identities of listed devices by name; nil when
// the class directory could not be read (then nothing is compared: the
// slow read reports the error).
func classEntriesOf(list []infiniband.Entry, err error) classEntries {
	if err != nil {
		return nil
	}
	out := make(classEntries, len(list))
	for _, e := range list {
		out[e.Name] = entryID{e.ID, e.HasID}
	}
	return out
}

// readPCI reads the slow PCI source for the snapshot's class listing,
// taken before it, so that a device that changes during the read is seen
// as changed by the next snapshot.
func (s *Snapshot) readPCI(ctx context.Context) (pciRead, error) {
	entries := classEntriesOf(s.devices())
	devs, err := pci.ReadDevices(ctx, s.h.fs.Sys, s.h.Keep)
	return pciRead{devs: devs, entries: entries}, err
}

// checkDevices marks the sources that follow the devices (the slow PCI
// and IRQ state) stale when the class's devices are no longer those the
// PCI source was read for. Once per snapshot, before its first get of
// such a source.
func (s *Snapshot) checkDevices() {
	s.devCheck.Do(func() {
		if s.h.slowT <= 0 {
			return // read on every snapshot anyway
		}
		c, err := cacheOf(s.h, pciSource)
		if err != nil {
			return
		}
		last, ok := c.peek()
		if !ok || last.entries == nil {
			return
		}
		now := classEntriesOf(s.devices())
		if now == nil || maps.Equal(now, last.entries) {
			return
		}
		for src, c := range s.h.caches {
			if src.Freshness() == SlowFollowingDevices {
				c.invalidate()
			}
		}
	})
}
