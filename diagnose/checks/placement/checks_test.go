// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/cpulist"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

func TestProbeChecks(t *testing.T) {
	at := diagnosetest.T0
	// The series as probe.Diagnose hands them over (its test checks
	// that adaptation).
	lat := func(peer string, loopback bool, typical float64) diagnose.ProbeSeries {
		mode := "peer"
		if loopback {
			mode = "loopback"
		}
		r := &diagnose.ProbeRun{Mode: mode, Loopback: loopback, Start: at, Success: true, Size: 2, Iterations: 1000,
			Latency: &diagnose.ProbeLatency{Min: typical * 0.9, Typical: typical, Max: typical * 3, P99: typical * 1.5, HasPercentiles: true}}
		return diagnose.ProbeSeries{Peer: peer, Test: "ib_write_lat", Device: "mlx5_0", Port: 1, Last: r, LastSuccess: at}
	}
	bw := func(peer string, ratio float64) diagnose.ProbeSeries {
		avg := 50e9 * ratio
		r := &diagnose.ProbeRun{Mode: "peer", Start: at, Success: true, Size: 65536, Bandwidth: &avg, PortRate: 50e9}
		return diagnose.ProbeSeries{Peer: peer, Test: "ib_write_bw", Bandwidth: true, Device: "mlx5_0", Port: 1, Last: r, LastSuccess: at}
	}
	failed := func(peer, test, kind string, transport bool) diagnose.ProbeSeries {
		r := &diagnose.ProbeRun{Start: at, ErrorKind: kind, Error: "perftest said so", TransportFailed: transport}
		return diagnose.ProbeSeries{Peer: peer, Test: test, Bandwidth: strings.HasSuffix(test, "_bw"), Device: "mlx5_0", Port: 1, Last: r}
	}
	s := diagnosetest.SnapWith()
	s.Probe = []diagnose.ProbeSeries{
		lat("loopback", true, 1.2e-6), lat("loop-slow", true, 2.5e-6), lat("peer-b", false, 2.5e-6),
		failed("peer-c", "ib_send_lat", "retry_exceeded", true), failed("peer-d", "ib_send_lat", "busy", false),
		bw("peer-b", 0.95), bw("peer-e", 0.5), failed("peer-f", "ib_read_bw", "port_down", true),
	}
	cfg := &config.Config{}
	lf, _ := checkProbeLatency(s, nil, cfg)
	bf, _ := checkProbeBandwidth(s, nil, cfg)
	for _, tc := range []struct {
		fs     []diagnose.Finding
		target string
		sev    diagnose.Severity
	}{
		{lf, "mlx5_0/1 ib_write_lat loopback", diagnose.Pass},
		{lf, "mlx5_0/1 ib_write_lat loop-slow", diagnose.Warn}, // 2.5 µs > 2 µs loopback
		{lf, "mlx5_0/1 ib_write_lat peer-b", diagnose.Pass},    // 2.5 µs < 5 µs through a switch
		{lf, "mlx5_0/1 ib_send_lat peer-c", diagnose.Fail},     // the transport gave up
		{lf, "mlx5_0/1 ib_send_lat peer-d", diagnose.Warn},     // could not measure
		{bf, "mlx5_0/1 ib_write_bw peer-b", diagnose.Pass},     // 95 %
		{bf, "mlx5_0/1 ib_write_bw peer-e", diagnose.Warn},     // 50 %
		{bf, "mlx5_0/1 ib_read_bw peer-f", diagnose.Fail},      // port down
	} {
		if f := diagnosetest.FindingOf(t, tc.fs, tc.target); f.Severity != tc.sev {
			t.Errorf("%s: %s, want %s: %+v", tc.target, f.Severity, tc.sev, f)
		}
	}
	if f := diagnosetest.FindingOf(t, bf, "mlx5_0/1 ib_write_bw peer-e"); !strings.Contains(f.Observed, "200.0 Gb/s average, 50% of the port's 400 Gb/s") {
		t.Errorf("bandwidth observed %q", f.Observed)
	}
	// A stricter config turns the peer latency into a warning.
	strict := diagnosetest.MustParse(t, "diagnose:\n  thresholds:\n    probe: {switch_latency_us: 2}\n")
	lf, _ = checkProbeLatency(s, nil, strict)
	if f := diagnosetest.FindingOf(t, lf, "mlx5_0/1 ib_write_lat peer-b"); f.Severity != diagnose.Warn {
		t.Errorf("switch_latency_us 2: %+v", f)
	}
	s.Probe = nil
	if fs, _ := checkProbeLatency(s, nil, cfg); len(fs) != 1 || fs[0].Evidence != NoProbeResults {
		t.Errorf("no results: %+v", fs)
	}
}

