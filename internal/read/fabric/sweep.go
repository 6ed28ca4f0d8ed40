// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"fmt"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// This file is the typed result of a counter sweep: what the fabric
// collector exports per switch port and what diagnose's fabric.* checks
// judge. The sweep itself (ibnetdiscover's cache, ibqueryerrors runs) is
// in package ndcache, ibqueryerrors.go and sweeper.go; nothing here sends a
// MAD.

// PortLine is one port line of a topology scan: every port iblinkinfo printed,
// down ones included (a Down port has no link, so no Link names it).
type PortLine struct {
	// GUID is what iblinkinfo prints on the port's line (and
	// rdma_fabric_link_info's guid label): a switch's port 0 GUID for all
	// of its ports, the port GUID for a channel adapter.
	GUID uint64
	Desc string // node description, trimmed, a label value (End.Desc)
	// LID is the LID the PMA answers on (a switch's port 0 LID).
	LID  int
	Port int
	// Switch is true for a switch's port (its GUID is printed on more than
	// one port line).
	Switch bool
	// State is the logical state as sysfs numbers it (infiniband.State*:
	// 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE).
	State int
	// PhysState is the physical state as sysfs numbers it
	// (infiniband.PhysState*: 2 Polling, 3 Disabled, 5 LinkUp, ...); 0
	// when iblinkinfo printed a name this version does not know.
	PhysState int
	// Stale is true for a port of a node that the latest (partial) scan
	// did not reach: its line is the last scan's that did, kept so that
	// the node's ports stay visible (their state as last seen) and are
	// swept (and marked unknown while the node stays silent).
	Stale bool
}

// PortKey names a port as the per-port series' guid and port labels do.
type PortKey struct {
	GUID uint64
	Port int
}

// GUIDString formats the GUID as rdma_fabric_link_info's guid label.
func (p *PortLine) GUIDString() string { return fmt.Sprintf("0x%016x", p.GUID) }

// CounterID indexes Counters and PortCounters.Values.
type CounterID int

// Counter is one PMA counter a sweep reads.
type Counter struct {
	// Spec is the host's counter of the same meaning: its Metric (name
	// without the rdma_port_ prefix, so rdma_fabric_port_<Metric>), its
	// File (the `counter` label value, e.g. symbol_error), its PortCounters
	// field width (Bits) and its unit scale (data counters count 4-octet
	// words). One place per constant: internal/read/infiniband.Counters.
	Spec infiniband.CounterSpec
	// Field is the tools' name for it ("SymbolErrorCounter"), as
	// perfquery and ibqueryerrors print it.
	Field string
	// Error is true for the error counters (the ones the errors-only port
	// series keep and the fabric.* error checks judge); false for data,
	// packets and XmitWait.
	Error bool
}

// The counters a sweep reads, in Counters order.
const (
	SymbolErrors CounterID = iota
	LinkErrorRecovery
	LinkDowned
	ReceiveErrors
	ReceiveRemotePhysicalErrors
	ReceiveSwitchRelayErrors
	TransmitDiscards
	TransmitConstraintErrors
	ReceiveConstraintErrors
	LocalLinkIntegrityErrors
	ExcessiveBufferOverrunErrors
	VL15Dropped
	TransmitWait
	DataReceived
	DataTransmitted
	PacketsReceived
	PacketsTransmitted
	NumCounters
)

