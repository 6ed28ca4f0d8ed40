// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"sync"

	"github.com/rdma-doctor/rdma_doctor/internal/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/fabric/routes"
	"github.com/rdma-doctor/rdma_doctor/internal/gpu"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/hwmon"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/opensm"
	"github.com/rdma-doctor/rdma_doctor/internal/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/portwatch"
	"github.com/rdma-doctor/rdma_doctor/internal/roce"
	"github.com/rdma-doctor/rdma_doctor/internal/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/tuning"
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

// hostView is the Host of a host.Snapshot: each source is read through
// it on first use, and the slow ones kept, so every call returns the same
// reading (the host's slow sources come from a cache that may refresh
// between two calls; its live ones are read once per host.Snapshot). ctx bounds the reads: Reader.Read reads every source before it
// returns, so none runs after the sample's deadline.
type hostView struct {
	ctx context.Context
	hs  *host.Snapshot

	// The slow sources, which the host's cache may refresh between two
	// calls. The class, netdevs, RoCE and devlink need no copy here:
	// host.Snapshot reads each once and returns that reading after.
	placement    kept[*irq.Snapshot]
	topology     kept[*pci.Topology]
	tuning       kept[*tuning.Snapshot]
	openSM       kept[*opensm.State]
	gpus         kept[*gpu.Snapshot]
	temperatures kept[*hwmon.Snapshot]
	// bus is kept for readAll's "not read" (nil, no error).
	bus       kept[[]pci.BusFunction]
	ports     kept[watched[[]portwatch.History]]
	kernelLog kept[watched[*host.KernelLog]]
	// The background sources, whose loops may publish between two calls
	// (and sminfo's round, where none runs, is the sample's).
	sm    kept[*sm.Status]
	sweep kept[*fabric.SweepStatus]
	// routes: the forwarding-table reader's state (fabric_routing.go).
	routes kept[*routes.Status]
}

func newHostView(ctx context.Context, hs *host.Snapshot) *hostView {
	return &hostView{ctx: ctx, hs: hs}
}

// kept is one source's reading, read once.
type kept[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (k *kept[T]) get(read func() (T, error)) (T, error) {
	k.once.Do(func() { k.v, k.err = read() })
	return k.v, k.err
}

// of is get of a host.Snapshot accessor, read under ctx.
func (k *kept[T]) of(ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	return k.get(func() (T, error) { return read(ctx) })
}

// watched is the reading of a server-side watcher and whether one runs.
type watched[T any] struct {
	v  T
	ok bool
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
		_, _ = v.Bus()
	} else {
		// Not short: the bus stays unread (nil, no error), and a check
		// asking for it later must not walk it either.
		_, _ = v.bus.get(func() ([]pci.BusFunction, error) { return nil, nil })
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
	return v.placement.of(v.ctx, v.hs.Placement)
}

func (v *hostView) Topology() *pci.Topology {
	t, _ := v.topology.get(func() (*pci.Topology, error) { return v.hs.Topology(v.ctx), nil })
	return t
}

func (v *hostView) Tuning() (*tuning.Snapshot, error) {
	return v.tuning.of(v.ctx, v.hs.Tuning)
}

func (v *hostView) Netdevs() (*netdev.Snapshot, error) {
	return v.hs.Netdevs(v.ctx)
}

func (v *hostView) OpenSM() (*opensm.State, error) {
	return v.openSM.of(v.ctx, v.hs.OpenSM)
}

func (v *hostView) GPUs() (*gpu.Snapshot, error) {
	return v.gpus.of(v.ctx, v.hs.GPUs)
}

func (v *hostView) RoCE() (*roce.Snapshot, error) {
	return v.hs.RoCE(v.ctx)
}

func (v *hostView) Devlink() (*host.Devlink, error) {
	return v.hs.Devlink(v.ctx)
}

func (v *hostView) Temperatures() (*hwmon.Snapshot, error) {
	return v.temperatures.of(v.ctx, v.hs.Temperatures)
}

func (v *hostView) Bus() ([]pci.BusFunction, error) {
	return v.bus.get(v.hs.Bus)
}

func (v *hostView) PortHistory() ([]portwatch.History, bool) {
	w, _ := v.ports.get(func() (watched[[]portwatch.History], error) {
		h, ok := v.hs.PortHistory()
		return watched[[]portwatch.History]{h, ok}, nil
	})
	return w.v, w.ok
}

func (v *hostView) KernelLog() (*host.KernelLog, bool) {
	w, _ := v.kernelLog.get(func() (watched[*host.KernelLog], error) {
		l, ok := v.hs.KernelLog(v.ctx)
		return watched[*host.KernelLog]{l, ok}, nil
	})
	return w.v, w.ok
}

func (v *hostView) SM() *sm.Status {
	st, _ := v.sm.get(func() (*sm.Status, error) { return v.hs.SMStatus(v.ctx), nil })
	return st
}

func (v *hostView) FabricSweep() *fabric.SweepStatus {
	st, _ := v.sweep.get(func() (*fabric.SweepStatus, error) { return v.hs.FabricSweep(v.ctx), nil })
	return st
}

// FabricRoutes is the forwarding-table reader's state (routesHost); nil
// where none runs.
func (v *hostView) FabricRoutes() *routes.Status {
	st, _ := v.routes.get(func() (*routes.Status, error) { return v.hs.FabricRoutes(v.ctx), nil })
	return st
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
