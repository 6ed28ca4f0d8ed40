// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"math"
	"path"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Diagnose configures the rule checks of `rdma_doctor diagnose` and
// /diagnose. Every field is optional; the zero value means "use the default"
// and the defaults follow shared/research/diagnose.md §2.
//
// Values that must be checked beyond their YAML type (a firmware version, a
// check pattern, a counter name) have types whose UnmarshalYAML validates
// them, so the error names the line; the decoder's KnownFields strictness
// still applies to every struct here because none of them decodes itself.
type Diagnose struct {
	// Interval between two background samples in the server. Default 30s.
	Interval model.Duration `yaml:"interval"`
	// Window is how far back the delta checks look: counter increases are
	// judged between the oldest sample inside the window and the newest.
	// The server keeps window/interval+1 samples. Default 10m.
	Window model.Duration `yaml:"window"`
	// Disable lists check ids (or path.Match globs such as "cpu.*") that are
	// not evaluated at all.
	Disable []CheckPattern `yaml:"disable"`
	// ExpectedDevices is the number of RDMA devices the host must have
	// (dev.present). 0: at least one.
	ExpectedDevices int `yaml:"expected_devices"`
	// LinkLayers says which link layer ports must run (port.layer).
	LinkLayers []LinkLayerRule `yaml:"link_layers"`
	// Ports says which ports must be up (port.phys, port.state).
	Ports PortPolicy `yaml:"ports"`
	// Firmware is the firmware policy per board_id or hca_type (fw.version).
	Firmware []FirmwarePolicy `yaml:"firmware"`
	// Thresholds are the limits the checks judge against.
	Thresholds Thresholds `yaml:"thresholds"`
	// Policies are site choices the research found to be policy, not fact.
	Policies Policies `yaml:"policies"`
	// FabricTopology names the expected fabric topology file, in the
	// format ibnetdiscover prints, that fabric.topology compares the fabric
	// collector's scan with. The diagnose evaluator reads it once at start
	// (ReadFile, bounded); "" compares nothing.
	FabricTopology string `yaml:"fabric_topology"`
}

// Defaults of the diagnose section.
const (
	DefaultDiagnoseInterval = 30 * time.Duration(time.Second)
	DefaultDiagnoseWindow   = 10 * time.Duration(time.Minute)
	DefaultKernelFloor      = "5.4"
)

// SampleInterval is the configured sampler interval or its default.
func (d *Diagnose) SampleInterval() time.Duration {
	if d.Interval > 0 {
		return time.Duration(d.Interval)
	}
	return DefaultDiagnoseInterval
}

// HistoryWindow is the configured delta window or its default; never
// shorter than one interval.
func (d *Diagnose) HistoryWindow() time.Duration {
	w := DefaultDiagnoseWindow
	if d.Window > 0 {
		w = time.Duration(d.Window)
	}
	if iv := d.SampleInterval(); w < iv {
		w = iv
	}
	return w
}

// Disabled reports whether a check id is switched off.
func (d *Diagnose) Disabled(id string) bool {
	for _, p := range d.Disable {
		if p.Match(id) {
			return true
		}
	}
	return false
}

// durationType is prometheus/common's model.Duration, the type of every
// duration in the file ("30s", "10m", "1h"), so the config reads durations
// as Prometheus's own configuration does.
var durationType = reflect.TypeFor[model.Duration]()

// checkDuration validates a duration's node before Decode: model.Duration
// decodes itself through the decoder's older interface, whose errors carry
// no line, and it accepts 0, which no duration here may be.
func checkDuration(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return lineErr(n, "want a duration such as 30s or 10m")
	}
	v, err := model.ParseDuration(n.Value)
	if err != nil || time.Duration(v) < time.Second {
		return lineErr(n, "duration %q: want 1s or more, such as 30s or 10m", n.Value)
	}
	return nil
}

