// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"sync"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/routes"
	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hwmon"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/opensm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/portwatch"
	"github.com/rdma-doctor/rdma_doctor/internal/read/roce"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// Host is the host as the checks (and remediate's plans) read it: one
// method per source, named after the host.Snapshot accessor behind it,
// each the typed snapshot of the package that reads it. A nil value comes
// with the error that says why (the class may also come with a whole-read
// error, such as a deadline, next to what was read).
//
// One Host is one moment: every call returns the same reading, so a check
// judges what its Reads gate saw. Reader.Read gives one over a
// host.Snapshot; tests give fixed readings.
type Host interface {
	// Class is /sys/class/infiniband (infiniband.ErrNoClass: no RDMA core).
	Class() (*infiniband.Class, error)
	// Placement is the PCI function and the IRQs of every RDMA device and
	// whether irqbalance runs; its Errors hold the partial failures
	// (/proc/interrupts or /proc/irq unreadable).
	Placement() (*irq.Snapshot, error)
	// Topology is the host's NUMA nodes and online CPUs.
	Topology() *pci.Topology
	// Tuning is hugepages, sysctls, governors, memlock limits, modules.
	Tuning() (*tuning.Snapshot, error)
	// Netdevs are the IPoIB and RoCE netdevs of the RDMA ports.
	Netdevs() (*netdev.Snapshot, error)
	// OpenSM is the local OpenSM (processes, configuration, log).
	OpenSM() (*opensm.State, error)
	// GPUs are the GPUs and their PCI relation to the RDMA devices.
	GPUs() (*gpu.Snapshot, error)
	// RoCE is the lossless configuration of the RoCE netdevs.
	RoCE() (*roce.Snapshot, error)
	// Devlink is the running kernel's devlink view of the RDMA devices
	// (host.ErrNotLive on a fixture tree).
	Devlink() (*host.Devlink, error)
	// Temperatures are the RDMA devices' temperature sensors.
	Temperatures() (*hwmon.Snapshot, error)
	// Bus is the Mellanox/NVIDIA network functions of the PCI bus and
	// their drivers, which tell why a device is missing; a partial read
	// comes with its error.
	Bus() ([]pci.BusFunction, error)
	// PortHistory is what the server's port state sampler saw of every
	// port; watched is false where none runs (the CLI).
	PortHistory() (h []portwatch.History, watched bool)
	// KernelLog is what the server's kernel log reader saw, mapped to the
	// RDMA devices; watched is false where none runs (the CLI).
	KernelLog() (l *host.KernelLog, watched bool)
	// WasActive reports whether a port was ACTIVE at any read since
	// rdma_doctor started: such a port must stay up.
	WasActive(device string, port int) bool
	// SM is the latest sminfo round (the host's background source; one
	// round per sample where no loop runs, the CLI); nil where sminfo is
	// not run (--no-collector.sm).
	SM() *sm.Status
	// FabricSweep is the fabric counter sweep's state (the server's
	// background source); nil where no sweep runs (the CLI,
	// --no-collector.fabric or its counters off).
	FabricSweep() *fabric.SweepStatus
	// ModulesAsked is whether the netdev read asks for the transceiver
	// memory (--collector.netdev.module-eeprom): without it every
	// netdev's Module is nil by design, not unreadable.
	ModulesAsked() bool
}

// hostView is the Host of a host.Snapshot, which pins every reading it
// hands out (live, slow and background sources alike), so every call
// returns the same reading. ctx bounds the reads: Reader.Read reads every
// source before it returns, so none runs after the sample's deadline.
type hostView struct {
	ctx context.Context
	hs  *host.Snapshot
	// walkBus is set by readAll for a host short of devices: only then
	// is the PCI bus read (Bus), so a check asking for it on a host with
	// all its devices gets nil and no error, and walks nothing.
	walkBus bool
}

func newHostView(ctx context.Context, hs *host.Snapshot) *hostView {
	return &hostView{ctx: ctx, hs: hs}
}

// readAll reads every source now: the slow ones (process scans) in the
// background next to the class read, sminfo (a CLI's round) and beside,
// which reads what the server adds. Only a host short of devices (fewer
// than expected, or none) walks the PCI bus: an SR-IOV host has hundreds
// of functions.
func (v *hostView) readAll(expectedDevices int, beside func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = v.Placement()
		v.Topology()
		_, _ = v.GPUs()
		_, _ = v.Temperatures()
	})
	wg.Go(func() {
		_, _ = v.Tuning()
		_, _ = v.Netdevs()
		_, _ = v.RoCE()
		_, _ = v.OpenSM()
	})
	v.PortHistory()
	class, _ := v.Class()
	v.KernelLog()
	_, _ = v.Devlink()
	if have := deviceCount(class); have == 0 || have < expectedDevices {
		v.walkBus = true
		_, _ = v.Bus()
	}
	v.SM()
	v.FabricSweep()
	v.FabricRoutes()
	beside()
	wg.Wait()
}

func (v *hostView) Class() (*infiniband.Class, error) {
	return v.hs.Class(v.ctx)
}

func (v *hostView) Placement() (*irq.Snapshot, error) {
	return v.hs.Placement(v.ctx)
}

func (v *hostView) Topology() *pci.Topology {
	return v.hs.Topology(v.ctx)
}

func (v *hostView) Tuning() (*tuning.Snapshot, error) {
	return v.hs.Tuning(v.ctx)
}

func (v *hostView) Netdevs() (*netdev.Snapshot, error) {
	return v.hs.Netdevs(v.ctx)
}

func (v *hostView) OpenSM() (*opensm.State, error) {
	return v.hs.OpenSM(v.ctx)
}

func (v *hostView) GPUs() (*gpu.Snapshot, error) {
	return v.hs.GPUs(v.ctx)
}

func (v *hostView) RoCE() (*roce.Snapshot, error) {
	return v.hs.RoCE(v.ctx)
}

func (v *hostView) Devlink() (*host.Devlink, error) {
	return v.hs.Devlink(v.ctx)
}

func (v *hostView) Temperatures() (*hwmon.Snapshot, error) {
	return v.hs.Temperatures(v.ctx)
}

func (v *hostView) Bus() ([]pci.BusFunction, error) {
	if !v.walkBus {
		return nil, nil
	}
	return v.hs.Bus()
}

func (v *hostView) PortHistory() ([]portwatch.History, bool) {
	return v.hs.PortHistory()
}

func (v *hostView) KernelLog() (*host.KernelLog, bool) {
	return v.hs.KernelLog(v.ctx)
}

func (v *hostView) SM() *sm.Status {
	return v.hs.SMStatus(v.ctx)
}

func (v *hostView) FabricSweep() *fabric.SweepStatus {
	return v.hs.FabricSweep(v.ctx)
}

// FabricRoutes is the forwarding-table reader's state (routesHost); nil
// where none runs.
func (v *hostView) FabricRoutes() *routes.Status {
	return v.hs.FabricRoutes(v.ctx)
}

func (v *hostView) WasActive(device string, port int) bool {
	return v.hs.Host().WasActive(device, port)
}

func (v *hostView) ModulesAsked() bool {
	et := v.hs.Host().Options().Ethtool
	return et != nil && et.ModuleEEPROM
}

// deviceCount is the number of RDMA devices of a class (0 without one).
func deviceCount(c *infiniband.Class) int {
	if c == nil {
		return 0
	}
	return len(c.Devices)
}
