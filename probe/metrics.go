// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Labels of every probe series: DESIGN.md's peer and test, plus the local
// device and port so the series join with rdma_port_rate_bytes_per_second
// and stay unique on hosts with several HCAs, plus memory ("host", or
// "gpu" for a probe.gpu target) on every series, so a GPUDirect run never
// shares a series with a host-memory run of the same port and one metric
// has one label set (docs/probe.md).
var labels = []string{"peer", "test", "device", "port", "memory"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc("rdma_probe_"+name, help, append(append([]string{}, labels...), extra...), nil)
}

var (
	successDesc = desc("success",
		"Whether the latest probe run succeeded (1) or failed (0).")
	lastRunDesc = desc("last_run_timestamp_seconds",
		"When the latest probe run finished, in seconds since the epoch.")
	lastSuccessDesc = desc("last_success_timestamp_seconds",
		"When the latest successful probe run finished, in seconds since the epoch.")
	durationDesc = desc("duration_seconds",
		"Wall time of the latest probe run in seconds, setup included.")
	latencyDesc = desc("latency_seconds",
		"Latency of the last successful probe run in seconds (perftest's half or full round trip).", "stat")
	bandwidthDesc = desc("bandwidth_bytes_per_second",
		"Bandwidth of the last successful probe run in bytes per second.", "stat")
	messageRateDesc = desc("messages_per_second",
		"Message rate of the last successful bandwidth probe run.")
	ratioDesc = desc("bandwidth_ratio",
		"Average bandwidth of the last successful probe run over the local port's active rate.")
	runsDesc = desc("runs_total",
		"Probe runs since start.")
	failuresDesc = desc("failures_total",
		"Failed probe runs since start, by reason.", "reason")
)

// Collector exports a Reader's entries. Its Collect also marks the scrape
// on the guard, so the scheduler keeps probes away from scrapes.
type Collector struct {
	Store Reader
	// Guard, if set, is told that a scrape started.
	Guard *ScrapeGuard
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{successDesc, lastRunDesc, lastSuccessDesc, durationDesc, latencyDesc,
		bandwidthDesc, messageRateDesc, ratioDesc, runsDesc, failuresDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It only copies the store: it
// never waits for a probe.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.AppendMetrics(nil) {
		ch <- m
	}
}

// AppendMetrics appends what Collect sends to out: the metrics handler
// takes them as a slice, without a goroutine and a channel per scrape.
func (c *Collector) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	if c.Guard != nil {
		c.Guard.Mark()
	}
	for _, e := range c.Store.Latest() {
		lv := []string{e.Peer, e.Test, e.Device, strconv.Itoa(e.Port), string(e.Memory.orHost())}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(lv, extra...)...))
		}
		if e.Last != nil {
			gauge(successDesc, b2f(e.Last.Success))
			gauge(lastRunDesc, float64(e.Last.End().UnixNano())/1e9)
			gauge(durationDesc, e.Last.Duration.Seconds())
		}
		out = append(out, prometheus.MustNewConstMetric(runsDesc, prometheus.CounterValue, float64(e.Runs), lv...))
		for reason, n := range e.Failures {
			out = append(out, prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(n), append(lv, reason)...))
		}
		s := e.LastSuccess
		if s == nil {
			continue
		}
		gauge(lastSuccessDesc, float64(s.End().UnixNano())/1e9)
		if l := s.Latency; l != nil {
			gauge(latencyDesc, l.Min, "min")
			gauge(latencyDesc, l.Typical, "typical")
			gauge(latencyDesc, l.Avg, "avg")
			gauge(latencyDesc, l.Max, "max")
			if l.HasPercentiles {
				gauge(latencyDesc, l.P99, "p99")
				gauge(latencyDesc, l.P999, "p999")
			}
		}
		if b := s.Bandwidth; b != nil {
			gauge(bandwidthDesc, b.Average, "average")
			if b.PeakMeasured {
				gauge(bandwidthDesc, b.Peak, "peak")
			}
			if b.MessagesPerSecond > 0 {
				gauge(messageRateDesc, b.MessagesPerSecond)
			}
			if r, ok := s.BandwidthRatio(); ok {
				gauge(ratioDesc, r)
			}
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