// CheckPattern is a check id or a path.Match glob over check ids. Line is
// where it was written, so a pattern that matches no check can be reported
// with its line by the diagnose package, which knows the ids.
type CheckPattern struct {
	Pattern string
	Line    int
}

var checkIDChars = regexp.MustCompile(`^[a-z0-9_.*?\[\]-]+$`)

// UnmarshalYAML validates the glob.
func (p *CheckPattern) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Value == "" {
		return lineErr(n, "want a check id such as port.rate or a glob such as \"ctr.*\"")
	}
	if !checkIDChars.MatchString(n.Value) {
		return lineErr(n, "check pattern %q: ids are lower case, dot-separated (port.rate)", n.Value)
	}
	if _, err := path.Match(n.Value, ""); err != nil {
		return lineErr(n, "check pattern %q: %v", n.Value, err)
	}
	*p = CheckPattern{Pattern: n.Value, Line: n.Line}
	return nil
}

// MarshalYAML writes the pattern back as a plain string.
func (p CheckPattern) MarshalYAML() (any, error) { return p.Pattern, nil }

// Match reports whether id matches the pattern.
func (p CheckPattern) Match(id string) bool {
	ok, _ := path.Match(p.Pattern, id)
	return ok
}

// LinkLayerRule says which link layer a set of ports must run. Exactly one
// selector: device (optionally with port), board_id or hca_type. The most
// specific matching rule wins: device+port, device, board_id, hca_type.
type LinkLayerRule struct {
	Device    string    `yaml:"device"`
	Port      int       `yaml:"port"`
	BoardID   string    `yaml:"board_id"`
	HCAType   string    `yaml:"hca_type"`
	LinkLayer LinkLayer `yaml:"link_layer"`
}

// PortPolicy says which ports must be up. By default a port must be up
// when the config names it, when it was ACTIVE at any sample since
// rdma_doctor started, or when no port of the host is up at all; any other
// down port (the unused second port of a dual-port card, an admin-down
// Ethernet port) is a spare and never fails a check.
type PortPolicy struct {
	// Required are ports that must be up; port 0 means every port of the
	// device.
	Required []PortRef `yaml:"required"`
	// All makes every port required: none is a spare.
	All bool `yaml:"all"`
}

// PortRef names a port of a device (port 0: every port).
type PortRef struct {
	Device string `yaml:"device"`
	Port   int    `yaml:"port"`
}

// Requires reports whether the config requires device/port to be up.
func (p *PortPolicy) Requires(device string, port int) bool {
	if p.All {
		return true
	}
	for _, r := range p.Required {
		if r.Device == device && (r.Port == 0 || r.Port == port) {
			return true
		}
	}
	return false
}

// UnmarshalYAML decodes one port reference strictly.
func (r *PortRef) UnmarshalYAML(n *yaml.Node) error {
	type plain PortRef
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	switch {
	case p.Device == "":
		return lineErr(n, "diagnose.ports.required: device is required")
	case p.Port < 0:
		return lineErr(n, "diagnose.ports.required: port must be 1 or more (0 or none: every port)")
	}
	*r = PortRef(p)
	return nil
}

// LinkLayer is "InfiniBand" or "Ethernet", as ports/N/link_layer prints it.
type LinkLayer string

// UnmarshalYAML accepts the two kernel spellings (case-insensitively).
func (l *LinkLayer) UnmarshalYAML(n *yaml.Node) error {
	switch strings.ToLower(n.Value) {
	case "infiniband":
		*l = "InfiniBand"
	case "ethernet":
		*l = "Ethernet"
	default:
		return lineErr(n, "link_layer %q: want InfiniBand or Ethernet", n.Value)
	}
	return nil
}

