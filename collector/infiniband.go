// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type infinibandCollector struct {
	cfg *config.Config

	deviceInfo, nodeDesc, hwCounterDevice             *expo.Desc
	portInfo, state, physState, rate, width, expected *expo.Desc
	degraded, lid, smLID, smSL, lmc, capMask          *expo.Desc
	hwCounterPort, otherCounter, saturated            *expo.Desc
	counters                                          map[string]*expo.Desc
	// hasSM is the subnet manager family's sysfs part: it is derived from
	// the state, phys_state, sm_lid and link_layer read here (sm.go).
	hasSM *expo.Desc
}

func infinibandSpec() Spec {
	return Spec{Name: "infiniband", Default: true,
		Help: "devices, ports, link rate and width, PMA counters and hw_counters from /sys/class/infiniband",
		Flags: func(app *kingpin.Application, f *Flags) {
			o := &f.Infiniband
			app.Flag("collector.infiniband.device-include",
				"Regexp of RDMA devices to read (default: all). Mutually exclusive with device-exclude.").PlaceHolder("REGEXP").StringVar(&o.DeviceInclude)
			app.Flag("collector.infiniband.device-exclude",
				"Regexp of RDMA devices never to read (restricted ConnectX-7 functions flood the kernel log when read). Mutually exclusive with device-include.").PlaceHolder("REGEXP").StringVar(&o.DeviceExclude)
		},
		New: func(env Env, _ *Flags) (Collector, error) { return NewInfinibandCollector(env), nil }}
}

// InfinibandOptions select the RDMA devices every source reads, not only
// this collector (host.DeviceFilter).
type InfinibandOptions struct {
	DeviceInclude, DeviceExclude string
}

// Devices is the device filter the flags give.
func (o InfinibandOptions) Devices() (host.DeviceFilter, error) {
	return host.NewDeviceFilter(o.DeviceInclude, o.DeviceExclude)
}

// NewInfinibandCollector builds the infiniband collector.
func NewInfinibandCollector(env Env) Collector {
	pl := []string{"device", "port"}
	c := &infinibandCollector{
		cfg: env.Config,
		deviceInfo: desc("rdma_device_info", "RDMA device attributes; always 1.",
			[]string{"device", "hca_type", "board_id", "fw_ver", "hw_rev", "node_guid", "sys_image_guid", "node_type"}...),
		nodeDesc:        desc("rdma_device_node_description_info", "RDMA device node description (node_desc); always 1.", []string{"device", "node_desc"}...),
		hwCounterDevice: desc("rdma_device_hw_counter_total", "Device-level driver hardware counter (hw_counters/).", []string{"device", "counter"}...),
		portInfo: desc("rdma_port_info", "RDMA port attributes (link layer, speed, width, port GUID); always 1.",
			[]string{"device", "port", "link_layer", "netdev", "speed", "width", "port_guid"}...),
		state:     desc("rdma_port_state", "Port logical state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.", pl...),
		physState: desc("rdma_port_physical_state", "Port physical state: 1 Sleep, 2 Polling, 3 Disabled, 4 Training, 5 LinkUp, 6 LinkErrorRecovery, 7 PhyTest.", pl...),
		rate:      desc("rdma_port_rate_bytes_per_second", "Active link rate.", pl...),
		width:     desc("rdma_port_link_width_lanes", "Active link width in lanes.", pl...),
		expected:  desc("rdma_port_expected_rate_bytes_per_second", "Rate the port is expected to run at, from the config file or the board_id table; absent when unknown.", pl...),
		degraded:  desc("rdma_port_link_degraded", "1 when the expected rate is known and the active rate is below it.", pl...),
		lid:       desc("rdma_port_lid", "Port base LID (0 on RoCE and unconfigured ports).", pl...),
		smLID:     desc("rdma_port_sm_lid", "LID of the subnet manager the port knows (0 on RoCE and without SM).", pl...),
		smSL:      desc("rdma_port_sm_sl", "Service level for talking to the subnet manager.", pl...),
		lmc:       desc("rdma_port_lmc", "LID mask count (LMC) from lid_mask_count.", pl...),
		capMask:   desc("rdma_port_capability_mask", "Port capability mask (cap_mask).", pl...),
		hwCounterPort: desc("rdma_port_hw_counter_total", "Port driver hardware counter (ports/N/hw_counters/), any driver.",
			[]string{"device", "port", "counter"}...),
		otherCounter: desc("rdma_port_pma_extra_total", "PMA counter file (counters/) rdma_doctor has no dedicated metric for.",
			[]string{"device", "port", "counter"}...),
		saturated: desc("rdma_port_counter_saturated", "1 when a fixed-width PMA counter is pinned at its maximum and has stopped counting.",
			[]string{"device", "port", "counter"}...),
		counters: map[string]*expo.Desc{},
		hasSM:    desc("rdma_sm_port_has_sm", "1 when a subnet manager has swept this InfiniBand port, 0 when its link is up but it knows no SM.", pl...),
	}
	for _, s := range infiniband.Counters {
		c.counters[s.File] = desc("rdma_port_"+s.Metric, s.Help, pl...)
	}
	return c
}