func TestIPoIBChecks(t *testing.T) {
	opt := func(v bool) infiniband.Opt[bool] { return infiniband.Opt[bool]{V: v, OK: true} }
	nd := func(name, mode string, mtu uint64, enhanced, cm bool) netdev.Netdev {
		return netdev.Netdev{Name: name, Kind: netdev.KindIPoIB, MTU: infiniband.Opt[uint64]{V: mtu, OK: true}, IPv6Disabled: opt(true),
			IPoIB: &netdev.IPoIB{Mode: infiniband.Opt[string]{V: mode, OK: true}, Enhanced: opt(enhanced), ConnectedModeSupported: opt(cm)}}
	}
	s := diagnosetest.SnapWith()
	diagnosetest.Fixed(s).NetdevsValue = &netdev.Snapshot{Netdevs: []netdev.Netdev{
		nd("enh", "datagram", 4092, true, false),    // enhanced IPoIB: datagram 4092 is right
		nd("legacy", "datagram", 2044, false, true), // legacy, 2K fabric
		nd("cm", "connected", 65520, false, true),
		nd("cmsmall", "connected", 4092, false, true),
		nd("dgodd", "datagram", 1500, false, true),
	}}
	for _, tc := range []struct {
		cfg    string
		check  func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error)
		target string
		sev    diagnose.Severity
	}{
		{"", checkIPoIBMode, "enh", diagnose.Pass},
		{"", checkIPoIBMode, "legacy", diagnose.Pass},
		{"diagnose:\n  policies:\n    ipoib_mode: connected\n", checkIPoIBMode, "enh", diagnose.Pass}, // never asks the impossible
		{"diagnose:\n  policies:\n    ipoib_mode: connected\n", checkIPoIBMode, "legacy", diagnose.Warn},
		{"diagnose:\n  policies:\n    ipoib_mode: datagram\n", checkIPoIBMode, "cm", diagnose.Warn},
		{"", checkIPoIBMTU, "enh", diagnose.Pass},
		{"", checkIPoIBMTU, "legacy", diagnose.Pass},
		{"", checkIPoIBMTU, "cm", diagnose.Pass},
		{"", checkIPoIBMTU, "cmsmall", diagnose.Warn},
		{"", checkIPoIBMTU, "dgodd", diagnose.Warn},
		{"", checkIPoIBIPv6, "enh", diagnose.Pass},
		{"diagnose:\n  policies:\n    ipoib_ipv6: enabled\n", checkIPoIBIPv6, "enh", diagnose.Warn},
		{"diagnose:\n  policies:\n    ipoib_ipv6: disabled\n", checkIPoIBIPv6, "enh", diagnose.Pass},
	} {
		fs, err := tc.check(s, nil, diagnosetest.MustParse(t, tc.cfg))
		if err != nil {
			t.Fatal(err)
		}
		if f := diagnosetest.FindingOf(t, fs, tc.target); f.Severity != tc.sev || (f.Severity == diagnose.Warn && f.Remedy == "") {
			t.Errorf("%q %s: %+v, want %s", tc.cfg, tc.target, f, tc.sev)
		}
	}
}

