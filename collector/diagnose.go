// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// diagnoseStatus exports rdma_diagnose_status from the diagnose sampler's
// latest report. It lives here, with the other metrics, so that diagnose
// judges and never renders. The series of a report are built once, when a
// scrape first sees it (a report lasts diagnose.interval; a DGX has 145
// findings), and are expo samples, which the text path writes directly.
type diagnoseStatus struct {
	latest   func() *diagnose.Report
	desc     *expo.Desc
	reportTS *expo.Desc

	mu      sync.Mutex
	report  *diagnose.Report
	samples []prometheus.Metric
}

// NewDiagnoseStatus exports rdma_diagnose_status{check,target}: 0 pass,
// 1 warn, 2 fail, from the latest report (nil before the first); skipped
// findings are absent.
func NewDiagnoseStatus(latest func() *diagnose.Report) prometheus.Collector {
	return &diagnoseStatus{latest: latest,
		desc: desc("rdma_diagnose_status",
			"Latest diagnose result per check and target: 0 pass, 1 warn, 2 fail (skipped checks are absent).",
			"check", "target"),
		reportTS: desc("rdma_diagnose_report_timestamp_seconds",
			"When the sample behind the latest diagnose report was taken, in seconds since the epoch."),
	}
}

func (c *diagnoseStatus) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc.Prometheus()
	ch <- c.reportTS.Prometheus()
}

func (c *diagnoseStatus) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.AppendMetrics(nil) {
		ch <- m
	}
}

// AppendMetrics appends what Collect sends to out: the metrics handler
// takes them as a slice, without a goroutine and a channel per scrape.
func (c *diagnoseStatus) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	r := c.latest()
	if r == nil {
		return out
	}
	out = append(out, expo.Gauge(c.reportTS, float64(r.Time.UnixNano())/1e9))
	return append(out, c.series(r)...)
}

// series are a report's samples, built on first use: the worst severity
// of each (check, target), in the order of the report's findings.
func (c *diagnoseStatus) series(r *diagnose.Report) []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r == c.report {
		return c.samples
	}
	type key struct{ check, target string }
	worst := map[key]diagnose.Severity{}
	var order []key
	for _, f := range r.Findings {
		if f.Severity == diagnose.Skip {
			continue
		}
		k := key{f.Check, f.Target}
		old, seen := worst[k]
		if !seen {
			order = append(order, k)
		}
		if !seen || f.Severity.Worse(old) {
			worst[k] = f.Severity
		}
	}
	out := make([]prometheus.Metric, 0, len(order))
	for _, k := range order {
		v := 0.0
		switch worst[k] {
		case diagnose.Warn:
			v = 1
		case diagnose.Fail:
			v = 2
		}
		out = append(out, expo.Gauge(c.desc, v, k.check, k.target))
	}
	c.report, c.samples = r, out
	return out
}
