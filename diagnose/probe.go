// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"time"
)

// ProbeResults is where the probe checks find the verbs probe's results:
// the server's probe store (probe.Diagnose adapts it); the CLI has
// none. Declared here, by its consumer, so that diagnose does not import
// the probe.
type ProbeResults interface {
	// ProbeSeries returns the latest of every probe series; the caller
	// may keep them.
	ProbeSeries() []ProbeSeries
}

// ProbeSeries is one verbs probe series (local port, test, peer) as the
// probe checks judge it.
type ProbeSeries struct {
	// Device and Port are the local HCA port; Test the perftest binary
	// (ib_write_lat); Peer the target's name.
	Device string
	Port   int
	Test   string
	Peer   string
	// Bandwidth says Test measures bandwidth (ib_*_bw), not latency.
	Bandwidth bool
	// Last is the latest run, good or bad; nil before the first.
	Last *ProbeRun
	// LastSuccess is when the latest good run started (zero: none).
	LastSuccess time.Time
}

// ProbeRun is one probe run.
type ProbeRun struct {
	Start   time.Time
	Success bool
	// ErrorKind ("retry_exceeded", "connect_failed", ...) and Error say
	// why a run failed. TransportFailed says the RDMA transport itself
	// broke (retry exceeded, completion error, port down), not the setup
	// of the probe.
	ErrorKind, Error string
	TransportFailed  bool
	// Mode is how the run was made (loopback, loopback-cable, peer);
	// Loopback is server and client on one HCA port, where the guide's
	// loopback latency bound applies.
	Mode     string
	Loopback bool
	// Size and Iterations are of the result row; Notes the warnings
	// perftest printed.
	Size, Iterations int64
	Notes            []string
	// Latency is nil without latency figures.
	Latency *ProbeLatency
	// Bandwidth is the average in bytes per second, nil without one;
	// PortRate the local port's rate in bytes per second, 0 when unknown.
	Bandwidth *float64
	PortRate  float64
}

// ProbeLatency is a latency run's figures, in seconds.
type ProbeLatency struct {
	Typical, Min, Max float64
	// P99 is absent (HasPercentiles false) in old perftest output.
	P99            float64
	HasPercentiles bool
}
