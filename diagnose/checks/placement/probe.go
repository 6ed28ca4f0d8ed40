// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

// bandwidthRatio is the average bandwidth over the port rate: the guide's
// "at least 90 % of nominal". ok is false without a bandwidth or a rate.
func bandwidthRatio(r *diagnose.ProbeRun) (ratio float64, ok bool) {
	if r.Bandwidth == nil || r.PortRate <= 0 {
		return 0, false
	}
	return *r.Bandwidth / r.PortRate, true
}

// ProbeChecks registers the checks of probe.go; checks.All lists every concern's.
func ProbeChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "probe.latency",
		Title: "Verbs probe latency",
		Reads: []diagnose.Source{diagnose.SourceProbe},
		Doc: "The latest scheduled perftest latency probe (ib_send_lat, ib_write_lat, ib_read_lat) has a typical (median) latency " +
			"below diagnose.thresholds.probe: 2 µs in loopback on one HCA, 5 µs across a cable or through a switch (the guide's numbers); " +
			"above warns. A failed run fails when the transport gave up (retry_exceeded, completion_error, port_down) and warns otherwise.",
		Remedy: "Check CPU governor and placement (cpu.governor, irq.local), then the links on the path (ctr.*, hw.retrans).",
		Run:    checkProbeLatency,
	})
	l.Register(&diagnose.Check{
		ID:    "probe.bandwidth",
		Title: "Verbs probe bandwidth",
		Reads: []diagnose.Source{diagnose.SourceProbe},
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
func probeTarget(e *diagnose.ProbeSeries) string {
	return fmt.Sprintf("%s/%d %s %s", e.Device, e.Port, e.Test, e.Peer)
}

// failedRun judges an entry whose latest run failed; ok is false when the
// latest run succeeded.
func failedRun(e *diagnose.ProbeSeries) (diagnose.Finding, bool) {
	if e.Last == nil || e.Last.Success {
		return diagnose.Finding{}, false
	}
	f := diagnose.Finding{Target: probeTarget(e), Observed: "failed: " + e.Last.ErrorKind,
		Expected: "a successful run", Evidence: fmt.Sprintf("%s at %s: %s", e.Test, e.Last.Start.UTC().Format("2006-01-02T15:04:05Z"), e.Last.Error)}
	if !e.LastSuccess.IsZero() {
		f.Evidence += fmt.Sprintf("; last success %s", e.LastSuccess.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if e.Last.TransportFailed {
		f.Severity = diagnose.Fail
		f.Remedy = fmt.Sprintf("the RDMA transport failed between %s/%d and %s (%s): check port.state and the error counters of both ends (ctr.*, hw.retrans); "+
			"on RoCE the lossless (PFC) configuration", e.Device, e.Port, e.Peer, e.Last.ErrorKind)
	} else {
		f.Severity = diagnose.Warn
		f.Remedy = fmt.Sprintf("the probe could not measure (%s): check its configuration (probe.*) and, for a peer, that its responder runs and allows %s", e.Last.ErrorKind, e.Test)
	}
	return f, true
}

func probeEntries(s *diagnose.Reading, bandwidth bool) []diagnose.ProbeSeries {
	var out []diagnose.ProbeSeries
	for _, e := range s.Probe {
		if e.Bandwidth == bandwidth {
			out = append(out, e)
		}
	}
	return out
}

func us(seconds float64) string { return fmt.Sprintf("%.2f µs", seconds*1e6) }

func checkProbeLatency(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	th := cfg.Diagnose.Thresholds.Probe.Effective()
	entries := probeEntries(s, false)
	var out []diagnose.Finding
	for i := range entries {
		e := &entries[i]
		if f, failed := failedRun(e); failed {
			out = append(out, f)
			continue
		}
		r := e.Last
		if r == nil || r.Latency == nil {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: probeTarget(e), Evidence: "the latest run has no latency figures"})
			continue
		}
		limit, where := th.SwitchLatencyUS, "through a cable or switch (switch_latency_us)"
		if r.Loopback {
			limit, where = th.LoopbackLatencyUS, "in loopback on one HCA (loopback_latency_us)"
		}
		l := r.Latency
		f := diagnose.Finding{Target: probeTarget(e),
			Observed: fmt.Sprintf("typical %s (min %s, max %s", us(l.Typical), us(l.Min), us(l.Max)),
			Expected: fmt.Sprintf("below %.2f µs %s", limit, where),
			Evidence: fmt.Sprintf("%s, %s mode, %d-byte messages, %d iterations, at %s", e.Test, r.Mode, r.Size, r.Iterations, r.Start.UTC().Format("2006-01-02T15:04:05Z")),
			Severity: diagnose.Pass}
		if l.HasPercentiles {
			f.Observed += ", p99 " + us(l.P99)
		}
		f.Observed += ")"
		if len(r.Notes) > 0 {
			f.Evidence += "; perftest: " + strings.Join(r.Notes, "; ")
		}
		if l.Typical*1e6 >= limit {
			f.Severity = diagnose.Warn
			f.Remedy = fmt.Sprintf("latency on %s/%d is above the guide's %.0f µs: set the CPU governor to performance and pin the probe and IRQs to the HCA's NUMA node "+
				"(cpu.governor, irq.local); then check the path for errors and congestion (ctr.*, ctr.xmit_wait)", e.Device, e.Port, limit)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets(NoProbeResults), nil
	}
	return out, nil
}

func checkProbeBandwidth(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	th := cfg.Diagnose.Thresholds.Probe.Effective()
	entries := probeEntries(s, true)
	var out []diagnose.Finding
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
		ratio, ok := bandwidthRatio(r)
		if !ok {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: probeTarget(e), Evidence: "the latest run has no bandwidth, or the port rate was unknown"})
			continue
		}
		f := diagnose.Finding{Target: probeTarget(e),
			Observed: fmt.Sprintf("%.1f Gb/s average, %.0f%% of the port's %.0f Gb/s", *r.Bandwidth*8/1e9, ratio*100, r.PortRate*8/1e9),
			Expected: fmt.Sprintf("at least %.0f%% of the port rate (min_bandwidth_ratio)", th.MinBandwidthRatio*100),
			Evidence: fmt.Sprintf("%s, %s mode, %d-byte messages, at %s", e.Test, r.Mode, r.Size, r.Start.UTC().Format("2006-01-02T15:04:05Z")),
			Severity: diagnose.Pass}
		if ratio < th.MinBandwidthRatio {
			f.Severity = diagnose.Warn
			f.Remedy = fmt.Sprintf("bandwidth on %s/%d is below %.0f%% of the link: check the PCIe link (pci.link), the NUMA placement of the probe "+
				"(pci.numa, irq.local) and the rate (port.rate); through a fabric, congestion (ctr.xmit_wait)", e.Device, e.Port, th.MinBandwidthRatio*100)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets(NoProbeResults), nil
	}
	return out, nil
}
