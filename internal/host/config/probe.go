// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	rdmanames "github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// Probe configures the scheduled verbs probe (perftest), the TCP transport
// probe of `rdma_doctor probe --compare`, and the responder that serves
// both to peers (docs/probe.md). Everything is off by default: a probe
// busy-polls a core and loads the link, and the responder opens a port.
type Probe struct {
	// Enabled makes the server schedule the configured probes.
	Enabled bool `yaml:"enabled"`
	// Interval between two probe starts; each start picks the next test of
	// the rotation. Default 5m.
	Interval model.Duration `yaml:"interval"`
	// Jitter spreads the starts: each wait is Interval ± Jitter × Interval,
	// uniformly. Default 0.2; 0 < jitter < 1.
	Jitter float64 `yaml:"jitter"`
	// Timeout caps one probe, server and client together. Default: the
	// test's expected length plus 10 s of perftest setup.
	Timeout model.Duration `yaml:"timeout"`
	// ScrapeGuard: a probe does not start within this long after a scrape
	// began, so a scrape never competes with a probe's setup. Default 2s.
	ScrapeGuard model.Duration `yaml:"scrape_guard"`
	// PerftestDir holds ib_write_bw and friends; default: $PATH.
	PerftestDir string `yaml:"perftest_dir"`
	// SecretFile holds the shared secret that authenticates the control
	// channel between a prober and a peer's responder (at least 16 bytes;
	// surrounding whitespace is ignored). Required for peers and the
	// responder.
	SecretFile string `yaml:"secret_file"`
	// Tests is the rotation for targets without their own list. Default
	// [ib_write_lat, ib_write_bw].
	Tests []string `yaml:"tests"`
	// Latency and Bandwidth are the run settings of each kind of test.
	Latency   ProbeLatencyRun `yaml:"latency"`
	Bandwidth ProbeRun        `yaml:"bandwidth"`
	// Loopback targets run server and client on this host.
	Loopback []ProbeLoopback `yaml:"loopback"`
	// Peers are hosts running rdma_doctor with the responder enabled.
	Peers []ProbePeer `yaml:"peers"`
	// GPU targets are loopbacks whose buffers live in a GPU's memory
	// (perftest --use_cuda): GPUDirect RDMA through the HCA nearest that
	// GPU. Their series carry memory="gpu"; every other target's carry
	// memory="host".
	GPU []ProbeGPU `yaml:"gpu"`
	// Responder answers peers' probe requests.
	Responder ProbeResponder `yaml:"responder"`
}

// ProbeRun is how one kind of test runs. Zero fields take the defaults:
// latency 2 bytes × 10000 iterations (enough for a meaningful 99.9 %),
// bandwidth 65536 bytes for 5 s.
type ProbeRun struct {
	Size       int            `yaml:"size"`
	Iterations int            `yaml:"iterations"`
	Duration   model.Duration `yaml:"duration"`
}

// ProbeLatencyRun is how latency tests run: a count of iterations (in
// duration mode perftest prints no percentiles).
type ProbeLatencyRun struct {
	Size       int `yaml:"size"`
	Iterations int `yaml:"iterations"`
}

// ProbeLoopback is a probe whose two sides both run on this host. With the
// same device on both sides the HCA loops internally (HCA, driver, PCIe);
// with PeerDevice or PeerPort set the traffic crosses the cable and the
// switch.
type ProbeLoopback struct {
	// Name is the peer label of its metrics. Default "loopback" with one
	// device, "loopback:<peer_device>/<peer_port>" across two.
	Name         string   `yaml:"name"`
	Device       string   `yaml:"device"`
	Port         int      `yaml:"port"`
	GIDIndex     *int     `yaml:"gid_index"`
	PeerDevice   string   `yaml:"peer_device"`
	PeerPort     int      `yaml:"peer_port"`
	PeerGIDIndex *int     `yaml:"peer_gid_index"`
	Tests        []string `yaml:"tests"`
}

