// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"maps"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/pci"
)

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

// readClassEntries lists the class directory's kept devices and their
// identities; nil when the directory cannot be read (then nothing is
// compared: the slow read reports the error).
func readClassEntries(sys hostfs.FS, keep func(string) bool) classEntries {
	names, err := infiniband.DeviceNames(sys, keep)
	if err != nil {
		return nil
	}
	out := classEntries{}
	for _, name := range names {
		id, ok, _ := hostfs.IdentityOf(sys, infiniband.ClassDir+"/"+name)
		out[name] = entryID{id, ok}
	}
	return out
}

// readPCI reads the slow PCI source: the class entries first, so that a
// device that changes during the read is seen as changed by the next
// snapshot.
func (h *Host) readPCI(ctx context.Context) (pciRead, error) {
	entries := readClassEntries(h.fs.Sys, h.Keep)
	devs, err := pci.ReadDevices(ctx, h.fs.Sys, h.Keep)
	return pciRead{devs: devs, entries: entries}, err
}

// checkDevices marks the slow PCI and IRQ state stale when the class's
// devices are no longer those it was read for. Once per snapshot.
func (s *Snapshot) checkDevices() {
	s.devCheck.Do(func() {
		if s.h.slowT <= 0 {
			return // read on every snapshot anyway
		}
		last, ok := s.h.pci.peek()
		if !ok || last.entries == nil {
			return
		}
		now := readClassEntries(s.h.fs.Sys, s.h.Keep)
		if now == nil || maps.Equal(now, last.entries) {
			return
		}
		s.h.pci.invalidate()
		s.h.placement.invalidate()
	})
}
