// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnosetest

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// MustParse parses a config from YAML, failing the test on an error.
func MustParse(t testing.TB, y string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// SnapWith is a snapshot with one healthy InfiniBand port, for checks that
// only read the class.
func SnapWith(devs ...infiniband.Device) *diagnose.Reading {
	return &diagnose.Reading{Time: time.Unix(1000, 0), Host: &Host{ClassValue: &infiniband.Class{Devices: devs}}}
}

// IBPort is an InfiniBand port in the given state, physical state and rate.
func IBPort(num int, state, phys int, rate string) infiniband.Port {
	r, _ := infiniband.ParseRate(rate)
	return infiniband.Port{Num: num,
		State:     infiniband.Opt[infiniband.Enum]{V: infiniband.Enum{Value: state, Name: map[int]string{1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}[state]}, OK: true},
		PhysState: infiniband.Opt[infiniband.Enum]{V: infiniband.Enum{Value: phys, Name: map[int]string{2: "Polling", 3: "Disabled", 5: "LinkUp", 6: "LinkErrorRecovery"}[phys]}, OK: true},
		Rate:      infiniband.Opt[infiniband.Rate]{V: r, OK: true},
		LinkLayer: infiniband.Opt[string]{V: "InfiniBand", OK: true},
		SMLID:     infiniband.Opt[uint64]{V: 1, OK: true},
	}
}

// IBDev is a ConnectX-6 CA with the given ports.
func IBDev(name string, ports ...infiniband.Port) infiniband.Device {
	return infiniband.Device{Name: name, PCIAddress: "0000:3b:00.0",
		NodeType:    infiniband.Opt[infiniband.Enum]{V: infiniband.Enum{Value: 1, Name: "CA"}, OK: true},
		HCAType:     infiniband.Opt[string]{V: "MT4123", OK: true},
		BoardID:     infiniband.Opt[string]{V: "MT_0000000223", OK: true},
		FirmwareVer: infiniband.Opt[string]{V: "20.41.1000", OK: true},
		Ports:       ports}
}

// FindingOf is the finding for target, failing the test when there is none.
func FindingOf(t testing.TB, fs []diagnose.Finding, target string) diagnose.Finding {
	t.Helper()
	for _, f := range fs {
		if f.Target == target {
			return f
		}
	}
	t.Fatalf("no finding for %s in %+v", target, fs)
	return diagnose.Finding{}
}

// The fabric checks are tested on sweeps built from recordings: the
// topology is fixtures/tools/iblinkinfo-l-ibsim.txt (ibsim 0.10, OpenSM,
// iblinkinfo --line) and the counters are the perfquery outputs recorded
// on the same simulated fabric (internal/read/fabric/testdata/perfquery, see its
// README for the faults set: leaf1 port 1 SymbolErrorCounter 4200, port 2
// 65535 (saturated), port 36 LocalLinkIntegrityErrors 15 (saturated) and
// LinkDownedCounter 3; leaf2 port 35 PortRcvErrors 48). Each test says
// what it changed to make an earlier or later sweep.

// Leaf1GUID and Leaf2GUID are the recorded ibsim fabric's two leaves.
const (
	Leaf1GUID  = 0x0000000000200001
	Leaf2GUID  = 0x0000000000200002
	spine1GUID = 0x0000000000200000
	node01GUID = 0x0000000000100001
)

// ReadTopology parses a recorded iblinkinfo output, after edit (nil: none).
func ReadTopology(t *testing.T, path string, edit func(string) string) *fabric.Fabric {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if edit != nil {
		text = edit(text)
	}
	f, err := fabric.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var pqHeader = regexp.MustCompile(`^# Port counters: Lid (\d+) port (\d+) `)

// readPerfquery reads a recorded `perfquery -l` output into field values
// per port (the fields the sweep reads, by perfquery's names).
func readPerfquery(t *testing.T, name string) map[int]map[string]uint64 {
	t.Helper()
	fh, err := os.Open(filepath.Join(Root, "internal", "read", "fabric", "testdata", "perfquery", name))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	out := map[int]map[string]uint64{}
	var cur map[string]uint64
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := sc.Text()
		if m := pqHeader.FindStringSubmatch(line); m != nil {
			port, _ := strconv.Atoi(m[2])
			cur = map[string]uint64{}
			out[port] = cur
			continue
		}
		field, val, ok := strings.Cut(line, ":")
		if !ok || cur == nil {
			continue
		}
		if v, err := strconv.ParseUint(strings.TrimLeft(val, "."), 0, 64); err == nil {
			cur[field] = v
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no port blocks", name)
	}
	return out
}

// RecordedSweep is a sweep of every switch port of topo with the recorded
// PortCounters values (32-bit data counters: the recorded PMA does not
// advertise the extended ones).
func RecordedSweep(t *testing.T, start time.Time, topo *fabric.Fabric) *fabric.Sweep {
	t.Helper()
	byGUID := map[uint64]map[int]map[string]uint64{
		spine1GUID: readPerfquery(t, "spine1-l-1-36.stdout"),
		Leaf1GUID:  readPerfquery(t, "leaf1-l-1-36.stdout"),
		Leaf2GUID:  readPerfquery(t, "leaf2-l-1-36.stdout"),
	}
	sw := &fabric.Sweep{Start: start, Topology: topo, Failures: map[fabric.Reason]int{}}
	for _, pl := range topo.PortLines {
		if !pl.Switch {
			continue
		}
		pc := fabric.PortCounters{PortLine: pl}
		vals := byGUID[pl.GUID][pl.Port]
		if vals == nil {
			t.Fatalf("no recorded counters for 0x%016x port %d", pl.GUID, pl.Port)
		}
		for id := range fabric.NumCounters {
			c := fabric.Counters[id]
			v, ok := vals[c.Field]
			if !ok {
				t.Fatalf("recording lacks %s", c.Field)
			}
			bits := uint8(c.Spec.Bits)
			if bits == 0 || id == fabric.TransmitWait {
				bits = 32
			}
			pc.Values[id] = fabric.Value{V: v, Bits: bits, Present: true}
		}
		sw.Ports = append(sw.Ports, pc)
	}
	return sw
}

// SetValue sets one counter of one port of a sweep.
func SetValue(t *testing.T, sw *fabric.Sweep, guid uint64, port int, id fabric.CounterID, v uint64) {
	t.Helper()
	p := sw.Find(guid, port)
	if p == nil {
		t.Fatalf("no port 0x%016x/%d in the sweep", guid, port)
	}
	p.Values[id].V = v
}

// FindingsOf are the findings of one check.
func FindingsOf(fs []diagnose.Finding, check string) []diagnose.Finding {
	var out []diagnose.Finding
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// FindingFor is the finding of check on target; nil when there is none.
func FindingFor(fs []diagnose.Finding, check, target string) *diagnose.Finding {
	for i := range fs {
		if fs[i].Check == check && fs[i].Target == target {
			return &fs[i]
		}
	}
	return nil
}

// Fixtures is the recorded host trees (fixtures/hosts).
var Fixtures = filepath.Join(Root, "fixtures", "hosts")

// Root is the repository's root, found from this file's path: the tests of
// every package under diagnose/ read the same recorded data.
var Root = func() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("diagnosetest: no caller information to find the repository root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

// FixtureConfig loads a fixture host's own config file, if it has one.
func FixtureConfig(t testing.TB, root string) *config.Config {
	t.Helper()
	p := filepath.Join(root, "etc/rdma_doctor/rdma_doctor.yml")
	if _, err := os.Stat(p); err != nil {
		return &config.Config{}
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// HostOf is the Host of a fixture root with the default options.
func HostOf(root string) *host.Host { return HostAt(root, nil, nil) }

// HostAt is the Host of a fixture root with cfg's tuning options, on the
// clock now (nil: time.Now).
func HostAt(root string, cfg *config.Config, now func() time.Time) *host.Host {
	p, _ := hostfs.Paths{Rootfs: root}.Resolve()
	o := host.Options{Paths: p, Now: now}
	if cfg != nil {
		o.Tuning = tuning.Options{MemlockProcesses: cfg.Tuning.MemlockProcesses}
	}
	return host.New(o)
}

// EvaluateHostWith reads a host root once (or twice, with change applied
// between the samples, 10 minutes apart) and evaluates every check of all.
func EvaluateHostWith(t testing.TB, root string, change func(), all []*diagnose.Check) *diagnose.Report {
	t.Helper()
	cfg := FixtureConfig(t, root)
	e, err := diagnose.NewEvaluator(cfg, nil, all)
	if err != nil {
		t.Fatal(err)
	}
	now := T0
	r := &diagnose.Reader{Host: HostAt(root, cfg, func() time.Time { return now })}
	h := diagnose.HistoryFor(cfg.Diagnose.HistoryWindow(), cfg.Diagnose.SampleInterval())
	s := r.Read(context.Background())
	h.Add(s)
	if change != nil {
		change()
		now = now.Add(10 * time.Minute)
		s = r.Read(context.Background())
		h.Add(s)
	}
	return e.Evaluate(s, h)
}

// FixtureHosts are the names of the recorded hosts under Fixtures.
func FixtureHosts(t testing.TB) []string {
	entries, err := os.ReadDir(Fixtures)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, e := range entries {
		if e.IsDir() {
			hosts = append(hosts, e.Name())
		}
	}
	return hosts
}

// ReportFinding is a report's finding of check on target; ok is false when
// there is none.
func ReportFinding(r *diagnose.Report, check, target string) (diagnose.Finding, bool) {
	for _, f := range r.Findings {
		if f.Check == check && f.Target == target {
			return f, true
		}
	}
	return diagnose.Finding{}, false
}

// CopyTree copies a fixture host, keeping its relative symlinks, so a test
// can change files between samples.
func CopyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	hostfstest.CopyTree(t, src, dst)
	return dst
}

// SetCounter rewrites a counter file of a copied host, through the class
// symlink as the kernel lays it out.
func SetCounter(t testing.TB, root, dev, rel string, v uint64) {
	t.Helper()
	p := filepath.Join(root, "sys/class/infiniband", dev, rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strconv.FormatUint(v, 10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadCounter reads a counter file of a copied host (SetCounter's path).
func ReadCounter(t testing.TB, root, dev, rel string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sys/class/infiniband", dev, rel))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// CounterSnap is a snapshot of one port with the given PMA and hw counters.
func CounterSnap(t time.Time, pma, hw map[string]uint64) *diagnose.Reading {
	p := IBPort(1, 4, 5, "200 Gb/sec (4X HDR)")
	for n, v := range pma {
		p.Counters = append(p.Counters, infiniband.Counter{Name: n, Value: v})
	}
	for n, v := range hw {
		p.HWCounters = append(p.HWCounters, infiniband.Counter{Name: n, Value: v})
	}
	s := SnapWith(IBDev("mlx5_0", p))
	s.Time = t
	return s
}

// T0 is the tests' first sample time.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// CollectKeys adds every object key of decoded JSON v to keys.
func CollectKeys(v any, keys map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			keys[k] = true
			CollectKeys(c, keys)
		}
	case []any:
		for _, c := range x {
			CollectKeys(c, keys)
		}
	}
}

// Saturated is the ctr.integrity finding of a saturated counter on dev/1.
func Saturated(dev string) diagnose.Finding {
	return diagnose.Finding{Check: "ctr.integrity", Severity: diagnose.Warn, Target: dev + "/1", Unknown: true,
		Observed: "excessive_buffer_overrun_errors unknown (saturated)",
		Remedy:   "clear the saturated counters so they count again: perfquery -C " + dev + " -P 1 -R (rdma_doctor judges increases, so clearing loses nothing)"}
}

// StrictConfig makes the vendor-specific remedies appear on every
// device of a host: every port expects the other link layer, and every
// device's firmware is below the minimum.
func StrictConfig(s *diagnose.Reading) *config.Config {
	cfg := &config.Config{}
	if s.IB() == nil {
		return cfg
	}
	for i := range s.IB().Devices {
		d := &s.IB().Devices[i]
		if d.HCAType.OK {
			cfg.Diagnose.Firmware = append(cfg.Diagnose.Firmware, config.FirmwarePolicy{HCAType: d.HCAType.V, Minimum: "999.0"})
		}
		if d.BoardID.OK {
			cfg.Diagnose.Firmware = append(cfg.Diagnose.Firmware, config.FirmwarePolicy{BoardID: d.BoardID.V, Minimum: "999.0"})
		}
		for j := range d.Ports {
			p := &d.Ports[j]
			other := config.LinkLayer("InfiniBand")
			if p.IsInfiniBand() {
				other = "Ethernet"
			}
			cfg.Diagnose.LinkLayers = append(cfg.Diagnose.LinkLayers, config.LinkLayerRule{Device: d.Name, Port: p.Num, LinkLayer: other})
		}
	}
	return cfg
}

// Catalogue is the checks the concern functions add, in their order: a
// check package's tests evaluate their own checks without the whole
// catalogue (diagnose/checks imports them).
func Catalogue(adds ...func(*diagnose.CheckList)) []*diagnose.Check {
	var l diagnose.CheckList
	for _, add := range adds {
		add(&l)
	}
	return l
}
