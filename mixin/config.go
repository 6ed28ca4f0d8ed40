// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package mixin holds the one configuration that rdma_doctor's Prometheus
// rules (alerts/), Grafana dashboards (dashboards/build) and Alertmanager
// inhibit rules are generated from, in the sense of the Prometheus
// monitoring mixins: the job selector, the cluster label, the runbook URL,
// the rate window and the alert thresholds are set once here and every
// generated file follows. Default() produces the files committed in this
// repository; `go run ./mixin/generate -config my.yml -o DIR` renders them
// for another setup.
package mixin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Config is everything a deployment may need to change in the generated
// rules and dashboards. The YAML names are what a config file for
// mixin/generate uses; a field left out keeps its default.
type Config struct {
	// JobSelector is the label matcher of rdma_doctor's scrape job, used
	// where a query must name the job because the metric is not the
	// exporter's own (up{...} in RdmaDoctorDown). rdma_* metrics come only
	// from rdma_doctor and are not filtered by it.
	JobSelector string `yaml:"job_selector"`
	// ClusterLabel is the label that tells clusters apart in a global view
	// (Thanos, Mimir, federation). Every aggregation and every join of
	// the rules keeps it, so rules evaluated over several clusters neither
	// mix them nor fail on duplicate series; where a Prometheus sees one
	// cluster without the label, keeping it is a no-op.
	ClusterLabel string `yaml:"cluster_label"`
	// MultiCluster adds a cluster variable (over ClusterLabel) to every
	// dashboard and filters every query by it.
	MultiCluster bool `yaml:"multi_cluster"`
	// RunbookURLBase is prefixed to the lower-cased alert name to make
	// each alert's runbook_url.
	RunbookURLBase string `yaml:"runbook_url_base"`
	// DiagnoseURL, if set, is a Prometheus template for the URL of a host's
	// /diagnose page (e.g. "http://{{ $labels.instance }}:9873/diagnose"
	// where instance is a bare node name), named in RdmaDiagnoseCheckFailing.
	// Empty: the alert tells on-call to run `rdma_doctor diagnose` on the
	// node, which works whatever the scrape's instance label looks like.
	DiagnoseURL string `yaml:"diagnose_url"`
	// RateWindow is the range of the rate() and increase() of the
	// recording rules and of the alerts that judge a per-second rate; the
	// recording rules' names end in it (…:rate5m).
	RateWindow model.Duration `yaml:"rate_window"`
	// Thresholds are the alert thresholds; docs/runbook.md explains each.
	Thresholds Thresholds `yaml:"thresholds"`
}

// Thresholds of the alerts, each in the unit its name says.
type Thresholds struct {
	// rdma-core's infiniband-diags etc/error_thresholds sample values,
	// per hour here.
	SymbolErrorsPerHour        float64 `yaml:"symbol_errors_per_hour"`
	LinkErrorRecoveryPerHour   float64 `yaml:"link_error_recovery_per_hour"`
	ReceiveErrorsPerHour       float64 `yaml:"receive_errors_per_hour"`
	TransmitDiscardsPerHour    float64 `yaml:"transmit_discards_per_hour"`
	TransmitWaitTicksPerSecond float64 `yaml:"transmit_wait_ticks_per_second"`
	// Azure HPC's health check drains a node at 5 link downs a day.
	LinkDownsPerDayFlapping float64 `yaml:"link_downs_per_day_flapping"`
	// rdma_doctor's own ([ours] in the rules).
	RetransmitsPerSecond             float64 `yaml:"retransmits_per_second"`
	CongestionNotificationsPerSecond float64 `yaml:"congestion_notifications_per_second"`
	// FabricTransmitWaitRatio is the share of a switch port's rate lost
	// waiting for credits (XmitWait × 8 bytes) above which
	// RdmaFabricPortTransmitWait fires.
	FabricTransmitWaitRatio float64 `yaml:"fabric_transmit_wait_ratio"`
	// The guide: bandwidth at least 90 % of the port rate, latency under
	// 2 µs in loopback and 5 µs through a switch.
	ProbeBandwidthRatio         float64 `yaml:"probe_bandwidth_ratio"`
	ProbeLatencyLoopbackSeconds float64 `yaml:"probe_latency_loopback_seconds"`
	ProbeLatencySwitchSeconds   float64 `yaml:"probe_latency_switch_seconds"`
	// Flap and drop, judged per link by RdmaLinkFlapping and
	// RdmaLinkDropped: FlapDowns link downs within FlapWindow are a
	// flapping link, which stays an incident for FlapHold after the last
	// window that counted them; a link down for DropAfter is a drop.
	// NVSentinel's RepeatedNICLinkFlap is 3 link downs in 10 minutes and
	// its NICPortDrop 4 minutes down; gpud keeps a flap or drop unhealthy
	// for 10 minutes after the link recovers and calls 4 minutes down a
	// drop (docs/monitoring.md).
	FlapDowns  float64        `yaml:"flap_downs"`
	FlapWindow model.Duration `yaml:"flap_window"`
	FlapHold   model.Duration `yaml:"flap_hold"`
	DropAfter  model.Duration `yaml:"drop_after"`
	// SwitchFaultLinks is how many links of one switch, down or counting
	// errors at once, are one switch fault (RdmaSwitchFault) rather than
	// that many cables. [ours]: two bad cables on one switch happen; three
	// at once point at the switch.
	SwitchFaultLinks float64 `yaml:"switch_fault_links"`
}

