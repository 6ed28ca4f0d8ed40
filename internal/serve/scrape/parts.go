// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"

	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// BuildInfo is the <program>_build_info series of client_golang's
// version collector (collectors/version), as an expo sample: the text
// path writes it without a registry.
func BuildInfo(program string) prometheus.Collector {
	d := expo.NewDesc(program+"_build_info",
		"The version, revision, branch, Go version, OS and architecture "+program+" was built from; always 1.",
		"version", "revision", "branch", "goversion", "goos", "goarch", "tags")
	return metricList{expo.Gauge(d, 1, version.Version, version.GetRevision(), version.Branch, version.GoVersion, version.GoOS, version.GoArch, version.GetTags())}
}

var labelLimitedDesc = expo.NewDesc("rdma_label_values_limited_total",
	"Host text values the label policy cut or refused, by reason (cut, refused, over_cap).",
	"reason")

var expositionRejectedDesc = expo.NewDesc("rdma_exposition_rejected_samples_total",
	"Samples left out of /metrics that the client library's registry would refuse, by reason.",
	"reason")

// expoRejections exports what the exposition left out (expo.Rejected).
type expoRejections struct{}

// AppendMetrics appends one counter per reason, zero included.
func (expoRejections) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	for _, r := range expo.Rejects() {
		out = append(out, expo.Counter(expositionRejectedDesc, float64(expo.Rejected(r)), r.String()))
	}
	return out
}

func (expoRejections) Describe(ch chan<- *prometheus.Desc) { ch <- expositionRejectedDesc.Prometheus() }

func (e expoRejections) Collect(ch chan<- prometheus.Metric) {
	for _, m := range e.AppendMetrics(nil) {
		ch <- m
	}
}

// labelLimits exports what the label policy limited (names.Limited).
type labelLimits struct{}

// AppendMetrics appends one counter per reason, zero included.
func (labelLimits) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	for _, r := range names.Reasons() {
		out = append(out, expo.Counter(labelLimitedDesc, float64(names.Limited(r)), r.String()))
	}
	return out
}

func (labelLimits) Describe(ch chan<- *prometheus.Desc) { ch <- labelLimitedDesc.Prometheus() }

func (l labelLimits) Collect(ch chan<- prometheus.Metric) {
	for _, m := range l.AppendMetrics(nil) {
		ch <- m
	}
}

// metricsAppender is a part that hands over its metrics as a slice.
type metricsAppender interface {
	AppendMetrics([]prometheus.Metric) []prometheus.Metric
}

// collect returns what a collector sends: without a goroutine and a
// channel where the collector appends.
func collect(c prometheus.Collector) []prometheus.Metric {
	if a, ok := c.(metricsAppender); ok {
		return a.AppendMetrics(nil)
	}
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var out []prometheus.Metric
	for m := range ch {
		out = append(out, m)
	}
	return out
}

// metricList is a collector of ready metrics: a part (build info), or
// those of a scrape that are not expo samples (probe results, go_*,
// promhttp_*), for the text path's registry.
type metricList []prometheus.Metric

// AppendMetrics appends the metrics to out.
func (l metricList) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	return append(out, l...)
}

func (l metricList) Describe(chan<- *prometheus.Desc) {}

func (l metricList) Collect(ch chan<- prometheus.Metric) {
	for _, m := range l {
		ch <- m
	}
}
