// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"encoding/json"
	"time"

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

// Source is a data source a check reads: the name a report lists it by,
// and why a reading cannot use it. The host's sources bring both from the
// host package (host.Need, declared beside each source's accessor), bound
// here to the Host method that reads them; the engine adds the verbs
// probe and the counter history.
type Source struct {
	name string
	// unavailable says why the reading cannot use the source, or "".
	unavailable func(*Reading) string
}

// String is the source's name.
func (src Source) String() string { return src.name }

// MarshalJSON writes the name, as a report's "reads" lists it.
func (src Source) MarshalJSON() ([]byte, error) { return json.Marshal(src.name) }

// UnmarshalJSON reads a report's name back. The Source it makes judges
// nothing: no collector reads its data here.
func (src *Source) UnmarshalJSON(b []byte) error {
	*src = Source{}
	return json.Unmarshal(b, &src.name)
}

// need is a host source's Source: its Need judges what read returns
// (T's zero and no error where nothing was read).
func need[T any](n *host.Need[T], read func(Host) (T, error)) Source {
	return Source{name: n.Name(), unavailable: func(s *Reading) string {
		v, err := Get(s, read)
		return n.Unavailable(v, err)
	}}
}

// judged is a Source whose checks judge its absence themselves.
func judged(name string) Source {
	return Source{name: name, unavailable: func(*Reading) string { return "" }}
}

// The sources the checks read.
var (
	SourceInfiniband = need(host.NeedClass, Host.Class)
	SourcePCI        = need(host.NeedPCI, Host.Placement)
	SourceIRQ        = need(host.NeedIRQ, Host.Placement)
	SourceOpenSM     = need(host.NeedOpenSM, Host.OpenSM)
	SourceTuning     = need(host.NeedTuning, Host.Tuning)
	SourceNetdev     = need(host.NeedNetdevs, Host.Netdevs)
	SourceGPU        = need(host.NeedGPUs, Host.GPUs)
	SourceDevlink    = need(host.NeedDevlink, Host.Devlink)
	SourceRoCE       = need(host.NeedRoCE, Host.RoCE)
	SourceHwmon      = need(host.NeedTemperatures, Host.Temperatures)
	SourceSM         = need(host.NeedSM, errorless(Host.SM))
	SourceFabric     = need(host.NeedFabricSweep, errorless(Host.FabricSweep))
	SourceModule     = need(host.NeedModule, errorless(Host.ModulesAsked))
	SourcePortWatch  = need(host.NeedPortHistory, func(h Host) (bool, error) {
		_, watched := h.PortHistory()
		return watched, nil
	})
	SourceKmsg = need(host.NeedKernelLog, func(h Host) (*host.KernelLog, error) {
		if l, watched := h.KernelLog(); watched {
			return l, nil
		}
		return nil, nil
	})
	// SourceProbe: the probe checks say NoProbeResults themselves, as an
	// empty store and no store read the same.
	SourceProbe = judged("probe")
	// SourceHistory: delta checks judge what one sample can tell (a
	// saturated counter) and skip the rest themselves with
	// NeedTwoSamples.
	SourceHistory = judged("history")
)

// errorless is a Host method whose reading has no error.
func errorless[T any](read func(Host) T) func(Host) (T, error) {
	return func(h Host) (T, error) { return read(h), nil }
}

// Reading is one sample of a host as the checks judge it: when it was
// taken, the host's sources read through Host (sminfo and the fabric
// sweep among them), and what the server adds (the verbs probe, the
// expected topology). It copies no source: a new one is a method on Host
// and its read in hostView, and a Source binding its host.Need.
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
	if src.unavailable == nil {
		// Read back from a report (UnmarshalJSON), not declared here.
		return "no collector reads " + src.name + " data yet"
	}
	return src.unavailable(s)
}

// ErrorsText joins errors for a reason, at most three of them.
var ErrorsText = host.ErrorsText

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
