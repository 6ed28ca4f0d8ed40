// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"sync"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/pci"
)

// memo holds what more than one collector reads in the same collection,
// read once by whichever asks first: the PCI functions of the RDMA devices,
// which the pci and irq collectors both need. Its values are read-only.
type memo struct {
	pciOnce sync.Once
	pciDevs []pci.Device
	pciErr  error
}

type memoKey struct{}

// withMemo starts the memo of one collection.
func withMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &memo{})
}

// pciDevices is pci.ReadDevices, once per collection. Both callers pass the
// same root and device filter (the Env's); outside a collection (a test
// calling Update directly) it just reads.
func pciDevices(ctx context.Context, sys hostfs.FS, keep func(string) bool) ([]pci.Device, error) {
	m, ok := ctx.Value(memoKey{}).(*memo)
	if !ok {
		return pci.ReadDevices(ctx, sys, keep)
	}
	m.pciOnce.Do(func() { m.pciDevs, m.pciErr = pci.ReadDevices(ctx, sys, keep) })
	return m.pciDevs, m.pciErr
}