func TestIRQIncompleteSkips(t *testing.T) {
	local, _ := cpulist.Parse("0-3")
	q := &irq.IRQ{Number: 100, Name: "mlx5_comp0@pci:0000:3b:00.0"}
	d := irq.Device{Name: "mlx5_0", PCI: pci.Function{Address: "0000:3b:00.0", LocalCPUs: infiniband.Opt[cpulist.Set]{V: local, OK: true}},
		IRQs: []irq.DeviceIRQ{{IRQ: q, Vector: irq.Vector{Kind: irq.Completion}, Affinity: infiniband.Opt[cpulist.Set]{V: cpulist.Of(9), OK: true}}}}
	s := diagnosetest.SnapWith()
	diagnosetest.Fixed(s).PlacementValue = &irq.Snapshot{Interrupts: &irq.Interrupts{}, Devices: []irq.Device{d}}
	fs, _ := checkIRQLocal(s, nil, &config.Config{})
	if f := diagnosetest.FindingOf(t, fs, "mlx5_0"); f.Severity != diagnose.Warn || !strings.Contains(f.Evidence, "irq 100") {
		t.Errorf("off-node IRQ: %+v", f)
	}
	s.Placement().Devices[0].Incomplete = true
	fs, _ = checkIRQLocal(s, nil, &config.Config{})
	if f := diagnosetest.FindingOf(t, fs, "mlx5_0"); f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "torn") {
		t.Errorf("incomplete IRQ list: %+v", f)
	}
}

// cgroup.rdma: "*" expands over the host's devices, a named device wins
// over "*", and each way a cgroup can miss its limit says which.
func TestRDMACgroupCheck(t *testing.T) {
	cfg := diagnosetest.MustParse(t, `diagnose:
  policies:
    rdma_cgroup_limits:
      - {cgroup: /slurm, device: "*", hca_handle: 64, hca_object: max}
      - {cgroup: /slurm, device: mlx5_1, hca_handle: 8, hca_object: 1000}
      - {cgroup: /gone, device: mlx5_0, hca_handle: 1, hca_object: 1}
      - {cgroup: /slurm, device: mlx5_9, hca_handle: 1, hca_object: 1}
`)
	s := diagnosetest.SnapWith(diagnosetest.IBDev("mlx5_0"), diagnosetest.IBDev("mlx5_1"))
	diagnosetest.Fixed(s).TuningValue = &tuning.Snapshot{RDMAMaxRead: []string{"/slurm"}, RDMACgroups: []tuning.CgroupRDMALimit{
		{Cgroup: "/slurm", RDMALimit: tuning.RDMALimit{Device: "mlx5_0", HCAHandle: tuning.Unlimited, HCAObject: tuning.Unlimited}},
		{Cgroup: "/slurm", RDMALimit: tuning.RDMALimit{Device: "mlx5_1", HCAHandle: 8, HCAObject: 1000}},
	}}
	wants := RDMACgroupWants(s, cfg)
	var got []string
	for _, w := range wants {
		got = append(got, w.Cgroup+" "+tuning.FormatRDMALimit(w.Limit))
	}
	want := []string{"/slurm mlx5_0 hca_handle=64 hca_object=max", "/slurm mlx5_1 hca_handle=8 hca_object=1000",
		"/gone mlx5_0 hca_handle=1 hca_object=1", "/slurm mlx5_9 hca_handle=1 hca_object=1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wants\n %q\nwant\n %q", got, want)
	}
	fs, err := checkRDMACgroups(s, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		sev    diagnose.Severity
		text   string
	}{
		{"/slurm mlx5_0", diagnose.Warn, `echo "mlx5_0 hca_handle=64 hca_object=max" > /sys/fs/cgroup/slurm/rdma.max`},
		{"/slurm mlx5_1", diagnose.Pass, "hca_handle=8 hca_object=1000"},
		{"/gone mlx5_0", diagnose.Warn, "echo +rdma > /sys/fs/cgroup/cgroup.subtree_control"},
		{"/slurm mlx5_9", diagnose.Warn, "not registered with the rdma controller"},
	} {
		f := diagnosetest.FindingOf(t, fs, c.target)
		if all := f.Observed + " " + f.Remedy; f.Severity != c.sev || !strings.Contains(all, c.text) {
			t.Errorf("%s: %s %q, want %s with %q", c.target, f.Severity, all, c.sev, c.text)
		}
		if (f.Action == "rdma-cgroup") != (c.target == "/slurm mlx5_0") {
			t.Errorf("%s: action %q", c.target, f.Action)
		}
	}
	// Without a policy the check skips; with "*" and no devices too.
	if fs, _ := checkRDMACgroups(s, nil, &config.Config{}); len(fs) != 1 || fs[0].Severity != diagnose.Skip {
		t.Errorf("no policy: %+v", fs)
	}
	star := diagnosetest.MustParse(t, "diagnose:\n  policies:\n    rdma_cgroup_limits: [{cgroup: /a, device: \"*\", hca_handle: 1, hca_object: 1}]\n")
	if fs, _ := checkRDMACgroups(diagnosetest.SnapWith(), nil, star); len(fs) != 1 || fs[0].Severity != diagnose.Skip {
		t.Errorf("no devices: %+v", fs)
	}
}