func (c *infinibandCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	class, err := snap.Class(ctx)
	if err != nil {
		if errors.Is(err, infiniband.ErrNoClass) {
			return nil // no RDMA on this host: nothing to report, nothing wrong
		}
		if class == nil {
			return err
		}
	}
	for i := range class.Devices {
		c.device(out, &class.Devices[i])
	}
	c.hwCounters(out, class.Devices)
	return errors.Join(append(class.Errors(), err)...)
}

// hwCounters adds the device and port hw counters. Their families sort
// by the counter label first, so they are sent counter by counter,
// every device's (or port's) value of one counter after another, where
// every device (or port) has the same counters: the family then arrives
// in order. Sent device by device, each device's counters were a run
// of their own that the exposition merged (expo.Family.sorted).
func (c *infinibandCollector) hwCounters(s *sink, devs []infiniband.Device) {
	var labs [][]string
	var sets [][]infiniband.Counter
	for i := range devs {
		d := &devs[i]
		labs = append(labs, labelPairs(d.Name, "", d.HWCounters))
		sets = append(sets, d.HWCounters)
	}
	counterMajor(s, c.hwCounterDevice, 2, labs, sets)
	labs, sets = labs[:0], sets[:0]
	for i := range devs {
		d := &devs[i]
		for j := range d.Ports {
			p := &d.Ports[j]
			labs = append(labs, labelPairs(d.Name, strconv.Itoa(p.Num), p.HWCounters))
			sets = append(sets, p.HWCounters)
		}
	}
	counterMajor(s, c.hwCounterPort, 3, labs, sets)
}

// counterMajor sends the counters of sets, each with its label values
// (width a counter, in labs), counter by counter when every set names
// the same counters in the same order, set by set otherwise.
func counterMajor(s *sink, d *expo.Desc, width int, labs [][]string, sets [][]infiniband.Counter) {
	if len(sets) == 0 {
		return // no device, or no port: nothing to send
	}
	lab := func(k, i int) []string { return labs[k][width*i : width*i+width : width*i+width] }
	if !sameCounters(sets) {
		for k, cs := range sets {
			for i, hc := range cs {
				s.counter(d, float64(hc.Value), lab(k, i)...)
			}
		}
		return
	}
	for i := range sets[0] {
		for k, cs := range sets {
			s.counter(d, float64(cs[i].Value), lab(k, i)...)
		}
	}
}

// sameCounters reports whether every set names the same counters in the
// same order (a failed read leaves one out of its set).
func sameCounters(sets [][]infiniband.Counter) bool {
	for _, cs := range sets[min(1, len(sets)):] {
		if len(cs) != len(sets[0]) {
			return false
		}
		for i := range cs {
			if cs[i].Name != sets[0][i].Name {
				return false
			}
		}
	}
	return true
}

func gauge(out *sink, d *expo.Desc, v float64, labels ...string) { out.gauge(d, v, labels...) }

func counter(out *sink, d *expo.Desc, v float64, labels ...string) { out.counter(d, v, labels...) }

