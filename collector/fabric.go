// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// FabricCollector exports the latest iblinkinfo scan and the latest
// counter sweep over it, the host's background sources
// (host.Snapshot.FabricScan, FabricSweep).
type FabricCollector struct {
	degradedOnly bool
	opts         FabricOptions
	routes       *fabricRoutes // fabric_routes.go

	// portBlock is the per-port series of the latest topology and sweep,
	// rendered once per pair (internal/serve/expo.Block), like the link block.
	portMu    sync.Mutex
	portScan  *fabric.Fabric
	portSweep *fabric.Sweep
	portBlock *expo.Block

	portState, portPhys, nodeInfo, portUnknown, portSaturated *expo.Desc
	portCounters                                              [fabric.NumCounters]*expo.Desc
	sweepSuccess, sweepDuration, sweepLastSuccess             *expo.Desc
	sweepPorts, sweepUnknown, sweepRuns, sweepFailures        *expo.Desc
	sweepSkipped, sweepRunning                                *expo.Desc

	// block is the per-link series of the latest scan, rendered once per
	// scan (40k links are 160k series: building them every scrape cost a
	// second of CPU).
	blockMu   sync.Mutex
	blockScan *fabric.Fabric
	block     *expo.Block

	success, scans, failures, duration, lastSuccess *expo.Desc
	links, degraded, switches, cas, ports, down     *expo.Desc
	malformed                                       *expo.Desc
	linkInfo, linkRate, linkState, linkDegraded     *expo.Desc
	linkCouldBe                                     *expo.Desc
}

func fabricSpec() Spec {
	return Spec{Name: "fabric", Default: false,
		Help: "every link of the InfiniBand fabric from iblinkinfo (background; for the SM host or any host with umad access)",
		Flags: func(app *kingpin.Application, f *Flags) {
			o := &f.Fabric
			app.Flag("collector.fabric.iblinkinfo-path",
				"iblinkinfo executable (infiniband-diags), run as 'iblinkinfo --line' without a shell in the background.").
				Default("iblinkinfo").StringVar(&o.Path)
			app.Flag("collector.fabric.interval", "Interval between fabric scans (each sends MADs to every port of the fabric).").Default("5m").DurationVar(&o.Interval)
			app.Flag("collector.fabric.timeout", "Timeout of one fabric scan; its process group is killed after it.").Default("2m").DurationVar(&o.Timeout)
			app.Flag("collector.fabric.ca", "Local RDMA device iblinkinfo sends from (-C; default: iblinkinfo's choice).").PlaceHolder("DEVICE").StringVar(&o.CA)
			app.Flag("collector.fabric.port", "Local port iblinkinfo sends from (-P; 0: iblinkinfo's choice).").Default("0").IntVar(&o.Port)
			app.Flag("collector.fabric.degraded-only",
				"Export per-link series only for links that are degraded or not ACTIVE (the fabric-wide counts cover the rest); for very large fabrics.").BoolVar(&o.DegradedOnly)
			app.Flag("collector.fabric.counters",
				"Sweep every switch port's PMA counters in the background with two ibqueryerrors runs against a fabric cache that ibnetdiscover writes when the fabric's nodes change (never resets counters).").
				Default("true").BoolVar(&o.Counters)
			app.Flag("collector.fabric.ibqueryerrors-path", "ibqueryerrors executable (infiniband-diags), run without a shell.").
				Default("ibqueryerrors").StringVar(&o.IBQueryErrorsPath)
			app.Flag("collector.fabric.ibnetdiscover-path", "ibnetdiscover executable (infiniband-diags), run without a shell to write the fabric cache the sweeps read against.").
				Default("ibnetdiscover").StringVar(&o.IBNetDiscoverPath)
			app.Flag("collector.fabric.sminfo-path", "sminfo executable (infiniband-diags), run without a shell before and after each counter sweep: a sweep across a change of master SM (its LIDs may name other nodes) is unknown, and the fabric cache is discovered again.").
				Default("sminfo").StringVar(&o.SMInfoPath)
			app.Flag("collector.fabric.cache-dir", "Writable directory for the fabric cache and threshold file of the counter sweep (default: a private directory under $TMPDIR).").
				PlaceHolder("DIR").StringVar(&o.CacheDir)
			app.Flag("collector.fabric.counters-interval",
				"Interval between counter sweeps; a sweep still running when the next is due makes that one skipped (counted), never stacked.").
				Default("1m").DurationVar(&o.CountersInterval)
			app.Flag("collector.fabric.counters-timeout", "Deadline of one counter sweep, its ibnetdiscover and ibqueryerrors runs together: a run still going then is killed with its process group, the sweep ends there and its ports are unknown.").
				Default("2m").DurationVar(&o.CountersTimeout)
			app.Flag("collector.fabric.routes",
				"Read every swept switch's unicast forwarding table in the background with one dump_fts run (rdma_fabric_port_routes, the fabric.routing check), again when the scan's nodes, LIDs or port states change.").
				Default("true").BoolVar(&o.Routes)
			app.Flag("collector.fabric.dump-fts-path", "dump_fts executable (infiniband-diags; what dump_lfts.sh runs), run without a shell.").
				Default("dump_fts").StringVar(&o.DumpFTSPath)
			app.Flag("collector.fabric.routes-max-age", "Read the forwarding tables again at least this often even when the scan shows no change (the SM may reroute on its own).").
				Default("15m").DurationVar(&o.RoutesMaxAge)
			app.Flag("collector.fabric.ca-counters",
				"Sweep channel-adapter ports too (hosts running rdma_doctor export their own side from sysfs).").BoolVar(&o.CACounters)
			app.Flag("collector.fabric.shard",
				"I/N: sweep and export only the nodes whose GUID falls in shard I of N, so N exporters split the fabric and their union covers each switch exactly once.").
				Default("0/1").StringVar(&o.ShardSpec)
			app.Flag("collector.fabric.port-series",
				"Per-port counter series: all; errors (no data and packet counters); erroring-ports (counters only for ports with errors). State and unknown series stay for every port.").
				Default(PortSeriesAll).EnumVar(&o.PortSeries, PortSeriesAll, PortSeriesErrors, PortSeriesErroringPorts)
			app.Flag("collector.fabric.node-name-map",
				"infiniband-diags node name map (lines of 0xGUID \"name\", as ibnetdiscover, iblinkinfo and ibqueryerrors take it): its names replace the node descriptions in every fabric series' node labels and in the fabric findings. Read once at start-up: a changed file needs a restart.").
				PlaceHolder("FILE").StringVar(&o.NodeNameMap)
		},
		New: func(env Env, f *Flags) (Collector, error) {
			opts, err := f.Fabric.validated()
			if err != nil {
				return nil, err
			}
			return NewFabricCollector(env, opts), nil
		}}
}

