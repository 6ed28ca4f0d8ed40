// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/devlink"
	"github.com/rdma-doctor/rdma_doctor/internal/fabric"
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

// Source is a data source a check reads.
type Source string

// Data sources. Each names the package that reads it; a source whose
// package does not exist yet has its checks registered as pending.
const (
	// SourceInfiniband: internal/infiniband.Read (/sys/class/infiniband).
	SourceInfiniband Source = "infiniband"
	// SourceHistory: two or more counter samples (delta checks).
	SourceHistory Source = "history"
	// SourcePCI: internal/pci through internal/irq.Read (numa_node,
	// local_cpulist, PCIe link) and pci.ReadTopology.
	SourcePCI Source = "pci"
	// SourceIRQ: internal/irq.Read (/proc/interrupts, affinities,
	// irqbalance).
	SourceIRQ Source = "irq"
	// SourceSM: internal/sm (sminfo results of a Runner).
	SourceSM Source = "sm"
	// SourceOpenSM: internal/opensm.Read (a local opensm process, its
	// configuration; secrets are never kept).
	SourceOpenSM Source = "opensm"
	// SourceProbe: the server's scheduled verbs probe (ProbeResults, from
	// bench/probe's results store).
	SourceProbe Source = "probe"
	// SourceTuning: internal/tuning.Read (hugepages, sysctls, governors,
	// memlock limits, modules, kernel release).
	SourceTuning Source = "tuning"
	// SourceNetdev: internal/netdev.Read (IPoIB mode/MTU/operstate/IPv6,
	// RoCE GID types), without ethtool: the checks judge the rootfs only.
	SourceNetdev Source = "netdev"
	// SourcePortWatch: internal/portwatch, the server's port state
	// sampler (transitions between two samples).
	SourcePortWatch Source = "portwatch"
	// SourceKmsg: internal/kmsg through host.Snapshot.KernelLog, the
	// server's kernel log reader.
	SourceKmsg Source = "kmsg"
	// SourceGPU: internal/gpu.Read (the GPUs of the PCI bus, their PCI
	// relation to the RDMA devices, GPUDirect RDMA prerequisites).
	SourceGPU Source = "gpu"
	// SourceDevlink: internal/devlink through host.Snapshot.Devlink (the
	// running kernel's health reporters and firmware versions).
	SourceDevlink Source = "devlink"
	// SourceRoCE: internal/roce.Read (ECN, CNP priority and default ToS
	// from the tree; PFC, trust and global pause from the live kernel).
	SourceRoCE Source = "roce"
	// SourceHwmon: internal/hwmon through host.Snapshot.Temperatures (the
	// RDMA devices' temperature sensors, on the slow interval).
	SourceHwmon Source = "hwmon"
	// SourceModule: the transceiver memory of the RoCE netdevs
	// (internal/sff through netdev.Netdev.Module), read only with
	// --collector.netdev.module-eeprom.
	SourceModule Source = "module"
	// SourceFabric: internal/fabric's counter sweep (the fabric
	// collector's Sweeper in rdma_doctor serve, on the host that scans
	// the fabric); the checks never send MADs of their own.
	SourceFabric Source = "fabric"
)

// Snapshot is one reading of the host: the typed snapshots of every
// reader. A nil field means "not read" and its error says why.
type Snapshot struct {
	Time     time.Time
	Hostname string
	// IB is /sys/class/infiniband; IBErr is why it is nil (or, with a
	// non-nil IB, a whole-read error such as a deadline).
	IB    *infiniband.Class
	IBErr error
	// Placement is the PCI function and the IRQs of every RDMA device and
	// whether irqbalance runs (internal/irq.Read); PlacementErr is why it
	// is nil. Its Errors hold the partial failures (/proc/interrupts or
	// /proc/irq unreadable).
	Placement    *irq.Snapshot
	PlacementErr error
	// Topology is the host's NUMA nodes and online CPUs.
	Topology *pci.Topology
	// SM is the latest sminfo round; nil when no runner was given.
	SM *sm.Status
	// Probe is the latest verbs probe result per peer, test and port.
	Probe []ProbeSeries
	// OpenSM is the local OpenSM; OpenSMErr why it is nil.
	OpenSM    *opensm.State
	OpenSMErr error
	// Tuning and Netdev are the host tuning and netdev snapshots; their
	// errors say why they are nil.
	Tuning    *tuning.Snapshot
	TuningErr error
	Netdev    *netdev.Snapshot
	NetdevErr error
	// WasActive reports whether a port was ACTIVE at any sample since
	// rdma_doctor started (nil: unknown, as in tests); such a port must
	// stay up.
	WasActive func(device string, port int) bool
	// Bus is the Mellanox/NVIDIA network functions of the PCI bus with
	// their drivers, which tell dev.present why a device is missing;
	// BusErr is a partial or failed read.
	Bus    []pci.BusFunction
	BusErr error
	// PortHistory is what the server's port state sampler saw of every
	// port; PortsWatched is false where none runs (the CLI).
	PortHistory  []portwatch.History
	PortsWatched bool
	// KernelLog is what the server's kernel log reader saw, mapped to the
	// RDMA devices; KernelLogWatched is false where none runs (the CLI).
	KernelLog        *host.KernelLog
	KernelLogWatched bool
	// GPU is the GPUs and their relation to the RDMA devices; GPUErr is
	// why it is nil.
	GPU    *gpu.Snapshot
	GPUErr error
	// RoCE is the lossless configuration of the RoCE netdevs; RoCEErr is
	// why it is nil.
	RoCE    *roce.Snapshot
	RoCEErr error
	// Devlink is the devlink view of the RDMA devices; DevlinkErr is why
	// it is nil (host.ErrNotLive on a fixture tree).
	Devlink    *host.Devlink
	DevlinkErr error
	// Hwmon is the temperature sensors of the RDMA devices; HwmonErr is
	// why it is nil.
	Hwmon    *hwmon.Snapshot
	HwmonErr error
	// ModulesAsked is whether the netdev read asks for the transceiver
	// memory (--collector.netdev.module-eeprom): without it every
	// Netdev.Module is nil by design, not unreadable.
	ModulesAsked bool
	// Fabric is the fabric collector's counter sweep state; nil where no
	// sweeper runs (the CLI, --no-collector.fabric or its counters off).
	Fabric *fabric.SweepStatus
	// ExpectedTopology is diagnose.fabric_topology, read once by the
	// Evaluator (NewEvaluator) and set on the snapshots it evaluates;
	// ExpectedTopologyFile is its path. nil: no file configured.
	ExpectedTopology     *fabric.Topology
	ExpectedTopologyFile string
}