// Counters lists the swept counters, indexed by CounterID.
var Counters = [NumCounters]Counter{
	SymbolErrors:                 counter("symbol_error", "SymbolErrorCounter", true),
	LinkErrorRecovery:            counter("link_error_recovery", "LinkErrorRecoveryCounter", true),
	LinkDowned:                   counter("link_downed", "LinkDownedCounter", true),
	ReceiveErrors:                counter("port_rcv_errors", "PortRcvErrors", true),
	ReceiveRemotePhysicalErrors:  counter("port_rcv_remote_physical_errors", "PortRcvRemotePhysicalErrors", true),
	ReceiveSwitchRelayErrors:     counter("port_rcv_switch_relay_errors", "PortRcvSwitchRelayErrors", true),
	TransmitDiscards:             counter("port_xmit_discards", "PortXmitDiscards", true),
	TransmitConstraintErrors:     counter("port_xmit_constraint_errors", "PortXmitConstraintErrors", true),
	ReceiveConstraintErrors:      counter("port_rcv_constraint_errors", "PortRcvConstraintErrors", true),
	LocalLinkIntegrityErrors:     counter("local_link_integrity_errors", "LocalLinkIntegrityErrors", true),
	ExcessiveBufferOverrunErrors: counter("excessive_buffer_overrun_errors", "ExcessiveBufferOverrunErrors", true),
	VL15Dropped:                  counter("VL15_dropped", "VL15Dropped", true),
	TransmitWait:                 counter("port_xmit_wait", "PortXmitWait", false),
	DataReceived:                 counter("port_rcv_data", "PortRcvData", false),
	DataTransmitted:              counter("port_xmit_data", "PortXmitData", false),
	PacketsReceived:              counter("port_rcv_packets", "PortRcvPkts", false),
	PacketsTransmitted:           counter("port_xmit_packets", "PortXmitPkts", false),
}

func counter(file, field string, isErr bool) Counter {
	spec, ok := infiniband.LookupCounter(file)
	if !ok {
		panic("fabric: no infiniband counter " + file) // a typo here, caught by every test
	}
	return Counter{Spec: spec, Field: field, Error: isErr}
}

// Value is one counter of one port as read.
type Value struct {
	// V is the raw field value (data counters in 4-octet words: Scaled
	// gives octets).
	V uint64
	// Bits is the width of the field V was read from: the PortCounters
	// width (4 to 32) or 64 for PortCountersExtended.
	Bits uint8
	// Present is false when the counter was not read (the port is unknown,
	// or its PMA does not implement it, e.g. PortXmitWait without the
	// capability bit): absent, never a zero.
	Present bool
}

// Saturated reports whether a fixed-width field is pinned at its maximum:
// PMA counters stop there instead of wrapping, so the counter no longer
// counts. A 64-bit field is never taken for saturated.
func (v Value) Saturated() bool {
	return v.Present && v.Bits > 0 && v.Bits < 64 && v.V == 1<<v.Bits-1
}

// FixedWidth reports whether the value was read from a field narrow enough
// to saturate (rdma_fabric_port_counter_saturated is exported for those).
func (v Value) FixedWidth() bool { return v.Present && v.Bits < 64 }

// PortCounters is one swept port.
type PortCounters struct {
	// PortLine is the port as the topology scan the sweep used saw it:
	// its state is that scan's, its GUID/port the series' labels.
	PortLine
	// Values are indexed by CounterID.
	Values [NumCounters]Value
	// Unknown is true when a query for this port failed or answered
	// nothing parsable: the values not read are absent (Present false),
	// never zeros. Reason says why.
	Unknown bool
	Reason  Reason
}

// Scaled returns counter id in the metric's unit (octets for data) and
// whether it was read.
func (p *PortCounters) Scaled(id CounterID) (float64, bool) {
	v := p.Values[id]
	return float64(v.V) * Counters[id].Spec.Scale, v.Present
}

// HasErrors reports whether any error counter read non-zero.
func (p *PortCounters) HasErrors() bool {
	for id := range NumCounters {
		if Counters[id].Error && p.Values[id].Present && p.Values[id].V > 0 {
			return true
		}
	}
	return false
}

// Reason is why a query failed; the set is fixed (Reasons), so it is a
// bounded label (rdma_fabric_counter_sweep_failures_total{reason}).
type Reason string