func optGauge[T uint64 | int](out *sink, d *expo.Desc, o infiniband.Opt[T], labels ...string) {
	if o.OK {
		out.gauge(d, float64(o.V), labels...)
	}
}

func (c *infinibandCollector) device(s *sink, d *infiniband.Device) {
	nodeType := ""
	if d.NodeType.OK {
		nodeType = d.NodeType.V.Name
	}
	s.gauge(c.deviceInfo, 1, d.Name, d.HCAType.V, d.BoardID.V, d.FirmwareVer.V, d.HWRev.V,
		d.NodeGUID.V, d.SysImageGUID.V, nodeType)
	if d.NodeDesc.OK && d.NodeDesc.V != "" {
		s.gauge(c.nodeDesc, 1, d.Name, d.NodeDesc.V)
	}
	for i := range d.Ports {
		p := &d.Ports[i]
		c.port(s, d, p)
	}
}

// labelPairs returns, for each counter, its label values (device,
// counter) or, when port is not empty, (device, port, counter), one after
// the other in one slice.
func labelPairs(device, port string, counters []infiniband.Counter) []string {
	if port == "" {
		lab := make([]string, 0, 2*len(counters))
		for _, c := range counters {
			lab = append(lab, device, c.Name)
		}
		return lab
	}
	lab := make([]string, 0, 3*len(counters))
	for _, c := range counters {
		lab = append(lab, device, port, c.Name)
	}
	return lab
}

func (c *infinibandCollector) port(s *sink, d *infiniband.Device, p *infiniband.Port) {
	port := strconv.Itoa(p.Num)
	// The (device, port) label values, shared by the port's samples.
	pl := []string{d.Name, port}
	var speed, width string
	if p.Rate.OK {
		speed, width = p.Rate.V.Speed, p.Rate.V.WidthLabel()
	}
	s.gauge(c.portInfo, 1, d.Name, port, p.LinkLayer.V, p.Netdev, speed, width, p.PortGUID.V)
	if p.State.OK {
		s.gauge(c.state, float64(p.State.V.Value), pl...)
	}
	if p.PhysState.OK {
		s.gauge(c.physState, float64(p.PhysState.V.Value), pl...)
	}
	if p.Rate.OK {
		s.gauge(c.rate, p.Rate.V.BytesPerSecond(), pl...)
		s.gauge(c.width, float64(p.Rate.V.Width), pl...)
	}
	if gbps, _, ok := infiniband.ExpectedRate(c.cfg, d, p); ok {
		want := infiniband.Rate{Gbps: gbps}.BytesPerSecond()
		s.gauge(c.expected, want, pl...)
		if p.Rate.OK {
			deg := 0.0
			if p.Rate.V.BytesPerSecond() < want {
				deg = 1
			}
			s.gauge(c.degraded, deg, pl...)
		}
	}
	optGauge(s, c.lid, p.LID, pl...)
	optGauge(s, c.smLID, p.SMLID, pl...)
	optGauge(s, c.smSL, p.SMSL, pl...)
	// An RNIC (iWARP) has no subnet manager, even where an old kernel
	// prints link_layer "InfiniBand" for it (i40iw).
	rnic := d.NodeType.OK && d.NodeType.V.Value == infiniband.NodeTypeRNIC
	if has, judged := sm.PortHasSM(p); judged && !rnic {
		v := 0.0
		if has {
			v = 1
		}
		s.gauge(c.hasSM, v, pl...)
	}
	optGauge(s, c.lmc, p.LIDMaskCount, pl...)
	optGauge(s, c.capMask, p.CapMask, pl...)

	ext := p.Extended()
	lab := labelPairs(d.Name, port, p.Counters)
	for i, pc := range p.Counters {
		dpc := lab[3*i : 3*i+3 : 3*i+3]
		spec, known := infiniband.LookupCounter(pc.Name)
		if !known {
			s.counter(c.otherCounter, float64(pc.Value), dpc...)
			continue
		}
		s.counter(c.counters[pc.Name], float64(pc.Value)*spec.Scale, pl...)
		sat := 0.0
		if spec.Saturated(pc.Value, ext) {
			sat = 1
		}
		s.gauge(c.saturated, sat, dpc...)
	}
}
