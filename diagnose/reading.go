// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// SourceSM: internal/sm through host.Snapshot.SMStatus (sminfo, the
	// host's background source).
	SourceSM Source = "sm"
	// SourceOpenSM: internal/opensm.Read (a local opensm process, its
	// configuration; secrets are never kept).
	SourceOpenSM Source = "opensm"
	// SourceProbe: the server's scheduled verbs probe (ProbeResults, from
	// probe's results store).
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
	// SourceFabric: internal/fabric's counter sweep through
	// host.Snapshot.FabricSweep (the host's background source in
	// rdma_doctor serve, on the host that scans the fabric); the checks
	// never send MADs of their own.
	SourceFabric Source = "fabric"
)

// Reading is one sample of a host as the checks judge it: when it was
// taken, the host's sources read through Host (sminfo and the fabric
// sweep among them), and what the server adds (the verbs probe, the
// expected topology). It copies no source: a new one is a method on Host
// and its read in hostView, a Source, and its reason in unavailable.
type Reading struct {
	Time     time.Time
	Hostname string
	// Host is the host's sources (Reader.Read: a host.Snapshot's); nil
	// reads as nothing read.
	Host Host
	// Probe is the latest verbs probe result per peer, test and port.
	Probe []ProbeSeries
	// ExpectedTopology is diagnose.fabric_topology, read once by the
	// Evaluator (NewEvaluator) and set on the readings it evaluates;
	// ExpectedTopologyFile is its path. nil: no file configured.
	ExpectedTopology     *fabric.Topology
	ExpectedTopologyFile string
	// ExpectedTopologyErr is why the file could not be read.
	ExpectedTopologyErr error
}

// Get reads one source through s.Host; a nil Host has read nothing.
func Get[T any](s *Reading, source func(Host) (T, error)) (T, error) {
	if s.Host == nil {
		var none T
		return none, nil
	}
	return source(s.Host)
}

// value is a source without its error: the checks' shorthand for data
// their Reads gate has found readable (nil where it was not).
func value[T any](s *Reading, source func(Host) (T, error)) T {
	v, _ := Get(s, source)
	return v
}

// IB, Placement, Tuning, Netdev, OpenSM, GPU, RoCE, Devlink and Hwmon are
// the host's sources without their errors (value): for the checks, once
// their Reads gate has found them readable.
func (s *Reading) IB() *infiniband.Class    { return value(s, Host.Class) }
func (s *Reading) Placement() *irq.Snapshot { return value(s, Host.Placement) }
func (s *Reading) Tuning() *tuning.Snapshot { return value(s, Host.Tuning) }
func (s *Reading) Netdev() *netdev.Snapshot { return value(s, Host.Netdevs) }
func (s *Reading) OpenSM() *opensm.State    { return value(s, Host.OpenSM) }
func (s *Reading) GPU() *gpu.Snapshot       { return value(s, Host.GPUs) }
func (s *Reading) RoCE() *roce.Snapshot     { return value(s, Host.RoCE) }
func (s *Reading) Devlink() *host.Devlink   { return value(s, Host.Devlink) }
func (s *Reading) Hwmon() *hwmon.Snapshot   { return value(s, Host.Temperatures) }

// SMStatus is the latest sminfo round; nil where sminfo is not run
// (--no-collector.sm).
func (s *Reading) SMStatus() *sm.Status {
	if s.Host == nil {
		return nil
	}
	return s.Host.SM()
}

// SweepStatus is the fabric counter sweep's state; nil where no sweep
// runs (the CLI, --no-collector.fabric or its counters off).
func (s *Reading) SweepStatus() *fabric.SweepStatus {
	if s.Host == nil {
		return nil
	}
	return s.Host.FabricSweep()
}

// Topology is the host's NUMA nodes and online CPUs; nil where not read.
func (s *Reading) Topology() *pci.Topology {
	if s.Host == nil {
		return nil
	}
	return s.Host.Topology()
}

// PortHistory is what the port state sampler saw; watched is false where
// none runs (the CLI).
func (s *Reading) PortHistory() (h []portwatch.History, watched bool) {
	if s.Host == nil {
		return nil, false
	}
	return s.Host.PortHistory()
}

// KernelLog is what the kernel log reader saw; watched is false where
// none runs (the CLI).
func (s *Reading) KernelLog() (l *host.KernelLog, watched bool) {
	if s.Host == nil {
		return nil, false
	}
	return s.Host.KernelLog()
}

// WasActive reports whether a port was ACTIVE at any sample since
// rdma_doctor started (false when unknown); such a port must stay up.
func (s *Reading) WasActive(device string, port int) bool {
	return s.Host != nil && s.Host.WasActive(device, port)
}