// deviceCount is the number of RDMA devices read (0 without a class).
func (s *Snapshot) deviceCount() int {
	if s.IB == nil {
		return 0
	}
	return len(s.IB.Devices)
}

// unavailable says why a source cannot be used, or "".
func (s *Snapshot) unavailable(src Source) string {
	switch src {
	case SourceInfiniband:
		if s.IB == nil {
			if errors.Is(s.IBErr, infiniband.ErrNoClass) {
				return "no RDMA devices: " + s.IBErr.Error()
			}
			if s.IBErr != nil {
				return "cannot read /sys/class/infiniband: " + s.IBErr.Error()
			}
			return "/sys/class/infiniband was not read"
		}
	case SourcePCI:
		if s.Placement == nil {
			return placementReason(s.PlacementErr)
		}
	case SourceIRQ:
		if s.Placement == nil {
			return placementReason(s.PlacementErr)
		}
		if s.Placement.Interrupts == nil {
			return "cannot read /proc/interrupts: " + errorsText(s.Placement.Errors)
		}
	case SourceSM:
		if s.SM == nil {
			return "sminfo is not run: the sm collector is disabled (--no-collector.sm) or absent"
		}
		if s.SM.TargetsErr != nil {
			return "sminfo cannot run: " + s.SM.TargetsErr.Error()
		}
		if s.SM.Rounds == 0 {
			return "sminfo has not completed a run yet"
		}
	case SourceOpenSM:
		if s.OpenSM == nil {
			return "cannot read the local OpenSM state: " + errText(s.OpenSMErr)
		}
	case SourceTuning:
		if s.Tuning == nil {
			return "cannot read the host tuning state: " + errText(s.TuningErr)
		}
	case SourceNetdev:
		if s.Netdev == nil {
			return "cannot read the netdevs: " + errText(s.NetdevErr)
		}
	case SourcePortWatch:
		if !s.PortsWatched {
			return "needs the port state sampler of rdma_doctor serve (a single read cannot see a link go down and up); " +
				"it is off with --no-collector.portwatch"
		}
	case SourceKmsg:
		if !s.KernelLogWatched {
			return "needs the kernel log reader of rdma_doctor serve (events are counted from when it starts); " +
				"it is off with --no-collector.kmsg"
		}
		if !s.KernelLog.Status.Reading {
			return "cannot read the kernel log (" + s.KernelLog.Status.Reason + "): " + errText(s.KernelLog.Status.Err) +
				"; reading /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1"
		}
	case SourceRoCE:
		if s.RoCE == nil {
			return "cannot read the RoCE lossless state: " + errText(s.RoCEErr)
		}
	case SourceDevlink:
		if s.Devlink == nil {
			if errors.Is(s.DevlinkErr, host.ErrNotLive) {
				return "devlink is asked only of the running kernel (this tree is not the live /sys) and only with the devlink collector on"
			}
			return "cannot read devlink: " + errText(s.DevlinkErr)
		}
		if s.Devlink.Health != nil && s.Devlink.Health.Outcomes[devlink.QueryHealth][devlink.StatusNoDevlink] > 0 {
			return "this kernel has no devlink family (CONFIG_NET_DEVLINK)"
		}
	case SourceHwmon:
		if s.Hwmon == nil {
			return "cannot read the temperature sensors: " + errText(s.HwmonErr)
		}
	case SourceModule:
		if !s.ModulesAsked {
			return "the transceiver memory is read only with --collector.netdev.module-eeprom (each page is a firmware " +
				"access; it needs CAP_NET_ADMIN)"
		}
	case SourceGPU:
		if s.GPU == nil {
			return "cannot read the GPUs: " + errText(s.GPUErr)
		}
	case SourceFabric:
		if s.Fabric == nil {
			return "the fabric checks read the fabric collector's counter sweep: they run in rdma_doctor serve on the host " +
				"that scans the fabric, with --collector.fabric on (and not --no-collector.fabric.counters)"
		}
		if s.Fabric.Last == nil {
			return "no fabric counter sweep has completed yet (the first starts after the first iblinkinfo scan)"
		}
	case SourceProbe:
		// The probe checks say NoProbeResults themselves: an empty store
		// and no store read the same.
	case SourceHistory:
		// Delta checks judge what one sample can tell (a saturated
		// counter) and skip the rest themselves with NeedTwoSamples.
	default:
		return "no collector reads " + string(src) + " data yet"
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return "not read"
	}
	return err.Error()
}

