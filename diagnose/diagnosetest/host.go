// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnosetest

import (
	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
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

// Host is a diagnose.Host of fixed readings, the unit tests' host: a zero
// Host has read nothing. Each method returns its fields.
type Host struct {
	ClassValue        *infiniband.Class
	ClassErr          error
	PlacementValue    *irq.Snapshot
	PlacementErr      error
	TopologyValue     *pci.Topology
	TuningValue       *tuning.Snapshot
	TuningErr         error
	NetdevsValue      *netdev.Snapshot
	NetdevsErr        error
	OpenSMValue       *opensm.State
	OpenSMErr         error
	GPUsValue         *gpu.Snapshot
	GPUsErr           error
	RoCEValue         *roce.Snapshot
	RoCEErr           error
	DevlinkValue      *host.Devlink
	DevlinkErr        error
	Hwmon             *hwmon.Snapshot
	HwmonErr          error
	BusValue          []pci.BusFunction
	BusErr            error
	Ports             []portwatch.History
	PortsWatched      bool
	KernelLogValue    *host.KernelLog
	KernelLogWatched  bool
	WasActiveFunc     func(device string, port int) bool
	ModulesAskedValue bool
	SMValue           *sm.Status
	Sweep             *fabric.SweepStatus
}

func (f *Host) Class() (*infiniband.Class, error)        { return f.ClassValue, f.ClassErr }
func (f *Host) Placement() (*irq.Snapshot, error)        { return f.PlacementValue, f.PlacementErr }
func (f *Host) Topology() *pci.Topology                  { return f.TopologyValue }
func (f *Host) Tuning() (*tuning.Snapshot, error)        { return f.TuningValue, f.TuningErr }
func (f *Host) Netdevs() (*netdev.Snapshot, error)       { return f.NetdevsValue, f.NetdevsErr }
func (f *Host) OpenSM() (*opensm.State, error)           { return f.OpenSMValue, f.OpenSMErr }
func (f *Host) GPUs() (*gpu.Snapshot, error)             { return f.GPUsValue, f.GPUsErr }
func (f *Host) RoCE() (*roce.Snapshot, error)            { return f.RoCEValue, f.RoCEErr }
func (f *Host) Devlink() (*host.Devlink, error)          { return f.DevlinkValue, f.DevlinkErr }
func (f *Host) Temperatures() (*hwmon.Snapshot, error)   { return f.Hwmon, f.HwmonErr }
func (f *Host) Bus() ([]pci.BusFunction, error)          { return f.BusValue, f.BusErr }
func (f *Host) PortHistory() ([]portwatch.History, bool) { return f.Ports, f.PortsWatched }
func (f *Host) KernelLog() (*host.KernelLog, bool)       { return f.KernelLogValue, f.KernelLogWatched }
func (f *Host) ModulesAsked() bool                       { return f.ModulesAskedValue }
func (f *Host) SM() *sm.Status                           { return f.SMValue }
func (f *Host) FabricSweep() *fabric.SweepStatus         { return f.Sweep }

func (f *Host) WasActive(device string, port int) bool {
	return f.WasActiveFunc != nil && f.WasActiveFunc(device, port)
}

// Fixed is a snapshot's fixedHost, made on first use, for a test to set
// the readings of a snapshot a helper built.
func Fixed(s *diagnose.Reading) *Host {
	if s.Host == nil {
		s.Host = &Host{}
	}
	return s.Host.(*Host)
}