// FabricOptions are the fabric flags: the scan and sweep the host runs
// (host.Options.Fabric, its Shard and Shards parsed from ShardSpec), and
// how the fabric collector renders them.
type FabricOptions struct {
	host.FabricOptions
	DegradedOnly bool
	// ShardSpec is "I/N", parsed into Shard and Shards.
	ShardSpec string
	// PortSeries trims the per-port series (PortSeries*).
	PortSeries string
	// NodeNameMap is the node name map file, read into
	// host.FabricOptions.Names by HostFabric.
	NodeNameMap string
}

// The values of --collector.fabric.port-series.
const (
	// PortSeriesAll: every counter of every swept port.
	PortSeriesAll = "all"
	// PortSeriesErrors: error counters and XmitWait (no data and packet
	// counters) of every swept port.
	PortSeriesErrors = "errors"
	// PortSeriesErroringPorts: counters only for ports with a non-zero
	// error counter or a saturated field; the others keep their state and
	// unknown series.
	PortSeriesErroringPorts = "erroring-ports"
)

// validated checks and completes the fabric options.
func (o FabricOptions) validated() (FabricOptions, error) {
	i, n, err := ParseShard(o.ShardSpec)
	if err != nil {
		return o, err
	}
	o.Shard, o.Shards = i, n
	switch o.PortSeries {
	case PortSeriesAll, PortSeriesErrors, PortSeriesErroringPorts:
	default:
		return o, fmt.Errorf("--collector.fabric.port-series must be %s, %s or %s, not %q", PortSeriesAll, PortSeriesErrors, PortSeriesErroringPorts, o.PortSeries)
	}
	return o, nil
}

// ParseShard parses --collector.fabric.shard's "I/N" (0 <= I < N).
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--collector.fabric.shard %q: want I/N with 0 <= I < N (e.g. 0/2 and 1/2 for two exporters)", s)
	}
	return i, n, nil
}