// ProbePeer is a remote host whose responder starts the perftest server.
type ProbePeer struct {
	// Name is the peer label of its metrics.
	Name string `yaml:"name"`
	// Address is the peer's responder, host:port.
	Address string `yaml:"address"`
	// Device, Port, GIDIndex select the local HCA.
	Device   string `yaml:"device"`
	Port     int    `yaml:"port"`
	GIDIndex *int   `yaml:"gid_index"`
	// RemoteDevice is the peer's device, one of its responder.devices;
	// default its first.
	RemoteDevice string `yaml:"remote_device"`
	// PerftestHost is where the perftest client connects for the QP
	// exchange; default the host of Address.
	PerftestHost string `yaml:"perftest_host"`
	// IPoIBAddress and EthernetAddress are the peer's responder reached
	// over its IPoIB and its Ethernet netdev (host:port), for the transport
	// comparison.
	IPoIBAddress    string   `yaml:"ipoib_address"`
	EthernetAddress string   `yaml:"ethernet_address"`
	Tests           []string `yaml:"tests"`
}

// ProbeGPU is a loopback on one HCA port with both sides' buffers in one
// GPU's memory. It needs a perftest built with CUDA (its --help lists
// --use_cuda); with another, each run fails as no_cuda.
type ProbeGPU struct {
	// Name is the peer label of its metrics. Default "loopback:gpu<N>".
	Name string `yaml:"name"`
	// GPU is the GPU's index in PCI bus order, the gpu label of
	// rdma_gpu_info (nvidia-smi's numbering). Required.
	GPU *int `yaml:"gpu"`
	// Device is the HCA; default the one nearest the GPU by the PCI tree
	// (rdma_gpu_device_affinity), the first by name among equals.
	Device   string `yaml:"device"`
	Port     int    `yaml:"port"`
	GIDIndex *int   `yaml:"gid_index"`
	// Tests default to [ib_write_bw]; ib_write_lat cannot use GPU memory
	// (perftest runs CUDA latency tests with read and send only).
	Tests []string `yaml:"tests"`
}

// GPUName is the peer label of a GPU target.
func (g *ProbeGPU) GPUName() string {
	if g.Name != "" {
		return g.Name
	}
	if g.GPU == nil {
		return "loopback:gpu"
	}
	return "loopback:gpu" + strconv.Itoa(*g.GPU)
}

// GPUTestsOrDefault is a GPU target's rotation: its own list or
// DefaultGPUProbeTests. The section's tests are not inherited: its default
// includes ib_write_lat, which cannot use GPU memory.
func GPUTestsOrDefault(own []string) []string {
	if len(own) > 0 {
		return own
	}
	return DefaultGPUProbeTests
}

// ProbeResponder serves probe requests from peers: it starts the matching
// perftest server, or answers the TCP probe, for an authenticated request
// for a test it allows.
type ProbeResponder struct {
	Enabled bool `yaml:"enabled"`
	// Listen are the host:port addresses to listen on. Required when
	// enabled: name the RDMA fabric's addresses, not every interface.
	Listen []string `yaml:"listen"`
	// AllowedTests are the tests peers may ask for (ib_* and tcp_lat,
	// tcp_bw). Required when enabled.
	AllowedTests []string `yaml:"allowed_tests"`
	// AllowedClients are CIDRs a request may come from; empty: any
	// (the shared secret still applies).
	AllowedClients []string `yaml:"allowed_clients"`
	// Devices are the HCAs peers may probe; the first is the default.
	// Required when a perftest test is allowed.
	Devices []ProbeDevice `yaml:"devices"`
	// PerftestPorts is the TCP port range for perftest servers, "lo-hi".
	// Default 18515-18530.
	PerftestPorts string `yaml:"perftest_ports"`
	// MaxDuration is the longest run a peer may ask for. Default 60s.
	MaxDuration model.Duration `yaml:"max_duration"`
}

// ProbeDevice is one HCA port the responder offers.
type ProbeDevice struct {
	Device   string `yaml:"device"`
	Port     int    `yaml:"port"`
	GIDIndex *int   `yaml:"gid_index"`
}

