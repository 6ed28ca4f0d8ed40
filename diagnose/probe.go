// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
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

// bandwidthRatio is the average bandwidth over the port rate: the guide's
// "at least 90 % of nominal". ok is false without a bandwidth or a rate.
func (r *ProbeRun) bandwidthRatio() (ratio float64, ok bool) {
	if r.Bandwidth == nil || r.PortRate <= 0 {
		return 0, false
	}
	return *r.Bandwidth / r.PortRate, true
}

func probeChecks(l *checkList) {
	l.register(&Check{
		ID:    "probe.latency",
		Title: "Verbs probe latency",
		Reads: []Source{SourceProbe},
		Doc: "The latest scheduled perftest latency probe (ib_send_lat, ib_write_lat, ib_read_lat) has a typical (median) latency " +
			"below diagnose.thresholds.probe: 2 µs in loopback on one HCA, 5 µs across a cable or through a switch (the guide's numbers); " +
			"above warns. A failed run fails when the transport gave up (retry_exceeded, completion_error, port_down) and warns otherwise.",
		Remedy: "Check CPU governor and placement (cpu.governor, irq.local), then the links on the path (ctr.*, hw.retrans).",
		Run:    checkProbeLatency,
	})
	l.register(&Check{
		ID:    "probe.bandwidth",
		Title: "Verbs probe bandwidth",
		Reads: []Source{SourceProbe},
		Doc: "The latest scheduled perftest bandwidth probe (ib_write_bw, ib_read_bw, ib_send_bw) averages at least " +
			"min_bandwidth_ratio (default 0.9) of the local port's rate; below warns. Failed runs are judged as for probe.latency.",
		Remedy: "Check port.rate, pci.link and the NUMA placement of the probe; then the fabric.",
		Run:    checkProbeBandwidth,
	})
}

// NoProbeResults is the skip reason without results: the same text from
// the server (no probe configured yet) and the CLI (which never probes).
const NoProbeResults = "no verbs probe results: the server runs the probe when probe.enabled is set (see /probe); the CLI does not run it"

// probeTarget names a probe series: local port, test and peer.
func probeTarget(e *ProbeSeries) string {
	return fmt.Sprintf("%s/%d %s %s", e.Device, e.Port, e.Test, e.Peer)
}

