// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/gpu"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
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

// fixedHost is a Host of fixed readings, the unit tests' host: a zero
// fixedHost has read nothing.
type fixedHost struct {
	class            *infiniband.Class
	classErr         error
	placement        *irq.Snapshot
	placementErr     error
	topology         *pci.Topology
	tuning           *tuning.Snapshot
	tuningErr        error
	netdevs          *netdev.Snapshot
	netdevsErr       error
	openSM           *opensm.State
	openSMErr        error
	gpus             *gpu.Snapshot
	gpusErr          error
	roce             *roce.Snapshot
	roceErr          error
	devlink          *host.Devlink
	devlinkErr       error
	hwmon            *hwmon.Snapshot
	hwmonErr         error
	bus              []pci.BusFunction
	busErr           error
	ports            []portwatch.History
	portsWatched     bool
	kernelLog        *host.KernelLog
	kernelLogWatched bool
	wasActive        func(device string, port int) bool
	modulesAsked     bool
	sm               *sm.Status
	sweep            *fabric.SweepStatus
}

func (f *fixedHost) Class() (*infiniband.Class, error)        { return f.class, f.classErr }
func (f *fixedHost) Placement() (*irq.Snapshot, error)        { return f.placement, f.placementErr }
func (f *fixedHost) Topology() *pci.Topology                  { return f.topology }
func (f *fixedHost) Tuning() (*tuning.Snapshot, error)        { return f.tuning, f.tuningErr }
func (f *fixedHost) Netdevs() (*netdev.Snapshot, error)       { return f.netdevs, f.netdevsErr }
func (f *fixedHost) OpenSM() (*opensm.State, error)           { return f.openSM, f.openSMErr }
func (f *fixedHost) GPUs() (*gpu.Snapshot, error)             { return f.gpus, f.gpusErr }
func (f *fixedHost) RoCE() (*roce.Snapshot, error)            { return f.roce, f.roceErr }
func (f *fixedHost) Devlink() (*host.Devlink, error)          { return f.devlink, f.devlinkErr }
func (f *fixedHost) Temperatures() (*hwmon.Snapshot, error)   { return f.hwmon, f.hwmonErr }
func (f *fixedHost) Bus() ([]pci.BusFunction, error)          { return f.bus, f.busErr }
func (f *fixedHost) PortHistory() ([]portwatch.History, bool) { return f.ports, f.portsWatched }
func (f *fixedHost) KernelLog() (*host.KernelLog, bool)       { return f.kernelLog, f.kernelLogWatched }
func (f *fixedHost) ModulesAsked() bool                       { return f.modulesAsked }
func (f *fixedHost) SM() *sm.Status                           { return f.sm }
func (f *fixedHost) FabricSweep() *fabric.SweepStatus         { return f.sweep }

func (f *fixedHost) WasActive(device string, port int) bool {
	return f.wasActive != nil && f.wasActive(device, port)
}

// fixed is a snapshot's fixedHost, made on first use, for a test to set
// the readings of a snapshot a helper built.
func fixed(s *Reading) *fixedHost {
	if s.Host == nil {
		s.Host = &fixedHost{}
	}
	return s.Host.(*fixedHost)
}

// TestReadTakesTheSample: Read reads every source of the host before it
// returns, so no check reads after the sample's deadline (the CLI cancels
// it before evaluating), and every call of a source returns the same
// reading (the host's slow sources come from a cache that may refresh).
func TestReadTakesTheSample(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	// numa-remote: devices, IRQs, tuning, netdevs and GPUs to read; no
	// devices are expected beyond those present, so the bus stays unread.
	s := (&Reader{Host: hostOf(filepath.Join(fixtures, "numa-remote"))}).Read(ctx)
	cancel()
	h := s.Host
	for name, read := range map[string]func() (any, error){
		"class":        func() (any, error) { return h.Class() },
		"placement":    func() (any, error) { return h.Placement() },
		"topology":     func() (any, error) { return h.Topology(), nil },
		"tuning":       func() (any, error) { return h.Tuning() },
		"netdevs":      func() (any, error) { return h.Netdevs() },
		"opensm":       func() (any, error) { return h.OpenSM() },
		"gpus":         func() (any, error) { return h.GPUs() },
		"roce":         func() (any, error) { return h.RoCE() },
		"devlink":      func() (any, error) { return h.Devlink() },
		"temperatures": func() (any, error) { return h.Temperatures() },
		"kernel log":   func() (any, error) { l, _ := h.KernelLog(); return l, nil },
	} {
		first, err := read()
		if errors.Is(err, context.Canceled) {
			t.Errorf("%s was read after Read returned: %v", name, err)
		}
		if again, _ := read(); again != first {
			t.Errorf("%s: a second call read again (%p, then %p)", name, first, again)
		}
	}
	if c, err := h.Class(); c == nil || len(c.Devices) == 0 {
		t.Fatalf("numa-remote read no devices: %v", err)
	}
	if bus, err := h.Bus(); bus != nil || err != nil {
		t.Errorf("a host with its devices walked the PCI bus: %v, %v", bus, err)
	}
}

// A reading has sminfo's round where the host runs sminfo: without a
// loop, one round per sample (the CLI), the same result however often a
// check asks; none where it does not (--no-collector.sm), and no fabric
// sweep where no loop runs.
func TestReadSMThroughHost(t *testing.T) {
	ctx := t.Context()
	p, _ := hostfs.Paths{Rootfs: filepath.Join(fixtures, "sm-opensm")}.Resolve()
	now := time.Unix(1_000_000, 0)
	h := host.New(host.Options{Paths: p, SM: &host.SMOptions{SminfoPath: "/nonexistent"}, Fabric: &host.FabricOptions{Counters: true},
		Now: func() time.Time { return now }})
	r := &Reader{Host: h}
	s := r.Read(ctx)
	st := s.smStatus()
	if st == nil || st.Rounds != 1 || s.smStatus() != st {
		t.Fatalf("first sample: %+v, want its own round, kept", st)
	}
	if r := s.unavailable(SourceSM); !strings.Contains(r, "sminfo cannot run") {
		t.Errorf("unavailable(sm) = %q, want why sminfo cannot run (no umad on the fixture)", r)
	}
	now = now.Add(time.Minute)
	if st := r.Read(ctx).smStatus(); st.Rounds != 2 {
		t.Errorf("second sample read round %d, want its own", st.Rounds)
	}
	if sw := s.sweepStatus(); sw != nil {
		t.Errorf("a fabric sweep without a loop: %+v", sw)
	}
	h = host.New(host.Options{Paths: p})
	if st := (&Reader{Host: h}).Read(ctx).smStatus(); st != nil {
		t.Errorf("sminfo read without Options.SM: %+v", st)
	}
}