// FirmwarePolicy is the firmware a board (board_id, the PSID) or an HCA
// model (hca_type) must run: at least Minimum, and one of Allowed when
// Allowed is given. Exactly one of BoardID and HCAType; a board_id policy
// wins over an hca_type one.
type FirmwarePolicy struct {
	BoardID string    `yaml:"board_id"`
	HCAType string    `yaml:"hca_type"`
	Minimum FWVersion `yaml:"minimum"`
	Allowed []string  `yaml:"allowed"`
	Line    int       `yaml:"-"`
}

// FWVersion is a dotted numeric firmware version ("28.39.1002").
type FWVersion string

var fwVersionRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)

// UnmarshalYAML validates the dotted numeric form.
func (v *FWVersion) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || !fwVersionRE.MatchString(n.Value) {
		return lineErr(n, "firmware version %q: want dotted numbers such as 28.39.1002", n.Value)
	}
	*v = FWVersion(n.Value)
	return nil
}

// CompareVersions compares dotted numeric versions component by component
// (missing components count as 0): -1, 0 or 1. Non-numeric components
// compare as text, after numbers.
func CompareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		x, y := "0", "0"
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		if c := compareComponent(x, y); c != 0 {
			return c
		}
	}
	return 0
}

func compareComponent(x, y string) int {
	xn, xok := digits(x)
	yn, yok := digits(y)
	switch {
	case xok && yok:
		// Compare numerically without overflow: strip leading zeros,
		// then the longer number is larger.
		if len(xn) != len(yn) {
			if len(xn) < len(yn) {
				return -1
			}
			return 1
		}
		return strings.Compare(xn, yn)
	case xok:
		return -1
	case yok:
		return 1
	}
	return strings.Compare(x, y)
}

func digits(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return "", false
		}
	}
	s = strings.TrimLeft(s, "0")
	return s, true
}

// Thresholds are the numeric limits of the checks.
type Thresholds struct {
	// Counters are limits on the increase of a counter over the window,
	// keyed by the file name in counters/ or hw_counters/ (symbol_error,
	// local_ack_timeout_err). An entry replaces the default for that
	// counter as a whole.
	Counters CounterLimits `yaml:"counters"`
	// Probe judges the verbs probe's results (the guide's §5.1 numbers).
	Probe ProbeThresholds `yaml:"probe"`
	// Links judges the port state sampler's history (port.flap, port.drop).
	Links LinkThresholds `yaml:"links"`
}

// LinkThresholds say when a port flaps and when it dropped. A link that
// goes down and up FlapCycles times within FlapWindow flaps (the 8-bit
// link_downed counter saturates and scrapes miss short cycles); a port
// down for DropAfter after having been ACTIVE dropped.
type LinkThresholds struct {
	FlapCycles int            `yaml:"flap_cycles"`
	FlapWindow model.Duration `yaml:"flap_window"`
	DropAfter  model.Duration `yaml:"drop_after"`
}

// Link defaults: NVSentinel's "3 link_downed in 10 min" and "down 4 min".
const (
	DefaultFlapCycles = 3
	DefaultFlapWindow = 10 * time.Minute
	DefaultDropAfter  = 4 * time.Minute
)

// Effective returns the thresholds with defaults filled in.
func (l LinkThresholds) Effective() LinkThresholds {
	if l.FlapCycles <= 0 {
		l.FlapCycles = DefaultFlapCycles
	}
	if l.FlapWindow <= 0 {
		l.FlapWindow = model.Duration(DefaultFlapWindow)
	}
	if l.DropAfter <= 0 {
		l.DropAfter = model.Duration(DefaultDropAfter)
	}
	return l
}

// Limit judges a counter's increase: warn when it rose by more than
// WarnAbove, fail when by more than FailAbove. A nil bound is not applied.
type Limit struct {
	WarnAbove *uint64 `yaml:"warn_above"`
	FailAbove *uint64 `yaml:"fail_above"`
}

// CounterLimits maps counter names to limits.
type CounterLimits map[string]Limit