// HostFabric is the fabric scan and sweep the flags ask of the host: nil,
// neither run, with the fabric collector off.
func (f *Flags) HostFabric() (*host.FabricOptions, error) {
	if !f.Enabled("fabric") {
		return nil, nil
	}
	o, err := f.Fabric.validated()
	if err != nil {
		return nil, err
	}
	if o.NodeNameMap != "" {
		if o.Names, err = fabric.LoadNameMap(o.NodeNameMap); err != nil {
			return nil, fmt.Errorf("--collector.fabric.node-name-map: %w", err)
		}
	}
	return &o.FabricOptions, nil
}

// NewFabricCollector builds the fabric collector over env's host, whose
// options run the scan and the sweep; opts are how it renders them
// (their shard and CA counters must be the host's).
func NewFabricCollector(env Env, opts FabricOptions) *FabricCollector {
	ll := []string{"guid", "port", "node", "remote_guid", "remote_port", "remote_node"}
	with := func(extra ...string) []string { return append(append([]string{}, ll...), extra...) }
	pl := []string{"guid", "port"}
	c := &FabricCollector{
		degradedOnly: opts.DegradedOnly,
		opts:         opts,
		routes:       newFabricRoutes(),
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

		portState:        desc("rdma_fabric_port_state", "Logical state of a switch port from the latest fabric scan: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE.", pl...),
		portPhys:         desc("rdma_fabric_port_physical_state", "Physical state of a switch port from the latest fabric scan, as rdma_port_physical_state (5 LinkUp).", pl...),
		nodeInfo:         desc("rdma_fabric_node_info", "A swept node: its node description and type (switch or ca); always 1.", "guid", "node", "node_type"),
		portUnknown:      desc("rdma_fabric_port_counters_unknown", "1 when the latest counter sweep could not read this port: its counter series are absent for that sweep, never zeros.", pl...),
		portSaturated:    desc("rdma_fabric_port_counter_saturated", "1 when a fixed-width PMA counter of the port is pinned at its maximum and has stopped counting.", "guid", "port", "counter"),
		sweepSuccess:     desc("rdma_fabric_counter_sweep_success", "1 when the latest counter sweep read every port it swept and no tool run reported an error."),
		sweepDuration:    desc("rdma_fabric_counter_sweep_duration_seconds", "Duration of the latest counter sweep."),
		sweepLastSuccess: desc("rdma_fabric_counter_sweep_last_success_timestamp_seconds", "Start of the latest counter sweep that read every port."),
		sweepPorts:       desc("rdma_fabric_counter_sweep_ports", "Ports the latest counter sweep covered (this shard's)."),
		sweepUnknown:     desc("rdma_fabric_counter_sweep_ports_unknown", "Ports the latest counter sweep could not read."),
		sweepRuns:        desc("rdma_fabric_counter_sweep_runs_total", "Counter sweeps completed."),
		sweepFailures:    desc("rdma_fabric_counter_sweep_failures_total", "Sweep tool runs (ibnetdiscover, ibqueryerrors) that failed or left ports unknown, by reason.", "reason"),
		sweepSkipped:     desc("rdma_fabric_counter_sweep_skipped_total", "Counter sweeps skipped because the previous one was still running; its ports read unknown until it ends."),
		sweepRunning:     desc("rdma_fabric_counter_sweep_in_progress_seconds", "Seconds the counter sweep now running has run; 0 when none runs."),
	}
	for id, ctr := range fabric.Counters {
		c.portCounters[id] = desc("rdma_fabric_port_"+ctr.Spec.Metric, strings.TrimSuffix(ctr.Spec.Help, ".")+", switch side (PMA "+ctr.Field+").", pl...)
	}
	// The series are rendered as each sweep ends: the sweep's cost, not
	// the next scrape's.
	env.Host.OnFabricSweep(func(sw *fabric.Sweep) {
		if st := env.Host.Snapshot().FabricScan(context.Background()); st != nil && st.Fabric != nil {
			c.linkBlock(st.Fabric)
			c.portMetricsBlock(st.Fabric, sw)
		}
	})
	return c
}

