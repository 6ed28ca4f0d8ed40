// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"strconv"
	"sync"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/fabric"
)

var (
	fabricPath = kingpin.Flag("collector.fabric.iblinkinfo-path",
		"iblinkinfo executable (infiniband-diags), run as 'iblinkinfo --line' without a shell in the background.").
		Default("iblinkinfo").String()
	fabricInterval = kingpin.Flag("collector.fabric.interval", "Interval between fabric scans (each sends MADs to every port of the fabric).").Default("5m").Duration()
	fabricTimeout  = kingpin.Flag("collector.fabric.timeout", "Timeout of one fabric scan; its process group is killed after it.").Default("2m").Duration()
	fabricCA       = kingpin.Flag("collector.fabric.ca", "Local RDMA device iblinkinfo sends from (-C; default: iblinkinfo's choice).").PlaceHolder("DEVICE").String()
	fabricPort     = kingpin.Flag("collector.fabric.port", "Local port iblinkinfo sends from (-P; 0: iblinkinfo's choice).").Default("0").Int()
	fabricDegraded = kingpin.Flag("collector.fabric.degraded-only",
		"Export per-link series only for links that are degraded or not ACTIVE (the fabric-wide counts cover the rest); for very large fabrics.").Bool()
)

func init() {
	registerCollector("fabric", false, "every link of the InfiniBand fabric from iblinkinfo (background; for the SM host or any host with umad access)",
		func(env Env) (Collector, error) {
			return NewFabricCollector(env, fabric.RunnerConfig{
				Path: *fabricPath, Args: fabric.Args(*fabricCA, *fabricPort),
				Interval: *fabricInterval, Timeout: *fabricTimeout, Logger: env.Logger,
			}, *fabricDegraded), nil
		})
}

// FabricCollector exports the latest iblinkinfo scan.
type FabricCollector struct {
	runner       *fabric.Runner
	degradedOnly bool
	start        sync.Once

	success, scans, failures, duration, lastSuccess *prometheus.Desc
	links, degraded, switches, cas, ports, down     *prometheus.Desc
	malformed                                       *prometheus.Desc
	linkInfo, linkRate, linkState, linkDegraded     *prometheus.Desc
	linkCouldBe                                     *prometheus.Desc
}

// NewFabricCollector builds the fabric collector; Start starts its runner.
func NewFabricCollector(env Env, cfg fabric.RunnerConfig, degradedOnly bool) *FabricCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_fabric_"+name, help, labels, nil)
	}
	ll := []string{"guid", "port", "node", "remote_guid", "remote_port", "remote_node"}
	with := func(extra ...string) []string { return append(append([]string{}, ll...), extra...) }
	return &FabricCollector{
		runner:       fabric.NewRunner(cfg),
		degradedOnly: degradedOnly,
		success:      d("scan_success", "1 when the latest iblinkinfo scan succeeded; after a failure the previous scan's links stay exported."),
		scans:        d("scans_total", "iblinkinfo scans run."),
		failures:     d("scan_failures_total", "iblinkinfo scans that failed (timeout, no umad access, error exit, unusable output)."),
		duration:     d("scan_duration_seconds", "Duration of the latest iblinkinfo scan."),
		lastSuccess:  d("last_scan_success_timestamp_seconds", "When the exported fabric was scanned."),
		links:        d("links", "Links in the fabric (each counted once, not once per end)."),
		degraded:     d("links_degraded", "Links iblinkinfo says could run wider or faster than they do (\"Could be ...\")."),
		switches:     d("switches", "Switches in the fabric."),
		cas:          d("cas", "Channel adapters in the fabric, counted by node description."),
		ports:        d("ports", "Ports iblinkinfo reported."),
		down:         d("ports_down", "Ports iblinkinfo reported Down."),
		malformed:    d("malformed_lines", "iblinkinfo output lines skipped because they were not in its format."),
		linkInfo:     d("link_info", "A link, from its switch end (guid is the port GUID, a switch's port 0 GUID for all its ports); always 1.", with("width", "speed")...),
		linkRate:     d("link_rate_bytes_per_second", "Active data rate of the link, counted as the kernel's rate file does (4X HDR is 200 Gb/s).", ll...),
		linkState:    d("link_state", "Logical state of the link: 2 INIT, 3 ARMED, 4 ACTIVE (INIT: no SM has brought it up).", ll...),
		linkDegraded: d("link_degraded", "1 when iblinkinfo says the link could run wider or faster: both ends support more than it trained at.", ll...),
		linkCouldBe:  d("link_could_be_info", "What iblinkinfo says a degraded link could run at (empty when only the other one is below); always 1.", with("width", "speed")...),
	}
}

// Start starts the background scans (once).
func (c *FabricCollector) Start(ctx context.Context) {
	c.start.Do(func() { go c.runner.Run(ctx) })
}

// Runner is the iblinkinfo runner, for diagnose.
func (c *FabricCollector) Runner() *fabric.Runner { return c.runner }

// Update exports the latest scan; it never waits for one. A failed scan is
// a metric and a log line (the runner's), not a scrape error.
func (c *FabricCollector) Update(_ context.Context, ch chan<- prometheus.Metric) error {
	st := c.runner.Status()
	counter(ch, c.scans, float64(st.Scans))
	counter(ch, c.failures, float64(st.Failures))
	if st.Scans > 0 {
		gauge(ch, c.success, b2f(st.OK))
		gauge(ch, c.duration, st.Duration.Seconds())
	}
	f := st.Fabric
	if f == nil {
		return nil
	}
	gauge(ch, c.lastSuccess, float64(st.LastSuccess.UnixNano())/1e9)
	gauge(ch, c.links, float64(len(f.Links)))
	gauge(ch, c.degraded, float64(f.Degraded()))
	gauge(ch, c.switches, float64(f.Switches))
	gauge(ch, c.cas, float64(f.CAs))
	gauge(ch, c.ports, float64(f.Ports))
	gauge(ch, c.down, float64(f.DownPorts))
	gauge(ch, c.malformed, float64(f.Malformed))
	for i := range f.Links {
		l := &f.Links[i]
		if c.degradedOnly && !l.Degraded() && l.State == 4 {
			continue
		}
		lv := []string{l.A.GUIDString(), strconv.Itoa(l.A.Port), l.A.Desc, l.B.GUIDString(), strconv.Itoa(l.B.Port), l.B.Desc}
		speed := l.Speed
		if speed == "" {
			speed = l.SpeedText // a speed this version does not name
		}
		gauge(ch, c.linkInfo, 1, append(lv, strconv.Itoa(l.Width)+"X", speed)...)
		if r, ok := l.Rate(); ok {
			gauge(ch, c.linkRate, r.BytesPerSecond(), lv...)
		}
		gauge(ch, c.linkState, float64(l.State), lv...)
		gauge(ch, c.linkDegraded, b2f(l.Degraded()), lv...)
		if l.Degraded() {
			gauge(ch, c.linkCouldBe, 1, append(lv, l.CouldBeWidth, l.CouldBeSpeed)...)
		}
	}
	return nil
}