// Unavailable says why a source cannot be used, or "".
func (s *Reading) Unavailable(src Source) string {
	switch src {
	case SourceInfiniband:
		if ib, err := Get(s, Host.Class); ib == nil {
			if errors.Is(err, infiniband.ErrNoClass) {
				return "no RDMA devices: " + err.Error()
			}
			if err != nil {
				return "cannot read /sys/class/infiniband: " + err.Error()
			}
			return "/sys/class/infiniband was not read"
		}
	case SourcePCI:
		if p, err := Get(s, Host.Placement); p == nil {
			return placementReason(err)
		}
	case SourceIRQ:
		p, err := Get(s, Host.Placement)
		if p == nil {
			return placementReason(err)
		}
		if p.Interrupts == nil {
			return "cannot read /proc/interrupts: " + ErrorsText(p.Errors)
		}
	case SourceSM:
		st := s.SMStatus()
		if st == nil {
			return "sminfo is not run: the sm collector is disabled (--no-collector.sm) or absent"
		}
		if st.TargetsErr != nil {
			return "sminfo cannot run: " + st.TargetsErr.Error()
		}
		if st.Rounds == 0 {
			return "sminfo has not completed a run yet"
		}
	case SourceOpenSM:
		if o, err := Get(s, Host.OpenSM); o == nil {
			return "cannot read the local OpenSM state: " + errText(err)
		}
	case SourceTuning:
		if t, err := Get(s, Host.Tuning); t == nil {
			return "cannot read the host tuning state: " + errText(err)
		}
	case SourceNetdev:
		if n, err := Get(s, Host.Netdevs); n == nil {
			return "cannot read the netdevs: " + errText(err)
		}
	case SourcePortWatch:
		if _, watched := s.PortHistory(); !watched {
			return "needs the port state sampler of rdma_doctor serve (a single read cannot see a link go down and up); " +
				"it is off with --no-collector.portwatch"
		}
	case SourceKmsg:
		l, watched := s.KernelLog()
		if !watched {
			return "needs the kernel log reader of rdma_doctor serve (events are counted from when it starts); " +
				"it is off with --no-collector.kmsg"
		}
		if !l.Status.Reading {
			return "cannot read the kernel log (" + l.Status.Reason + "): " + errText(l.Status.Err) +
				"; reading /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1"
		}
	case SourceRoCE:
		if r, err := Get(s, Host.RoCE); r == nil {
			return "cannot read the RoCE lossless state: " + errText(err)
		}
	case SourceDevlink:
		d, err := Get(s, Host.Devlink)
		if d == nil {
			if errors.Is(err, host.ErrNotLive) {
				return "devlink is asked only of the running kernel (this tree is not the live /sys) and only with the devlink collector on"
			}
			return "cannot read devlink: " + errText(err)
		}
		if d.Health != nil && d.Health.Outcomes[devlink.QueryHealth][devlink.StatusNoDevlink] > 0 {
			return "this kernel has no devlink family (CONFIG_NET_DEVLINK)"
		}
	case SourceHwmon:
		if h, err := Get(s, Host.Temperatures); h == nil {
			return "cannot read the temperature sensors: " + errText(err)
		}
	case SourceModule:
		if s.Host == nil || !s.Host.ModulesAsked() {
			return "the transceiver memory is read only with --collector.netdev.module-eeprom (each page is a firmware " +
				"access; it needs CAP_NET_ADMIN)"
		}
	case SourceGPU:
		if g, err := Get(s, Host.GPUs); g == nil {
			return "cannot read the GPUs: " + errText(err)
		}
	case SourceFabric:
		st := s.SweepStatus()
		if st == nil {
			return "the fabric checks read the fabric collector's counter sweep: they run in rdma_doctor serve on the host " +
				"that scans the fabric, with --collector.fabric on (and not --no-collector.fabric.counters)"
		}
		if st.Last == nil {
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

// ErrorsText joins errors for a reason, at most three of them.
func ErrorsText(errs []error) string {
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

// Reader takes readings of a host from its host snapshots, so the checks
// judge what the collectors export and read nothing twice.
type Reader struct {
	Host *host.Host
	// ReuseClass lets a sample use a class a scrape read up to this long
	// ago instead of reading it again (the server's sampler); 0 reads it.
	ReuseClass time.Duration
	// Probe is the verbs probe's results; nil (the CLI) has none.
	Probe ProbeResults
	// ExpectedDevices is diagnose.expected_devices: with fewer devices
	// than that (or none), the PCI bus is read to say why (Host.Bus).
	ExpectedDevices int
}

// Read takes a reading. It never fails as a whole: each source's error
// is kept next to it and turns the checks that need it into skips. Every
// source is read now, under ctx (the slow ones in parallel), so the checks
// judge one moment and nothing is read after ctx ends.
func (r *Reader) Read(ctx context.Context) *Reading {
	hs := r.Host.SnapshotReusing(r.ReuseClass)
	v := newHostView(ctx, hs)
	s := &Reading{Time: hs.Time, Hostname: hs.Hostname(ctx), Host: v}
	v.readAll(r.ExpectedDevices, func() {
		if r.Probe != nil {
			s.Probe = r.Probe.ProbeSeries()
		}
	})
	return s
}