// failedRun judges an entry whose latest run failed; ok is false when the
// latest run succeeded.
func failedRun(e *ProbeSeries) (Finding, bool) {
	if e.Last == nil || e.Last.Success {
		return Finding{}, false
	}
	f := Finding{Target: probeTarget(e), Observed: "failed: " + e.Last.ErrorKind,
		Expected: "a successful run", Evidence: fmt.Sprintf("%s at %s: %s", e.Test, e.Last.Start.UTC().Format("2006-01-02T15:04:05Z"), e.Last.Error)}
	if !e.LastSuccess.IsZero() {
		f.Evidence += fmt.Sprintf("; last success %s", e.LastSuccess.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if e.Last.TransportFailed {
		f.Severity = Fail
		f.Remedy = fmt.Sprintf("the RDMA transport failed between %s/%d and %s (%s): check port.state and the error counters of both ends (ctr.*, hw.retrans); "+
			"on RoCE the lossless (PFC) configuration", e.Device, e.Port, e.Peer, e.Last.ErrorKind)
	} else {
		f.Severity = Warn
		f.Remedy = fmt.Sprintf("the probe could not measure (%s): check its configuration (probe.*) and, for a peer, that its responder runs and allows %s", e.Last.ErrorKind, e.Test)
	}
	return f, true
}

func probeEntries(s *Reading, bandwidth bool) []ProbeSeries {
	var out []ProbeSeries
	for _, e := range s.Probe {
		if e.Bandwidth == bandwidth {
			out = append(out, e)
		}
	}
	return out
}

func us(seconds float64) string { return fmt.Sprintf("%.2f µs", seconds*1e6) }

func checkProbeLatency(s *Reading, _ *History, cfg *config.Config) ([]Finding, error) {
	th := cfg.Diagnose.Thresholds.Probe.Effective()
	entries := probeEntries(s, false)
	var out []Finding
	for i := range entries {
		e := &entries[i]
		if f, failed := failedRun(e); failed {
			out = append(out, f)
			continue
		}
		r := e.Last
		if r == nil || r.Latency == nil {
			out = append(out, Finding{Severity: Skip, Target: probeTarget(e), Evidence: "the latest run has no latency figures"})
			continue
		}
		limit, where := th.SwitchLatencyUS, "through a cable or switch (switch_latency_us)"
		if r.Loopback {
			limit, where = th.LoopbackLatencyUS, "in loopback on one HCA (loopback_latency_us)"
		}
		l := r.Latency
		f := Finding{Target: probeTarget(e),
			Observed: fmt.Sprintf("typical %s (min %s, max %s", us(l.Typical), us(l.Min), us(l.Max)),
			Expected: fmt.Sprintf("below %.2f µs %s", limit, where),
			Evidence: fmt.Sprintf("%s, %s mode, %d-byte messages, %d iterations, at %s", e.Test, r.Mode, r.Size, r.Iterations, r.Start.UTC().Format("2006-01-02T15:04:05Z")),
			Severity: Pass}
		if l.HasPercentiles {
			f.Observed += ", p99 " + us(l.P99)
		}
		f.Observed += ")"
		if len(r.Notes) > 0 {
			f.Evidence += "; perftest: " + strings.Join(r.Notes, "; ")
		}
		if l.Typical*1e6 >= limit {
			f.Severity = Warn
			f.Remedy = fmt.Sprintf("latency on %s/%d is above the guide's %.0f µs: set the CPU governor to performance and pin the probe and IRQs to the HCA's NUMA node "+
				"(cpu.governor, irq.local); then check the path for errors and congestion (ctr.*, ctr.xmit_wait)", e.Device, e.Port, limit)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return noTargets(NoProbeResults), nil
	}
	return out, nil
}

func checkProbeBandwidth(s *Reading, _ *History, cfg *config.Config) ([]Finding, error) {
	th := cfg.Diagnose.Thresholds.Probe.Effective()
	entries := probeEntries(s, true)
	var out []Finding
	for i := range entries {
		e := &entries[i]
		if f, failed := failedRun(e); failed {
			out = append(out, f)
			continue
		}
		r := e.Last
		if r == nil {
			continue
		}
		ratio, ok := r.bandwidthRatio()
		if !ok {
			out = append(out, Finding{Severity: Skip, Target: probeTarget(e), Evidence: "the latest run has no bandwidth, or the port rate was unknown"})
			continue
		}
		f := Finding{Target: probeTarget(e),
			Observed: fmt.Sprintf("%.1f Gb/s average, %.0f%% of the port's %.0f Gb/s", *r.Bandwidth*8/1e9, ratio*100, r.PortRate*8/1e9),
			Expected: fmt.Sprintf("at least %.0f%% of the port rate (min_bandwidth_ratio)", th.MinBandwidthRatio*100),
			Evidence: fmt.Sprintf("%s, %s mode, %d-byte messages, at %s", e.Test, r.Mode, r.Size, r.Start.UTC().Format("2006-01-02T15:04:05Z")),
			Severity: Pass}
		if ratio < th.MinBandwidthRatio {
			f.Severity = Warn
			f.Remedy = fmt.Sprintf("bandwidth on %s/%d is below %.0f%% of the link: check the PCIe link (pci.link), the NUMA placement of the probe "+
				"(pci.numa, irq.local) and the rate (port.rate); through a fabric, congestion (ctr.xmit_wait)", e.Device, e.Port, th.MinBandwidthRatio*100)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return noTargets(NoProbeResults), nil
	}
	return out, nil
}