// Update exports the latest scan; it never waits for one. A failed latest
// scan is rdma_fabric_scan_success 0 and an error of the collector: what
// it exports is then the previous scan's fabric or nothing, and the
// collector is on only where it was asked for, so a scan that cannot run
// is a fault to fix, not how the host is.
func (c *FabricCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	st := snap.FabricScan(ctx)
	if st == nil {
		return nil // no scan runs (no loop)
	}
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
	// Every shard scans the whole fabric; its fabric-wide counts come
	// from shard 0 alone, so a sum over the exporters, or an alert on
	// them, counts each fabric once.
	if c.opts.Shard == 0 {
		gauge(out, c.links, float64(len(f.Links)))
		gauge(out, c.degraded, float64(f.Degraded()))
		gauge(out, c.switches, float64(f.Switches))
		gauge(out, c.cas, float64(f.CAs))
		gauge(out, c.ports, float64(f.Ports))
		gauge(out, c.down, float64(f.DownPorts))
		gauge(out, c.malformed, float64(f.Malformed))
	}
	out.add(c.linkBlock(f))
	var sw *fabric.Sweep
	if sst := snap.FabricSweep(ctx); sst != nil {
		if serr := c.sweepHealth(out, *sst, snap.Time); err == nil {
			err = serr
		}
		sw = sst.Last
	}
	out.add(c.portMetricsBlock(f, sw))
	if rerr := c.routes.update(ctx, snap, out); err == nil {
		err = rerr
	}
	return err
}

// sweepHealth exports the sweep's own series. A sweep that read none of
// its ports is an error of the collector (the tools missing, no umad
// access, no PMA answering): like a failed scan, a fault to fix; a partial
// one is rdma_fabric_counter_sweep_success 0 and the unknown ports.
func (c *FabricCollector) sweepHealth(out *sink, st fabric.SweepStatus, now time.Time) error {
	counter(out, c.sweepRuns, float64(st.Sweeps))
	counter(out, c.sweepSkipped, float64(st.Skipped))
	running := 0.0
	if !st.Running.IsZero() {
		running = max(now.Sub(st.Running).Seconds(), 0)
	}
	gauge(out, c.sweepRunning, running)
	for _, r := range fabric.Reasons {
		counter(out, c.sweepFailures, float64(st.Failures[r]), string(r))
	}
	sw := st.Last
	if sw == nil {
		return nil
	}
	gauge(out, c.sweepSuccess, b2f(sw.OK()))
	gauge(out, c.sweepDuration, sw.Duration.Seconds())
	gauge(out, c.sweepPorts, float64(len(sw.Ports)))
	gauge(out, c.sweepUnknown, float64(sw.Unknown))
	if !st.LastSuccess.IsZero() {
		gauge(out, c.sweepLastSuccess, float64(st.LastSuccess.UnixNano())/1e9)
	}
	if sw.Overrun {
		return fmt.Errorf("counter sweep running for %s, past its interval: its %d ports are unknown until it ends", now.Sub(sw.Start).Round(time.Second), len(sw.Ports))
	}
	if len(sw.Ports) > 0 && sw.Unknown == len(sw.Ports) {
		return fmt.Errorf("counter sweep read none of %d ports (failures %v)", len(sw.Ports), sw.Failures)
	}
	return nil
}

// portMetricsBlock returns the per-port series of a topology and the
// latest sweep, rendered on their first scrape.
func (c *FabricCollector) portMetricsBlock(f *fabric.Fabric, sw *fabric.Sweep) *expo.Block {
	c.portMu.Lock()
	defer c.portMu.Unlock()
	if c.portBlock == nil || c.portScan != f || c.portSweep != sw {
		c.portScan, c.portSweep = f, sw
		c.portBlock = expo.NewBlock(c.portBuilds(f, sw)...)
	}
	return c.portBlock
}

// portBuilds returns the per-port series of a topology and a sweep, a
// build per family or two (expo.NewBlock renders them one at a time).
// State comes from the topology scan for every port of this shard's nodes
// (down ones included); counters from the sweep, which may have used an
// earlier scan.
func (c *FabricCollector) portBuilds(f *fabric.Fabric, sw *fabric.Sweep) []func() []prometheus.Metric {
	builds := []func() []prometheus.Metric{func() []prometheus.Metric { return c.portStates(f) }}
	if sw == nil {
		return builds
	}
	// Each port's label values, formatted once for the families that
	// all carry them (and kept with the Block for a protobuf scrape), and
	// whether erroring-ports keeps its counters, judged once.
	labels := make([]portLabels, len(sw.Ports))
	for i := range sw.Ports {
		p := &sw.Ports[i]
		labels[i] = portLabels{p.GUIDString(), strconv.Itoa(p.Port),
			c.opts.PortSeries != PortSeriesErroringPorts || p.HasErrors() || anySaturated(p)}
	}
	builds = append(builds, func() []prometheus.Metric {
		out := make([]prometheus.Metric, 0, len(sw.Ports))
		for i := range sw.Ports {
			out = append(out, expo.Gauge(c.portUnknown, b2f(sw.Ports[i].Unknown), labels[i].guid, labels[i].port))
		}
		return out
	})
	for id := range fabric.Counters {
		builds = append(builds, func() []prometheus.Metric {
			return c.counterSeries(sw, labels, fabric.CounterID(id))
		})
	}
	return append(builds, func() []prometheus.Metric { return c.saturatedSeries(sw, labels) })
}