// Probe defaults.
const (
	DefaultProbeInterval      = 5 * time.Minute
	DefaultProbeJitter        = 0.2
	DefaultProbeScrapeGuard   = 2 * time.Second
	DefaultLatencySize        = 2
	DefaultLatencyIterations  = 10000
	DefaultBandwidthSize      = 65536
	DefaultBandwidthDuration  = 5 * time.Second
	DefaultPerftestPorts      = "18515-18530"
	DefaultResponderMaxLength = 60 * time.Second
)

// DefaultProbeTests is the rotation when none is configured.
var DefaultProbeTests = []string{"ib_write_lat", "ib_write_bw"}

// DefaultGPUProbeTests is the rotation of a GPU target without its own.
var DefaultGPUProbeTests = []string{"ib_write_bw"}

// MaxGPUIndex bounds a GPU index (probe/perftest.MaxGPUIndex).
const MaxGPUIndex = 255

// NotCUDATests are the perftest tests that cannot use GPU memory
// (probe/perftest.CUDATest says the same; its tests check the two agree).
var NotCUDATests = []string{"ib_write_lat"}

// PerftestTests are the perftest tools the probe runs; TCPTests the native
// TCP probe's. probe/perftest checks that its list matches.
var (
	PerftestTests = []string{"ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat"}
	TCPTests      = []string{"tcp_lat", "tcp_bw"}
)