// TestIRQUnclassifiedSkips: a device whose IRQs carry names in no known
// form is skipped with a text that says it has IRQs that cannot be
// classified (not "0 IRQs", not "none a completion vector", not "torn"),
// by every IRQ check that counts completion vectors, and says what to do.
func TestIRQUnclassifiedSkips(t *testing.T) {
	local, _ := cpulist.Parse("0-3")
	q := &irq.IRQ{Number: 45, Name: "mlx5_xyz@pci:0000:3b:00.0"}
	for _, known := range []bool{false, true} {
		d := irq.Device{Name: "mlx5_0", PCI: pci.Function{Address: "0000:3b:00.0", LocalCPUs: infiniband.Opt[cpulist.Set]{V: local, OK: true}},
			IRQs:         []irq.DeviceIRQ{{IRQ: q, Vector: irq.Vector{Kind: irq.Other, Address: "0000:3b:00.0"}, Affinity: infiniband.Opt[cpulist.Set]{V: cpulist.Of(9), OK: true}}},
			Unclassified: 1, Incomplete: true}
		if known {
			// Beside a recognised completion vector the unknown one still
			// makes every count over the device a guess.
			d.IRQs = append(d.IRQs, irq.DeviceIRQ{IRQ: &irq.IRQ{Number: 46, Name: "mlx5_comp0@pci:0000:3b:00.0"},
				Vector: irq.Vector{Kind: irq.Completion}, Affinity: infiniband.Opt[cpulist.Set]{V: cpulist.Of(1), OK: true}})
		}
		s := diagnosetest.SnapWith()
		diagnosetest.Fixed(s).PlacementValue = &irq.Snapshot{Interrupts: &irq.Interrupts{}, Devices: []irq.Device{d}}
		for name, check := range map[string]func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error){"irq.local": checkIRQLocal, "irq.spread": checkIRQSpread} {
			fs, _ := check(s, nil, &config.Config{})
			f := diagnosetest.FindingOf(t, fs, "mlx5_0")
			if f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "names in no naming form") || !strings.Contains(f.Evidence, `irq 45 "mlx5_xyz@pci:0000:3b:00.0"`) ||
				!strings.Contains(f.Evidence, "(not 0)") || !strings.Contains(f.Observed, "1 of the ") ||
				!strings.Contains(f.Remedy, "grep 0000:3b:00.0 /proc/interrupts") || !strings.Contains(f.Remedy, "0-3") {
				t.Errorf("%s (completion vector known too: %v): %+v", name, known, f)
			}
			for _, wrong := range []string{"torn", "none a completion vector", "no line of /proc/interrupts"} {
				if strings.Contains(f.Evidence, wrong) {
					t.Errorf("%s: says %q: %s", name, wrong, f.Evidence)
				}
			}
		}
	}
}