func placementReason(err error) string {
	switch {
	case errors.Is(err, infiniband.ErrNoClass):
		return "no RDMA devices: " + err.Error()
	case err != nil:
		return "cannot read the PCI functions and IRQs of the RDMA devices: " + err.Error()
	}
	return "PCI functions and IRQs were not read"
}

// errorsText joins errors for a reason, at most three of them.
func errorsText(errs []error) string {
	var parts []string
	for i, e := range errs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-3))
			break
		}
		parts = append(parts, e.Error())
	}
	if len(parts) == 0 {
		return "unknown error"
	}
	return strings.Join(parts, "; ")
}

// NeedTwoSamples is the skip reason of a delta check with one sample: the
// same text from the server and the CLI, so their findings agree.
const NeedTwoSamples = "needs two samples to judge increases (one so far): the server samples every diagnose.interval; the CLI needs --interval"

// Reader takes diagnose snapshots of a host from its host snapshots, so
// the checks judge what the collectors export and read nothing twice.
type Reader struct {
	Host *host.Host
	// ReuseClass lets a sample use a class a scrape read up to this long
	// ago instead of reading it again (the server's sampler); 0 reads it.
	ReuseClass time.Duration
	// SM returns the latest sminfo results (an sm.Runner's Status, or a
	// one-off round in the CLI); nil leaves the sm checks skipped.
	SM func(ctx context.Context) *sm.Status
	// Probe is the verbs probe's results; nil (the CLI) has none.
	Probe ProbeResults
	// ExpectedDevices is diagnose.expected_devices: with fewer devices
	// than that (or none), the PCI bus is read to say why (Snapshot.Bus).
	ExpectedDevices int
	// Fabric returns the fabric counter sweeper's state (a
	// fabric.Sweeper's Status); nil leaves the fabric checks skipped.
	Fabric func() *fabric.SweepStatus
}

// Read takes a snapshot. It never fails as a whole: each source's error
// is kept next to it and turns the checks that need it into skips.
func (r *Reader) Read(ctx context.Context) *Snapshot {
	return FromHost(ctx, r.Host.SnapshotReusing(r.ReuseClass), r)
}

// FromHost reads every source of a host snapshot into a diagnose
// snapshot; r (nil: none) adds sminfo, the probe results and the
// expected device count.
func FromHost(ctx context.Context, hs *host.Snapshot, r *Reader) *Snapshot {
	if r == nil {
		r = &Reader{}
	}
	s := &Snapshot{Time: hs.Time, Hostname: hs.Hostname(ctx), WasActive: hs.Host().WasActive}
	if et := hs.Host().Options().Ethtool; et != nil {
		s.ModulesAsked = et.ModuleEEPROM
	}
	// The sources are independent; the slow ones (process scans) run next
	// to the class read.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.Placement, s.PlacementErr = hs.Placement(ctx)
		s.Topology = hs.Topology(ctx)
		s.GPU, s.GPUErr = hs.GPUs(ctx)
		s.Hwmon, s.HwmonErr = hs.Temperatures(ctx)
	}()
	go func() {
		defer wg.Done()
		s.Tuning, s.TuningErr = hs.Tuning(ctx)
		s.Netdev, s.NetdevErr = hs.Netdevs(ctx)
		s.RoCE, s.RoCEErr = hs.RoCE(ctx)
		s.OpenSM, s.OpenSMErr = hs.OpenSM(ctx)
	}()
	s.PortHistory, s.PortsWatched = hs.PortHistory()
	s.IB, s.IBErr = hs.Class(ctx)
	s.KernelLog, s.KernelLogWatched = hs.KernelLog(ctx)
	s.Devlink, s.DevlinkErr = hs.Devlink(ctx)
	if have := s.deviceCount(); have == 0 || have < r.ExpectedDevices {
		// Only a host short of devices walks the bus: an SR-IOV host has
		// hundreds of functions.
		s.Bus, s.BusErr = hs.Bus()
	}
	if r.SM != nil {
		s.SM = r.SM(ctx)
	}
	if r.Probe != nil {
		s.Probe = r.Probe.ProbeSeries()
	}
	if r.Fabric != nil {
		s.Fabric = r.Fabric()
	}
	wg.Wait()
	return s
}