// probeName is a label value: letters, digits and ._:/- (a host name, an
// "a/b" pair), never empty.
var (
	probeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$`)
)

// Effective helpers: the configured value or its default.

// IntervalOrDefault is the configured interval or 5m.
func (p *Probe) IntervalOrDefault() time.Duration {
	if p.Interval > 0 {
		return time.Duration(p.Interval)
	}
	return DefaultProbeInterval
}

// JitterOrDefault is the configured jitter or 0.2.
func (p *Probe) JitterOrDefault() float64 {
	if p.Jitter > 0 {
		return p.Jitter
	}
	return DefaultProbeJitter
}

// ScrapeGuardOrDefault is the configured scrape guard or 2s.
func (p *Probe) ScrapeGuardOrDefault() time.Duration {
	if p.ScrapeGuard > 0 {
		return time.Duration(p.ScrapeGuard)
	}
	return DefaultProbeScrapeGuard
}

// TestsOrDefault is the rotation of a target: its own list, the section's,
// or the default.
func (p *Probe) TestsOrDefault(own []string) []string {
	switch {
	case len(own) > 0:
		return own
	case len(p.Tests) > 0:
		return p.Tests
	}
	return DefaultProbeTests
}

// LatencyRun is the latency settings with defaults filled in.
func (p *Probe) LatencyRun() ProbeRun {
	r := ProbeRun{Size: p.Latency.Size, Iterations: p.Latency.Iterations}
	if r.Size == 0 {
		r.Size = DefaultLatencySize
	}
	if r.Iterations == 0 {
		r.Iterations = DefaultLatencyIterations
	}
	return r
}

// BandwidthRun is the bandwidth settings with defaults filled in. A
// configured iteration count replaces the default duration.
func (p *Probe) BandwidthRun() ProbeRun {
	r := p.Bandwidth
	if r.Size == 0 {
		r.Size = DefaultBandwidthSize
	}
	if r.Iterations == 0 && r.Duration == 0 {
		r.Duration = model.Duration(DefaultBandwidthDuration)
	}
	return r
}

// LoopbackName is the peer label of a loopback target.
func (l *ProbeLoopback) LoopbackName() string {
	if l.Name != "" {
		return l.Name
	}
	if l.PeerDevice == "" && (l.PeerPort == 0 || l.PeerPort == l.Port) {
		return "loopback"
	}
	dev, port := l.PeerDevice, l.PeerPort
	if dev == "" {
		dev = l.Device
	}
	if port == 0 {
		port = 1
	}
	return fmt.Sprintf("loopback:%s/%d", dev, port)
}

// PortRange is PerftestPorts (or the default) as numbers.
func (r *ProbeResponder) PortRange() (lo, hi int) {
	s := r.PerftestPorts
	if s == "" {
		s = DefaultPerftestPorts
	}
	lo, hi, _ = parsePortRange(s)
	return lo, hi
}

// MaxDurationOrDefault is the longest run a peer may ask for.
func (r *ProbeResponder) MaxDurationOrDefault() time.Duration {
	if r.MaxDuration > 0 {
		return time.Duration(r.MaxDuration)
	}
	return DefaultResponderMaxLength
}

// UnmarshalYAML decodes the section strictly and checks every value that
// reaches a command line or a socket, naming the line.
func (p *Probe) UnmarshalYAML(n *yaml.Node) error {
	type plain Probe
	var v plain
	if err := decodeStrict(n, &v); err != nil {
		return err
	}
	if v.Jitter < 0 || v.Jitter >= 1 {
		return lineErr(keyNode(n, "jitter"), "probe.jitter %v: want a fraction in [0, 1)", v.Jitter)
	}
	if err := checkTests(keyNode(n, "tests"), "probe.tests", v.Tests, false); err != nil {
		return err
	}
	for _, k := range []struct {
		key string
		run ProbeRun
		bw  bool
	}{{"latency", ProbeRun{Size: v.Latency.Size, Iterations: v.Latency.Iterations}, false}, {"bandwidth", v.Bandwidth, true}} {
		if err := checkRun(keyNode(n, k.key), "probe."+k.key, k.run, k.bw); err != nil {
			return err
		}
	}
	names := map[string]bool{}
	lb := keyNode(n, "loopback")
	for i, l := range v.Loopback {
		at := item(lb, i)
		where := fmt.Sprintf("probe.loopback[%d]", i)
		if err := checkDevice(at, where, l.Device, l.Port, l.GIDIndex, true); err != nil {
			return err
		}
		if l.PeerDevice != "" || l.PeerPort != 0 || l.PeerGIDIndex != nil {
			if err := checkDevice(at, where+".peer", l.PeerDevice, l.PeerPort, l.PeerGIDIndex, false); err != nil {
				return err
			}
		}
		if err := checkTests(keyNode(at, "tests"), where+".tests", l.Tests, false); err != nil {
			return err
		}
		name := l.LoopbackName()
		if l.Name != "" && !probeName.MatchString(l.Name) {
			return lineErr(at, "%s.name %q: use letters, digits and ._:/-", where, l.Name)
		}
		if names[name+"\x00"+l.Device] {
			return lineErr(at, "%s: a second target named %q on device %s; give it a name", where, name, l.Device)
		}
		names[name+"\x00"+l.Device] = true
	}
	pn := keyNode(n, "peers")
	peerNames := map[string]bool{}
	for i, pe := range v.Peers {
		at := item(pn, i)
		where := fmt.Sprintf("probe.peers[%d]", i)
		if !probeName.MatchString(pe.Name) || strings.HasPrefix(pe.Name, "loopback") {
			return lineErr(at, "%s.name %q: required; letters, digits and ._:/-, not starting with \"loopback\"", where, pe.Name)
		}
		if peerNames[pe.Name] {
			return lineErr(at, "%s.name %q: used twice", where, pe.Name)
		}
		peerNames[pe.Name] = true
		if err := checkAddress(pe.Address); err != nil {
			return lineErr(at, "%s.address: %v", where, err)
		}
		for key, a := range map[string]string{"ipoib_address": pe.IPoIBAddress, "ethernet_address": pe.EthernetAddress} {
			if a != "" {
				if err := checkAddress(a); err != nil {
					return lineErr(at, "%s.%s: %v", where, key, err)
				}
			}
		}
		if pe.PerftestHost != "" {
			if err := checkHost(pe.PerftestHost); err != nil {
				return lineErr(at, "%s.perftest_host: %v", where, err)
			}
		}
		if err := checkDevice(at, where, pe.Device, pe.Port, pe.GIDIndex, true); err != nil {
			return err
		}
		if pe.RemoteDevice != "" && !rdmanames.Device(pe.RemoteDevice) {
			return lineErr(at, "%s.remote_device %q: not an RDMA device name", where, pe.RemoteDevice)
		}
		if err := checkTests(keyNode(at, "tests"), where+".tests", pe.Tests, false); err != nil {
			return err
		}
	}
	gn := keyNode(n, "gpu")
	for i, g := range v.GPU {
		at := item(gn, i)
		where := fmt.Sprintf("probe.gpu[%d]", i)
		if g.GPU == nil || *g.GPU < 0 || *g.GPU > MaxGPUIndex {
			return lineErr(at, "%s.gpu: required, the GPU's index in PCI bus order (rdma_gpu_info's gpu label), 0..%d", where, MaxGPUIndex)
		}
		if err := checkDevice(at, where, g.Device, g.Port, g.GIDIndex, false); err != nil {
			return err
		}
		if err := checkTests(keyNode(at, "tests"), where+".tests", g.Tests, false); err != nil {
			return err
		}
		for _, t := range g.Tests {
			if slices.Contains(NotCUDATests, t) {
				return lineErr(keyNode(at, "tests"), "%s.tests: %s cannot use GPU memory (perftest runs CUDA latency tests with read and send only)", where, t)
			}
		}
		if g.Name != "" && (!probeName.MatchString(g.Name) || peerNames[g.Name]) {
			return lineErr(at, "%s.name %q: letters, digits and ._:/-, not a peer's name", where, g.Name)
		}
		name := g.GPUName()
		if names["gpu\x00"+name] {
			return lineErr(at, "%s: a second GPU target named %q; give it a name", where, name)
		}
		names["gpu\x00"+name] = true
	}
	if len(v.Peers) > 0 && v.SecretFile == "" {
		return lineErr(pn, "probe.peers: probe.secret_file is required to authenticate to the peers' responders")
	}
	if err := checkResponder(keyNode(n, "responder"), &v.Responder, v.SecretFile); err != nil {
		return err
	}
	*p = Probe(v)
	return nil
}

func checkResponder(n *yaml.Node, r *ProbeResponder, secretFile string) error {
	if lo, hi, err := parsePortRange(orDefault(r.PerftestPorts, DefaultPerftestPorts)); err != nil || lo > hi {
		return lineErr(keyNode(n, "perftest_ports"), "probe.responder.perftest_ports %q: want lo-hi within 1024-65535", r.PerftestPorts)
	}
	for i, a := range r.Listen {
		if err := checkAddress(a); err != nil {
			return lineErr(item(keyNode(n, "listen"), i), "probe.responder.listen[%d]: %v", i, err)
		}
	}
	for i, c := range r.AllowedClients {
		if _, _, err := net.ParseCIDR(c); err != nil {
			return lineErr(item(keyNode(n, "allowed_clients"), i), "probe.responder.allowed_clients[%d] %q: want a CIDR such as 10.0.0.0/16", i, c)
		}
	}
	if err := checkTests(keyNode(n, "allowed_tests"), "probe.responder.allowed_tests", r.AllowedTests, true); err != nil {
		return err
	}
	perftest := false
	for _, t := range r.AllowedTests {
		if !IsTCPTest(t) {
			perftest = true
		}
	}
	for i, d := range r.Devices {
		if err := checkDevice(item(keyNode(n, "devices"), i), fmt.Sprintf("probe.responder.devices[%d]", i), d.Device, d.Port, d.GIDIndex, true); err != nil {
			return err
		}
	}
	if !r.Enabled {
		return nil
	}
	switch {
	case len(r.Listen) == 0:
		return lineErr(n, "probe.responder.listen: required when the responder is enabled (name the fabric addresses)")
	case len(r.AllowedTests) == 0:
		return lineErr(n, "probe.responder.allowed_tests: required when the responder is enabled")
	case perftest && len(r.Devices) == 0:
		return lineErr(n, "probe.responder.devices: required when a perftest test is allowed")
	case secretFile == "":
		return lineErr(n, "probe.responder: probe.secret_file is required when the responder is enabled")
	}
	return nil
}

// IsTCPTest reports whether name is a test of the native TCP probe.
func IsTCPTest(name string) bool {
	for _, t := range TCPTests {
		if t == name {
			return true
		}
	}
	return false
}

func isPerftestTest(name string) bool {
	for _, t := range PerftestTests {
		if t == name {
			return true
		}
	}
	return false
}

// checkTests: known names, no repeats. The TCP tests run only on demand
// (rdma_doctor probe --compare) or for a peer (tcpOK): scheduled, their tens
// of microseconds would trip the verbs latency alerts.
func checkTests(n *yaml.Node, where string, tests []string, tcpOK bool) error {
	seen := map[string]bool{}
	for i, t := range tests {
		at := item(n, i)
		switch {
		case IsTCPTest(t) && !tcpOK:
			return lineErr(at, "%s: %s runs only from rdma_doctor probe --compare, not on a schedule", where, t)
		case !isPerftestTest(t) && !IsTCPTest(t):
			return lineErr(at, "%s: unknown test %q (want %s)", where, t, strings.Join(append(append([]string{}, PerftestTests...), TCPTests...), ", "))
		case seen[t]:
			return lineErr(at, "%s: %s listed twice", where, t)
		}
		seen[t] = true
	}
	return nil
}

// checkRun applies probe/perftest's limits (perftest.MinSize... there):
// size 1..8 MiB, iterations 5..10^7, a bandwidth duration of whole seconds
// in 5s..300s (perftest measures D minus a 2 s margin on each side).
func checkRun(n *yaml.Node, where string, r ProbeRun, bandwidth bool) error {
	if r.Size != 0 && (r.Size < 1 || r.Size > 8<<20) {
		return lineErr(keyNode(n, "size"), "%s.size %d: want 1..8388608 bytes", where, r.Size)
	}
	if r.Iterations != 0 && (r.Iterations < 5 || r.Iterations > 10_000_000) {
		return lineErr(keyNode(n, "iterations"), "%s.iterations %d: want 5..10000000", where, r.Iterations)
	}
	if r.Duration != 0 {
		d := time.Duration(r.Duration)
		switch {
		case !bandwidth:
			return lineErr(keyNode(n, "duration"), "%s.duration: latency tests run a count of iterations (perftest prints no percentiles in duration mode)", where)
		case d < 5*time.Second || d > 300*time.Second || d%time.Second != 0:
			return lineErr(keyNode(n, "duration"), "%s.duration %v: want whole seconds in 5s..300s", where, d)
		case r.Iterations != 0:
			return lineErr(keyNode(n, "duration"), "%s: duration and iterations exclude each other", where)
		}
	}
	return nil
}

func checkDevice(n *yaml.Node, where, device string, port int, gid *int, required bool) error {
	if device == "" && required {
		return lineErr(n, "%s.device: required (the metrics are labelled with it)", where)
	}
	if device != "" && !rdmanames.Device(device) {
		return lineErr(n, "%s.device %q: not an RDMA device name", where, device)
	}
	if port < 0 || port > 255 {
		return lineErr(n, "%s.port %d: want 1..255", where, port)
	}
	if gid != nil && (*gid < 0 || *gid > 1023) {
		return lineErr(n, "%s.gid_index %d: want 0..1023", where, *gid)
	}
	return nil
}

// checkAddress accepts host:port with a host name or IP address and a
// numeric port.
func checkAddress(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q: want host:port", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port must be a number 1..65535", a)
	}
	if host == "" {
		return fmt.Errorf("%q: name the address (an empty host would listen on every interface)", a)
	}
	return checkHost(host)
}

// checkHost accepts an IP address or an RFC 1123 host name.
func checkHost(h string) error { return rdmanames.Host(h) }

func parsePortRange(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo < 1024 || hi > 65535 {
		return 0, 0, fmt.Errorf("bad port range %q", s)
	}
	return lo, hi, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// item is the i-th element node of a sequence node, or n itself.
func item(n *yaml.Node, i int) *yaml.Node {
	if n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
		return n.Content[i]
	}
	return n
}