// Reasons a tool run of a sweep (the discovery, an ibqueryerrors run)
// fails or leaves ports unknown.
const (
	// ReasonTimeout: the tool ran past its timeout; its process group was
	// killed.
	ReasonTimeout Reason = "timeout"
	// ReasonMAD: the tool reported a MAD failure (non-zero exit, or error
	// text such as "bad status", "_do_madrpc failed" or "iberror" on
	// standard error, whatever the exit status).
	ReasonMAD Reason = "mad_failed"
	// ReasonUnparsable: the tool exited 0 without error text, but its
	// output did not hold a complete, well-formed answer for the port.
	ReasonUnparsable Reason = "unparsable"
	// ReasonOutputTooLarge: more output than the bound; the tool was
	// killed.
	ReasonOutputTooLarge Reason = "output_too_large"
	// ReasonStart: the tool could not be started (not installed, not
	// executable).
	ReasonStart Reason = "start_failed"
	// ReasonSMChanged: the master subnet manager changed (restarted,
	// another took over, or it is not master) before or during the runs:
	// the LIDs they queried may name other nodes than the cache says
	// (smcheck.go), so nothing they read is trusted.
	ReasonSMChanged Reason = "sm_changed"
)

// Reasons lists every Reason, in the order they are exported.
var Reasons = []Reason{ReasonTimeout, ReasonMAD, ReasonUnparsable, ReasonOutputTooLarge, ReasonStart, ReasonSMChanged}

// Sweep is one counter sweep: every port of the sweeper's shard in the
// topology it used, each read or marked unknown.
type Sweep struct {
	Start    time.Time
	Duration time.Duration
	// Topology is the scan whose ports were swept (never modified).
	Topology *Fabric
	// Ports are sorted by GUID and port; a port that could not be read is
	// here with Unknown set, so it never vanishes.
	Ports []PortCounters
	// Queries is the number of ibqueryerrors runs (two a sweep that had
	// a cache to read against); Failures counts the failed or partial
	// tool runs by reason (each leaves all or some ports unknown).
	Queries  int
	Failures map[Reason]int
	// Unknown is the number of Ports with Unknown set.
	Unknown int
	// Overrun is true for the stand-in a sweeper publishes when the
	// sweep it runs has overrun its interval: the last sweep's ports,
	// every one unknown (ReasonTimeout), Start that sweep's start.
	Overrun bool
}

// OK reports whether every swept port was read and no query failed (a
// run can report an error and still answer every port).
func (s *Sweep) OK() bool { return s.Unknown == 0 && s.failed() == 0 }

func (s *Sweep) failed() int {
	n := 0
	for _, c := range s.Failures {
		n += c
	}
	return n
}

// Find returns the swept port guid/port, or nil.
func (s *Sweep) Find(guid uint64, port int) *PortCounters {
	lo, hi := 0, len(s.Ports)
	for lo < hi {
		m := (lo + hi) / 2
		p := &s.Ports[m]
		if p.GUID < guid || p.GUID == guid && p.Port < port {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.Ports) && s.Ports[lo].GUID == guid && s.Ports[lo].Port == port {
		return &s.Ports[lo]
	}
	return nil
}

// SweepStatus is the sweeper's state for a scrape or a check.
type SweepStatus struct {
	// Last is the latest completed sweep; nil before one.
	Last *Sweep
	// LastSuccess is when the latest sweep with OK() true started.
	LastSuccess time.Time
	// Sweeps counts completed sweeps; Skipped counts ticks that found the
	// previous sweep still running (a sweep is never stacked).
	Sweeps, Skipped uint64
	// Failures counts failed queries since start, by reason.
	Failures map[Reason]uint64
	// Running is when the sweep now running began; zero when none runs.
	Running time.Time
}

// LinkAt returns the link cabled to port guid/port and the end at the
// other side (the peer a check names with the port), or nil when the port
// has no link (Down, or not in the scan). It scans the links: cheap for
// the few ports a check names, not meant for every port of a sweep.
func (f *Fabric) LinkAt(guid uint64, port int) (*Link, End) {
	for i := range f.Links {
		l := &f.Links[i]
		switch {
		case l.A.GUID == guid && l.A.Port == port:
			return l, l.B
		case l.B.GUID == guid && l.B.Port == port:
			return l, l.A
		}
	}
	return nil, End{}
}