// UnmarshalYAML checks every key against the known counter names and every
// value strictly (this type decodes itself, so the decoder's KnownFields
// does not reach inside it).
func (c *CounterLimits) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return lineErr(n, "thresholds.counters: want a mapping of counter name to {warn_above, fail_above}")
	}
	out := CounterLimits{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, known := DefaultCounterLimits[k.Value]; !known {
			return lineErr(k, "thresholds.counters: unknown counter %q (known: %s)", k.Value, strings.Join(CounterLimitNames(), ", "))
		}
		var l Limit
		if err := decodeStrict(v, &l); err != nil {
			return err
		}
		if l.WarnAbove != nil && l.FailAbove != nil && *l.WarnAbove > *l.FailAbove {
			return lineErr(v, "thresholds.counters.%s: warn_above %d is above fail_above %d", k.Value, *l.WarnAbove, *l.FailAbove)
		}
		out[k.Value] = l
	}
	*c = out
	return nil
}

func u64(v uint64) *uint64 { return &v }

// DefaultCounterLimits are the defaults of thresholds.counters, from
// rdma-core's etc/error_thresholds sample and research/diagnose.md §2.3
// (the hw_counters limits are the research's own proposal: no upstream
// number exists). Counters listed with no bound are reported, never judged.
var DefaultCounterLimits = map[string]Limit{
	// PMA counters (ports/N/counters/).
	"symbol_error":                    {u64(0), u64(10)},
	"link_error_recovery":             {u64(0), u64(10)},
	"link_downed":                     {nil, u64(0)},
	"port_rcv_errors":                 {u64(0), u64(10)},
	"port_rcv_remote_physical_errors": {u64(0), u64(100)},
	"local_link_integrity_errors":     {u64(0), u64(10)},
	"excessive_buffer_overrun_errors": {u64(0), u64(10)},
	"port_xmit_discards":              {u64(100), nil},
	"port_rcv_switch_relay_errors":    {u64(100), nil},
	"port_xmit_constraint_errors":     {u64(100), nil},
	"port_rcv_constraint_errors":      {u64(100), nil},
	"VL15_dropped":                    {u64(100), nil},
	"port_xmit_wait":                  {u64(1000), nil},
	// mlx5 hw_counters (ports/N/hw_counters/).
	"out_of_sequence":                {u64(0), nil},
	"packet_seq_err":                 {u64(0), nil},
	"implied_nak_seq_err":            {u64(0), nil},
	"duplicate_request":              {u64(0), nil},
	"roce_adp_retrans":               {u64(0), nil},
	"local_ack_timeout_err":          {u64(0), u64(100)},
	"roce_adp_retrans_to":            {u64(0), u64(100)},
	"rnr_nak_retry_err":              {nil, u64(0)},
	"req_transport_retries_exceeded": {nil, u64(0)},
	"req_rnr_retries_exceeded":       {nil, u64(0)},
	"out_of_buffer":                  {u64(0), nil},
	"rp_cnp_ignored":                 {u64(0), nil},
	"np_ecn_marked_roce_packets":     {},
	"np_cnp_sent":                    {},
	"rp_cnp_handled":                 {},
	"rx_icrc_encapsulated":           {nil, u64(0)},
}

