// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/expo"
	"github.com/rdma-doctor/rdma_doctor/internal/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
)

// FabricCollector exports the latest iblinkinfo scan.
type FabricCollector struct {
	runner       *fabric.Runner
	degradedOnly bool
	start        sync.Once

	// links is the per-link block of the latest scan, built once per scan
	// (40k links are 160k series: building them every scrape cost a second
	// of CPU); const metrics are immutable, so every scrape resends them.
	blockMu   sync.Mutex
	blockScan *fabric.Fabric
	block     []prometheus.Metric

	success, scans, failures, duration, lastSuccess *expo.Desc
	links, degraded, switches, cas, ports, down     *expo.Desc
	malformed                                       *expo.Desc
	linkInfo, linkRate, linkState, linkDegraded     *expo.Desc
	linkCouldBe                                     *expo.Desc
}

// NewFabricCollector builds the fabric collector; Start starts its runner.
func NewFabricCollector(env Env, cfg fabric.RunnerConfig, degradedOnly bool) *FabricCollector {
	ll := []string{"guid", "port", "node", "remote_guid", "remote_port", "remote_node"}
	with := func(extra ...string) []string { return append(append([]string{}, ll...), extra...) }
	return &FabricCollector{
		runner:       fabric.NewRunner(cfg),
		degradedOnly: degradedOnly,
		success:      desc("rdma_fabric_scan_success", "1 when the latest iblinkinfo scan succeeded; after a failure the previous scan's links stay exported."),
		scans:        desc("rdma_fabric_scans_total", "iblinkinfo scans run."),
		failures:     desc("rdma_fabric_scan_failures_total", "iblinkinfo scans that failed (timeout, no umad access, error exit, unusable output)."),
		duration:     desc("rdma_fabric_scan_duration_seconds", "Duration of the latest iblinkinfo scan."),
		lastSuccess:  desc("rdma_fabric_last_scan_success_timestamp_seconds", "When the exported fabric was scanned."),
		links:        desc("rdma_fabric_links", "Links in the fabric (each counted once, not once per end)."),
		degraded:     desc("rdma_fabric_links_degraded", "Links iblinkinfo says could run wider or faster than they do (\"Could be ...\")."),
		switches:     desc("rdma_fabric_switches", "Switches in the fabric."),
		cas:          desc("rdma_fabric_cas", "Channel adapters in the fabric, counted by GUID (node descriptions are not unique)."),
		ports:        desc("rdma_fabric_ports", "Ports iblinkinfo reported."),
		down:         desc("rdma_fabric_ports_down", "Ports iblinkinfo reported Down."),
		malformed:    desc("rdma_fabric_malformed_lines", "iblinkinfo output lines skipped because they were not in its format."),
		linkInfo:     desc("rdma_fabric_link_info", "A link, from its switch end (guid is the port GUID, a switch's port 0 GUID for all its ports); always 1.", with("width", "speed")...),
		linkRate:     desc("rdma_fabric_link_rate_bytes_per_second", "Active data rate of the link, counted as the kernel's rate file does (4X HDR is 200 Gb/s).", ll...),
		linkState:    desc("rdma_fabric_link_state", "Logical state of the link: 2 INIT, 3 ARMED, 4 ACTIVE (INIT: no SM has brought it up).", ll...),
		linkDegraded: desc("rdma_fabric_link_degraded", "1 when iblinkinfo says the link could run wider or faster: both ends support more than it trained at.", ll...),
		linkCouldBe:  desc("rdma_fabric_link_could_be_info", "What iblinkinfo says a degraded link could run at (empty when only the other one is below); always 1.", with("width", "speed")...),
	}
}

// Start starts the background scans (once).
func (c *FabricCollector) Start(ctx context.Context) {
	c.start.Do(func() { go c.runner.Run(ctx) })
}

// Runner is the iblinkinfo runner, for diagnose.
func (c *FabricCollector) Runner() *fabric.Runner { return c.runner }

// Update exports the latest scan; it never waits for one. A failed latest
// scan is rdma_fabric_scan_success 0 and an error of the collector: what
// it exports is then the previous scan's fabric or nothing, and the
// collector is on only where it was asked for, so a scan that cannot run
// is a fault to fix, not how the host is.
func (c *FabricCollector) Update(_ context.Context, _ *host.Snapshot, out *sink) error {
	st := c.runner.Status()
	counter(out, c.scans, float64(st.Scans))
	counter(out, c.failures, float64(st.Failures))
	var err error
	if st.Scans > 0 {
		gauge(out, c.success, b2f(st.OK))
		gauge(out, c.duration, st.Duration.Seconds())
		if !st.OK && st.Err != nil {
			err = fmt.Errorf("iblinkinfo scan: %w", st.Err)
		}
	}
	f := st.Fabric
	if f == nil {
		return err
	}
	gauge(out, c.lastSuccess, float64(st.LastSuccess.UnixNano())/1e9)
	gauge(out, c.links, float64(len(f.Links)))
	gauge(out, c.degraded, float64(f.Degraded()))
	gauge(out, c.switches, float64(f.Switches))
	gauge(out, c.cas, float64(f.CAs))
	gauge(out, c.ports, float64(f.Ports))
	gauge(out, c.down, float64(f.DownPorts))
	gauge(out, c.malformed, float64(f.Malformed))
	for _, m := range c.linkMetrics(f) {
		out.add(m)
	}
	return err
}

// linkMetrics returns the per-link series of a scan, built on its first
// scrape.
func (c *FabricCollector) linkMetrics(f *fabric.Fabric) []prometheus.Metric {
	c.blockMu.Lock()
	defer c.blockMu.Unlock()
	if c.blockScan == f {
		return c.block
	}
	var out []prometheus.Metric
	add := func(d *expo.Desc, v float64, labels ...string) {
		out = append(out, expo.Gauge(d, v, labels...))
	}
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
		add(c.linkInfo, 1, append(lv, strconv.Itoa(l.Width)+"X", speed)...)
		if r, ok := l.Rate(); ok {
			add(c.linkRate, r.BytesPerSecond(), lv...)
		}
		add(c.linkState, float64(l.State), lv...)
		add(c.linkDegraded, b2f(l.Degraded()), lv...)
		if l.Degraded() {
			add(c.linkCouldBe, 1, append(lv, l.CouldBeWidth, l.CouldBeSpeed)...)
		}
	}
	c.blockScan, c.block = f, out
	return out
}