// portLabels are a swept port's guid and port label values, and whether
// the port-series flag keeps its counter series at all.
type portLabels struct {
	guid, port string
	counters   bool
}

// portStates is the node info and each port's state, from the scan.
func (c *FabricCollector) portStates(f *fabric.Fabric) []prometheus.Metric {
	var out []prometheus.Metric
	var lastNode uint64
	first := true
	for i := range f.PortLines {
		p := &f.PortLines[i]
		if p.Port == 0 || !p.Switch && !c.opts.CACounters || !c.inShard(p.GUID) {
			continue
		}
		g, pn := p.GUIDString(), strconv.Itoa(p.Port)
		if first || p.GUID != lastNode {
			typ := "ca"
			if p.Switch {
				typ = "switch"
			}
			out = append(out, expo.Gauge(c.nodeInfo, 1, g, p.Desc, typ))
			first, lastNode = false, p.GUID
		}
		out = append(out, expo.Gauge(c.portState, float64(p.State), g, pn))
		if p.PhysState != 0 {
			out = append(out, expo.Gauge(c.portPhys, float64(p.PhysState), g, pn))
		}
	}
	return out
}

// exported reports whether counter id of swept port p (with its labels)
// has a series, as the port-series flag trims them.
func (c *FabricCollector) exported(p *fabric.PortCounters, l portLabels, id fabric.CounterID) bool {
	if !l.counters || c.opts.PortSeries == PortSeriesErrors && !fabric.Counters[id].Error && id != fabric.TransmitWait {
		return false
	}
	return p.Values[id].Present
}

// counterSeries is counter id of every swept port.
func (c *FabricCollector) counterSeries(sw *fabric.Sweep, labels []portLabels, id fabric.CounterID) []prometheus.Metric {
	var out []prometheus.Metric
	for i := range sw.Ports {
		p := &sw.Ports[i]
		if !c.exported(p, labels[i], id) {
			continue
		}
		val, _ := p.Scaled(id)
		out = append(out, expo.Counter(c.portCounters[id], val, labels[i].guid, labels[i].port))
	}
	return out
}

// saturatedSeries flags each fixed-width counter of every swept port.
func (c *FabricCollector) saturatedSeries(sw *fabric.Sweep, labels []portLabels) []prometheus.Metric {
	var out []prometheus.Metric
	for i := range sw.Ports {
		p := &sw.Ports[i]
		for id, ctr := range fabric.Counters {
			if v := p.Values[id]; c.exported(p, labels[i], fabric.CounterID(id)) && v.FixedWidth() {
				out = append(out, expo.Gauge(c.portSaturated, b2f(v.Saturated()), labels[i].guid, labels[i].port, ctr.Spec.File))
			}
		}
	}
	return out
}

// inShard reports whether this exporter exports the node guid's series.
func (c *FabricCollector) inShard(guid uint64) bool {
	return fabric.ShardOf(guid, c.opts.Shards) == c.opts.Shard
}

func anySaturated(p *fabric.PortCounters) bool {
	for _, v := range p.Values {
		if v.Saturated() {
			return true
		}
	}
	return false
}

// linkBlock returns the per-link series of a scan, rendered on its first
// scrape.
func (c *FabricCollector) linkBlock(f *fabric.Fabric) *expo.Block {
	c.blockMu.Lock()
	defer c.blockMu.Unlock()
	if c.block == nil || c.blockScan != f {
		c.blockScan = f
		c.block = expo.NewBlock(func() []prometheus.Metric { return c.linkMetrics(f) })
	}
	return c.block
}

// linkMetrics returns the per-link series of a scan.
func (c *FabricCollector) linkMetrics(f *fabric.Fabric) []prometheus.Metric {
	var out []prometheus.Metric
	add := func(d *expo.Desc, v float64, labels ...string) {
		out = append(out, expo.Gauge(d, v, labels...))
	}
	for i := range f.Links {
		l := &f.Links[i]
		if c.degradedOnly && !l.Degraded() && l.State == 4 || !c.inShard(l.A.GUID) {
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
	return out
}