// CounterLimitNames lists the counters thresholds.counters accepts.
func CounterLimitNames() []string {
	names := make([]string, 0, len(DefaultCounterLimits))
	for k := range DefaultCounterLimits {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// CounterLimit returns the limit for a counter: the configured one, else
// the default.
func (d *Diagnose) CounterLimit(name string) Limit {
	if l, ok := d.Thresholds.Counters[name]; ok {
		return l
	}
	return DefaultCounterLimits[name]
}

// ProbeThresholds judge the verbs probe (guide §5.1: latency < 2 µs in
// loopback, < 5 µs through a switch, bandwidth ≥ 90 % of the port rate).
type ProbeThresholds struct {
	LoopbackLatencyUS float64 `yaml:"loopback_latency_us"`
	SwitchLatencyUS   float64 `yaml:"switch_latency_us"`
	MinBandwidthRatio float64 `yaml:"min_bandwidth_ratio"`
}

// Probe defaults.
const (
	DefaultLoopbackLatencyUS = 2.0
	DefaultSwitchLatencyUS   = 5.0
	DefaultMinBandwidthRatio = 0.9
)

// Effective returns the thresholds with defaults filled in.
func (p ProbeThresholds) Effective() ProbeThresholds {
	if p.LoopbackLatencyUS <= 0 {
		p.LoopbackLatencyUS = DefaultLoopbackLatencyUS
	}
	if p.SwitchLatencyUS <= 0 {
		p.SwitchLatencyUS = DefaultSwitchLatencyUS
	}
	if p.MinBandwidthRatio <= 0 {
		p.MinBandwidthRatio = DefaultMinBandwidthRatio
	}
	return p
}

// Policies are the site choices the research marks as policy.
type Policies struct {
	// KernelFloor is the oldest kernel accepted on RoCE hosts ("5.4", the
	// guide's number; RoCE v2 itself exists since ~4.5, so the real test is
	// for RoCE v2 GIDs and this is a warning only). "off" disables it.
	KernelFloor KernelFloor `yaml:"kernel_floor"`
	// IPoIBMode: auto (default: datagram is right on enhanced IPoIB,
	// either mode elsewhere), connected or datagram.
	IPoIBMode IPoIBMode `yaml:"ipoib_mode"`
	// IPoIBIPv6: any (default: reported only), enabled or disabled.
	IPoIBIPv6 IPv6Policy `yaml:"ipoib_ipv6"`
	// ExpectTraffic makes an ACTIVE port whose port_rcv_data did not rise
	// over the window a warning (port.traffic); by default an idle port is
	// only reported.
	ExpectTraffic bool `yaml:"expect_traffic"`
	// CPUGovernor every CPU should run (cpu.governor). Default performance.
	CPUGovernor string `yaml:"cpu_governor"`
	// Hugepages: the pages of one size the host must have (mem.hugepages).
	Hugepages HugepagesPolicy `yaml:"hugepages"`
	// MemlockMinKiB is the smallest acceptable RLIMIT_MEMLOCK in KiB
	// (mem.memlock). Unset: unlimited is required.
	MemlockMinKiB *uint64 `yaml:"memlock_min_kib"`
	// Sysctls are minimum values, judged on hosts with IPoIB netdevs only
	// (they tune sockets, not verbs). An entry replaces the default for
	// that key; the defaults are DefaultSysctlMinimums.
	Sysctls map[string]int64 `yaml:"sysctls"`
	// RoCEPriority is the 802.1p priority RoCE traffic uses, judged
	// lossless by roce.lossless (PFC and ECN on it). Unset: the priority
	// the default RoCE ToS maps to under trust dscp, else 3, NVIDIA's
	// default (DSCP 26, the mlnx_qos and "RoCE configuration for
	// ConnectX" examples).
	RoCEPriority *int `yaml:"roce_priority"`
	// RDMACgroupLimits are the rdma.max limits cgroups must have
	// (cgroup.rdma, action rdma-cgroup). Empty: limits are exported only.
	RDMACgroupLimits []RDMACgroupLimit `yaml:"rdma_cgroup_limits"`
}

// RDMACgroupLimit is one cgroup v2 rdma.max line a site wants: the
// device's limits in the cgroup at Cgroup (below the cgroup v2 root).
type RDMACgroupLimit struct {
	// Cgroup is the path below the cgroup v2 root ("/slurm"); the root
	// itself has no rdma.max.
	Cgroup string `yaml:"cgroup"`
	// Device is an RDMA device name, or "*" for every device of the host
	// (after the device filter).
	Device    string     `yaml:"device"`
	HCAHandle *RDMACount `yaml:"hca_handle"`
	HCAObject *RDMACount `yaml:"hca_object"`
	Line      int        `yaml:"-"`
}

// RDMAUnlimited is the RDMACount of "max"; it equals tuning.Unlimited.
const RDMAUnlimited RDMACount = math.MaxUint64

// RDMACountMax is the largest finite count: the kernel keeps the limit in
// an int and shows INT_MAX as "max".
const RDMACountMax = 1<<31 - 2

// RDMACount is a limit of rdma.max: a count, or "max" (RDMAUnlimited).
type RDMACount uint64

// UnmarshalYAML accepts max or 0..RDMACountMax.
func (c *RDMACount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "max" {
		*c = RDMAUnlimited
		return nil
	}
	v, err := strconv.ParseUint(n.Value, 10, 64)
	if n.Kind != yaml.ScalarNode || err != nil || v > RDMACountMax {
		return lineErr(n, "rdma cgroup limit %q: want max or a count from 0 to %d", n.Value, RDMACountMax)
	}
	*c = RDMACount(v)
	return nil
}

// UnmarshalYAML decodes one limit strictly and checks its cgroup path and
// device, so that rdma.max is only ever written in the kernel's format.
func (l *RDMACgroupLimit) UnmarshalYAML(n *yaml.Node) error {
	type plain RDMACgroupLimit
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	const key = "diagnose.policies.rdma_cgroup_limits"
	switch {
	case p.Cgroup == "/":
		return lineErr(n, "%s: cgroup / is the root, which has no rdma.max; name a child such as /slurm", key)
	case !strings.HasPrefix(p.Cgroup, "/") || path.Clean(p.Cgroup) != p.Cgroup || strings.ContainsAny(p.Cgroup, "\n\x00"):
		return lineErr(n, "%s: cgroup %q: want a clean path below the cgroup v2 root, such as /slurm", key, p.Cgroup)
	case p.Device == "" || strings.ContainsAny(p.Device, " \t\n/=\x00") || (strings.Contains(p.Device, "*") && p.Device != "*"):
		return lineErr(n, "%s: device %q: want an RDMA device name (mlx5_0) or * for every device", key, p.Device)
	case p.HCAHandle == nil || p.HCAObject == nil:
		return lineErr(n, "%s: hca_handle and hca_object are both required (a count or max)", key)
	}
	p.Line = n.Line
	*l = RDMACgroupLimit(p)
	return nil
}

// DefaultSysctlMinimums are mlnx-tools' sysctl_perf_tuning values.
var DefaultSysctlMinimums = map[string]int64{
	"net.core.rmem_max":           4194304,
	"net.core.wmem_max":           4194304,
	"net.core.netdev_max_backlog": 250000,
}

// SysctlMinimums returns the defaults overlaid with the configured values.
func (p *Policies) SysctlMinimums() map[string]int64 {
	m := make(map[string]int64, len(DefaultSysctlMinimums)+len(p.Sysctls))
	for k, v := range DefaultSysctlMinimums {
		m[k] = v
	}
	for k, v := range p.Sysctls {
		m[k] = v
	}
	return m
}

// Governor returns the expected CPU governor.
func (p *Policies) Governor() string {
	if p.CPUGovernor == "" {
		return "performance"
	}
	return p.CPUGovernor
}

// HugepagesPolicy: at least MinPages pages of PageSizeKiB, over all NUMA
// nodes. Zero: no requirement (the check only reports).
type HugepagesPolicy struct {
	PageSizeKiB uint64 `yaml:"page_size_kib"`
	MinPages    uint64 `yaml:"min_pages"`
}

// KernelFloor is "off" or a dotted version.
type KernelFloor string

// UnmarshalYAML validates the form.
func (k *KernelFloor) UnmarshalYAML(n *yaml.Node) error {
	if n.Value != "off" && !fwVersionRE.MatchString(n.Value) {
		return lineErr(n, "kernel_floor %q: want a version such as 5.4, or off", n.Value)
	}
	*k = KernelFloor(n.Value)
	return nil
}

// Floor returns the kernel floor, "" when off.
func (k KernelFloor) Floor() string {
	switch k {
	case "":
		return DefaultKernelFloor
	case "off":
		return ""
	}
	return string(k)
}

// IPoIBMode is the IPoIB mode policy.
type IPoIBMode string

// UnmarshalYAML validates the value.
func (m *IPoIBMode) UnmarshalYAML(n *yaml.Node) error {
	return enumValue(n, (*string)(m), "ipoib_mode", "auto", "connected", "datagram")
}

// IPv6Policy is the IPv6-on-IPoIB policy.
type IPv6Policy string

// UnmarshalYAML validates the value.
func (p *IPv6Policy) UnmarshalYAML(n *yaml.Node) error {
	return enumValue(n, (*string)(p), "ipoib_ipv6", "any", "enabled", "disabled")
}

func enumValue(n *yaml.Node, dst *string, key string, allowed ...string) error {
	for _, a := range allowed {
		if n.Value == a {
			*dst = a
			return nil
		}
	}
	return lineErr(n, "%s %q: want one of %s", key, n.Value, strings.Join(allowed, ", "))
}

// lineErr formats an error that names the YAML line, as the decoder's own
// errors do.
func lineErr(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("line %d: %s", n.Line, fmt.Sprintf(format, args...))
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkKnown rejects mapping keys that the target type does not have,
// recursively, and durations that are not one (see checkDuration). A type that decodes itself (UnmarshalYAML) calls
// yaml.Node.Decode, which does not inherit the outer decoder's KnownFields,
// so it checks its own subtree with this first. Type mismatches are left to
// Decode, which reports them with their line.
func checkKnown(n *yaml.Node, t reflect.Type) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		return checkDuration(n)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // it checks itself
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields := map[string]reflect.Type{}
		var keys []string
		for i := 0; i < t.NumField(); i++ {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if tag != "" && tag != "-" {
				fields[tag] = t.Field(i).Type
				keys = append(keys, tag)
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok {
				return unknownKey(k, keys)
			}
			if err := checkKnown(n.Content[i+1], ft); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				if err := checkKnown(c, t.Elem()); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 1; i < len(n.Content); i += 2 {
				if err := checkKnown(n.Content[i], t.Elem()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// unknownKey is the error for a mapping key the section does not have: the
// line, the key as typed, the keys valid at that level and, when one is
// close, the likely intended one.
func unknownKey(k *yaml.Node, valid []string) error {
	sorted := slices.Sorted(slices.Values(valid))
	msg := fmt.Sprintf("unknown key %q; valid here: %s", k.Value, strings.Join(sorted, ", "))
	if m := closest(k.Value, sorted); m != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", m)
	}
	return lineErr(k, "%s", msg)
}

// closest returns the candidate within a small edit distance of s (a typo,
// a missing plural "s"), or "" when none is close enough to suggest.
func closest(s string, candidates []string) string {
	best, bestD := "", 3 // suggest at distance 1 or 2 only
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD > len(s)/2 {
		return "" // a short key two edits away is not a typo of it
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// decodeStrict decodes n into v (a pointer to a type without its own
// UnmarshalYAML) rejecting unknown keys.
func decodeStrict(n *yaml.Node, v any) error {
	if err := checkKnown(n, reflect.TypeOf(v)); err != nil {
		return err
	}
	return n.Decode(v)
}

// keyNode returns the value node of key in a mapping node, or n itself.
func keyNode(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return n
}

// UnmarshalYAML decodes the section strictly and validates what the field
// types alone cannot, naming the line.
func (d *Diagnose) UnmarshalYAML(n *yaml.Node) error {
	type plain Diagnose
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	if ft := keyNode(n, "fabric_topology"); ft != n && strings.TrimSpace(p.FabricTopology) == "" {
		return lineErr(ft, "diagnose.fabric_topology: empty; name an ibnetdiscover output file or remove the key")
	}
	if p.ExpectedDevices < 0 {
		return lineErr(keyNode(n, "expected_devices"), "diagnose.expected_devices: %d is negative", p.ExpectedDevices)
	}
	if p.Window > 0 && p.Window < p.Interval {
		return lineErr(keyNode(n, "window"), "diagnose.window %v is shorter than diagnose.interval %v", time.Duration(p.Window), time.Duration(p.Interval))
	}
	th := keyNode(n, "thresholds")
	pr := p.Thresholds.Probe
	if pr.LoopbackLatencyUS < 0 || pr.SwitchLatencyUS < 0 || pr.MinBandwidthRatio < 0 || pr.MinBandwidthRatio > 1 {
		return lineErr(keyNode(th, "probe"), "diagnose.thresholds.probe: latencies must be positive and min_bandwidth_ratio between 0 and 1")
	}
	if rp := p.Policies.RoCEPriority; rp != nil && (*rp < 0 || *rp > 7) {
		return lineErr(keyNode(keyNode(n, "policies"), "roce_priority"), "diagnose.policies.roce_priority: %d is not a priority (0 to 7)", *rp)
	}
	sys := keyNode(keyNode(n, "policies"), "sysctls")
	for k, v := range p.Policies.Sysctls {
		if !sysctlNameRE.MatchString(k) {
			return lineErr(sys, "diagnose.policies.sysctls: %q is not a sysctl name (net.core.rmem_max)", k)
		}
		if v < 0 {
			return lineErr(sys, "diagnose.policies.sysctls.%s: %d is negative", k, v)
		}
	}
	seen := map[[2]string]int{}
	for _, l := range p.Policies.RDMACgroupLimits {
		k := [2]string{l.Cgroup, l.Device}
		if first, dup := seen[k]; dup {
			return fmt.Errorf("line %d: diagnose.policies.rdma_cgroup_limits: %s %s is already set on line %d", l.Line, l.Cgroup, l.Device, first)
		}
		seen[k] = l.Line
	}
	*d = Diagnose(p)
	return nil
}

// UnmarshalYAML decodes one firmware policy strictly and checks its
// selectors.
func (f *FirmwarePolicy) UnmarshalYAML(n *yaml.Node) error {
	type plain FirmwarePolicy
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	if (p.BoardID == "") == (p.HCAType == "") {
		return lineErr(n, "diagnose.firmware: exactly one of board_id and hca_type")
	}
	if p.Minimum == "" && len(p.Allowed) == 0 {
		return lineErr(n, "diagnose.firmware: minimum or allowed is required")
	}
	p.Line = n.Line
	*f = FirmwarePolicy(p)
	return nil
}

// UnmarshalYAML decodes one link-layer rule strictly and checks its
// selectors.
func (l *LinkLayerRule) UnmarshalYAML(n *yaml.Node) error {
	type plain LinkLayerRule
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	sel := 0
	for _, s := range []string{p.Device, p.BoardID, p.HCAType} {
		if s != "" {
			sel++
		}
	}
	switch {
	case sel != 1:
		return lineErr(n, "diagnose.link_layers: exactly one of device, board_id and hca_type")
	case p.Port != 0 && p.Device == "":
		return lineErr(n, "diagnose.link_layers: port needs device")
	case p.Port < 0:
		return lineErr(n, "diagnose.link_layers: port must be 1 or more")
	case p.LinkLayer == "":
		return lineErr(n, "diagnose.link_layers: link_layer is required")
	}
	*l = LinkLayerRule(p)
	return nil
}

var sysctlNameRE = regexp.MustCompile(`^[a-z0-9_-]+(\.[a-zA-Z0-9_-]+)+$`)