// Default is the configuration of the files committed in this repository.
func Default() Config {
	return Config{
		JobSelector:    `job="rdma_doctor"`,
		ClusterLabel:   "cluster",
		RunbookURLBase: "https://github.com/rdma-doctor/rdma_doctor/blob/main/docs/runbook.md#",
		RateWindow:     model.Duration(5 * time.Minute),
		Thresholds: Thresholds{
			SymbolErrorsPerHour:              10,
			LinkErrorRecoveryPerHour:         10,
			ReceiveErrorsPerHour:             10,
			TransmitDiscardsPerHour:          100,
			TransmitWaitTicksPerSecond:       1000,
			LinkDownsPerDayFlapping:          5,
			RetransmitsPerSecond:             1,
			CongestionNotificationsPerSecond: 1000,
			FabricTransmitWaitRatio:          0.1,
			ProbeBandwidthRatio:              0.9,
			ProbeLatencyLoopbackSeconds:      2e-6,
			ProbeLatencySwitchSeconds:        5e-6,
			FlapDowns:                        3,
			FlapWindow:                       model.Duration(10 * time.Minute),
			FlapHold:                         model.Duration(10 * time.Minute),
			DropAfter:                        model.Duration(4 * time.Minute),
			SwitchFaultLinks:                 3,
		},
	}
}

// Load reads a YAML config file over the defaults: a field the file
// leaves out keeps its default, an unknown field is an error (a misspelt
// threshold must not silently keep the default).
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return Parse(b)
}

// Parse is Load on the file's contents.
func Parse(b []byte) (Config, error) {
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	// An empty file (io.EOF) is all defaults.
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("mixin config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

var (
	labelName   = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	oneMatcher  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*(=|!=|=~|!~)"[^"\\]*"$`)
	runbookBase = regexp.MustCompile(`^https?://[^\s"']+$`)
)

// Validate rejects a config the generated files could not be right with,
// one clear error per problem.
func (c Config) Validate() error {
	var errs []error
	for _, m := range strings.Split(c.JobSelector, ",") {
		if !oneMatcher.MatchString(strings.TrimSpace(m)) {
			errs = append(errs, fmt.Errorf("job_selector %q: want label matchers such as job=\"rdma_doctor\"", c.JobSelector))
			break
		}
	}
	if !labelName.MatchString(c.ClusterLabel) {
		errs = append(errs, fmt.Errorf("cluster_label %q: not a Prometheus label name", c.ClusterLabel))
	}
	if !runbookBase.MatchString(c.RunbookURLBase) {
		errs = append(errs, fmt.Errorf("runbook_url_base %q: want an http(s) URL without spaces or quotes", c.RunbookURLBase))
	}
	if strings.ContainsAny(c.DiagnoseURL, "'\n") {
		errs = append(errs, fmt.Errorf("diagnose_url %q: no single quotes or newlines (it goes into a quoted annotation)", c.DiagnoseURL))
	}
	if c.RateWindow < model.Duration(time.Minute) {
		errs = append(errs, fmt.Errorf("rate_window %s: want at least 1m (four scrapes at the 15 s default interval)", c.RateWindow))
	}
	t := c.Thresholds
	for _, th := range []struct {
		name string
		v    float64
	}{
		{"symbol_errors_per_hour", t.SymbolErrorsPerHour},
		{"link_error_recovery_per_hour", t.LinkErrorRecoveryPerHour},
		{"receive_errors_per_hour", t.ReceiveErrorsPerHour},
		{"transmit_discards_per_hour", t.TransmitDiscardsPerHour},
		{"transmit_wait_ticks_per_second", t.TransmitWaitTicksPerSecond},
		{"link_downs_per_day_flapping", t.LinkDownsPerDayFlapping},
		{"retransmits_per_second", t.RetransmitsPerSecond},
		{"congestion_notifications_per_second", t.CongestionNotificationsPerSecond},
		{"probe_latency_loopback_seconds", t.ProbeLatencyLoopbackSeconds},
		{"probe_latency_switch_seconds", t.ProbeLatencySwitchSeconds},
		{"flap_downs", t.FlapDowns},
		{"switch_fault_links", t.SwitchFaultLinks},
	} {
		if !(th.v > 0) {
			errs = append(errs, fmt.Errorf("thresholds.%s %v: want a positive number", th.name, th.v))
		}
	}
	for _, d := range []struct {
		name string
		v    model.Duration
	}{
		{"flap_window", t.FlapWindow}, {"flap_hold", t.FlapHold}, {"drop_after", t.DropAfter},
	} {
		if d.v < model.Duration(time.Minute) {
			errs = append(errs, fmt.Errorf("thresholds.%s %s: want at least 1m (the rules judge it at a 1m step)", d.name, d.v))
		}
	}
	if !(t.FabricTransmitWaitRatio > 0 && t.FabricTransmitWaitRatio <= 1) {
		errs = append(errs, fmt.Errorf("thresholds.fabric_transmit_wait_ratio %v: want a ratio in (0, 1]", t.FabricTransmitWaitRatio))
	}
	if !(t.ProbeBandwidthRatio > 0 && t.ProbeBandwidthRatio <= 1) {
		errs = append(errs, fmt.Errorf("thresholds.probe_bandwidth_ratio %v: want a ratio in (0, 1]", t.ProbeBandwidthRatio))
	}
	return errors.Join(errs...)
}
