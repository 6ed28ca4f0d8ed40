// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
)

func TestPortChecks(t *testing.T) {
	cfg := diagnosetest.MustParse(t, "expected:\n  boards:\n    - {board_id: MT_0000000223, rate_gbps: 200}\n"+
		"diagnose:\n  link_layers:\n    - {hca_type: MT4123, link_layer: InfiniBand}\n")
	noSM := diagnosetest.IBPort(1, 2, 5, "200 Gb/sec (4X HDR)")
	noSM.SMLID.V = 0
	eth := diagnosetest.IBPort(1, 4, 5, "200 Gb/sec (4X HDR)")
	eth.LinkLayer.V = "Ethernet"
	s := diagnosetest.SnapWith(
		diagnosetest.IBDev("ok", diagnosetest.IBPort(1, 4, 5, "200 Gb/sec (4X HDR)")),
		diagnosetest.IBDev("fdr", diagnosetest.IBPort(1, 4, 5, "56 Gb/sec (4X FDR)")),
		diagnosetest.IBDev("hdr100", diagnosetest.IBPort(1, 4, 5, "100 Gb/sec (2X HDR)")),
		diagnosetest.IBDev("fast", diagnosetest.IBPort(1, 4, 5, "400 Gb/sec (4X NDR)")),
		diagnosetest.IBDev("polling", diagnosetest.IBPort(1, 1, 2, "10 Gb/sec (4X SDR)")),
		diagnosetest.IBDev("disabled", diagnosetest.IBPort(1, 1, 3, "10 Gb/sec (4X SDR)")),
		diagnosetest.IBDev("flaky", diagnosetest.IBPort(1, 1, 6, "10 Gb/sec (4X SDR)")),
		diagnosetest.IBDev("nosm", noSM),
		diagnosetest.IBDev("armed", diagnosetest.IBPort(1, 3, 5, "200 Gb/sec (4X HDR)")),
		diagnosetest.IBDev("eth", eth),
	)
	// These ports went down after having been up: they must be up.
	diagnosetest.Fixed(s).WasActiveFunc = func(d string, _ int) bool { return d == "polling" || d == "disabled" || d == "flaky" }
	run := func(c func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error)) []diagnose.Finding {
		fs, err := c(s, diagnose.NewHistory(0, 2), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	for _, tc := range []struct {
		name   string
		fs     []diagnose.Finding
		target string
		sev    diagnose.Severity
		remedy []string
	}{
		{"rate ok", run(checkPortRate), "ok/1", diagnose.Pass, nil},
		{"rate FDR", run(checkPortRate), "fdr/1", diagnose.Fail, []string{"switch-port speed setting", "cable", "mlxlink -d 0000:3b:00.0 -p 1", "FDR"}},
		{"rate 2X", run(checkPortRate), "hdr100/1", diagnose.Fail, []string{"cable", "switch-port speed/width setting", "2X"}},
		{"rate faster", run(checkPortRate), "fast/1", diagnose.Warn, []string{"expectation"}},
		{"rate of a down port", run(checkPortRate), "polling/1", diagnose.Skip, nil},
		{"phys ok", run(checkPortPhys), "ok/1", diagnose.Pass, nil},
		{"phys polling", run(checkPortPhys), "polling/1", diagnose.Fail, []string{"no peer", "cable"}},
		{"phys disabled", run(checkPortPhys), "disabled/1", diagnose.Fail, []string{"administratively disabled", "ibportstate -C disabled -P 1"}},
		{"phys recovery", run(checkPortPhys), "flaky/1", diagnose.Fail, []string{"unstable"}},
		{"state ok", run(checkPortState), "ok/1", diagnose.Pass, nil},
		{"state INIT LinkUp", run(checkPortState), "nosm/1", diagnose.Warn, []string{"no subnet manager", "sminfo -C nosm -P 1"}},
		{"state ARMED", run(checkPortState), "armed/1", diagnose.Fail, []string{"ARMED"}},
		{"state DOWN", run(checkPortState), "polling/1", diagnose.Fail, []string{"port.phys"}},
		{"sm ok", run(checkSMPresent), "ok/1", diagnose.Pass, nil},
		{"sm missing", run(checkSMPresent), "nosm/1", diagnose.Fail, []string{"opensm"}},
		{"sm down port", run(checkSMPresent), "polling/1", diagnose.Skip, nil},
		{"layer ok", run(checkPortLayer), "ok/1", diagnose.Pass, nil},
		{"layer VPI Ethernet", run(checkPortLayer), "eth/1", diagnose.Fail, []string{"mlxconfig -d 0000:3b:00.0 set LINK_TYPE_P1=1"}},
	} {
		f := diagnosetest.FindingOf(t, tc.fs, tc.target)
		if f.Severity != tc.sev {
			t.Errorf("%s: %s is %s, want %s: %+v", tc.name, tc.target, f.Severity, tc.sev, f)
		}
		for _, r := range tc.remedy {
			if !strings.Contains(f.Remedy, r) {
				t.Errorf("%s: remedy %q lacks %q", tc.name, f.Remedy, r)
			}
		}
	}
	// RoCE ports have no SM: never judged by sm.present.
	for _, f := range run(checkSMPresent) {
		if f.Target == "eth/1" {
			t.Errorf("sm.present judged a RoCE port: %+v", f)
		}
	}
	// No expectation: skip, never a guess from the width.
	fs, _ := checkPortRate(s, nil, &config.Config{})
	if f := diagnosetest.FindingOf(t, fs, "hdr100/1"); f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "expected.boards") {
		t.Errorf("without an expectation: %+v", f)
	}
}

func TestFirmwareChecks(t *testing.T) {
	dev := func(name, hca, board, fw string) infiniband.Device {
		d := diagnosetest.IBDev(name)
		d.HCAType.V, d.BoardID.V, d.FirmwareVer.V = hca, board, fw
		return d
	}
	s := diagnosetest.SnapWith(
		dev("a", "MT4129", "MT_0000000838", "28.41.1000"),
		dev("b", "MT4129", "MT_0000000838", "28.41.1000"),
		dev("c", "MT4129", "MT_0000000838", "28.39.1002"),
		dev("d", "MT4123", "MT_0000000223", "20.41.1000"),
		dev("e", "MT4125", "MT_X", "22.32.2004"),
	)
	cfg := diagnosetest.MustParse(t, "diagnose:\n  firmware:\n    - {hca_type: MT4129, minimum: 28.40.0}\n"+
		"    - {board_id: MT_0000000223, allowed: [20.42.1000]}\n    - {hca_type: MT4123, minimum: 1.0}\n")
	fs, err := checkFWVersion(s, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]diagnose.Severity{"a": diagnose.Pass, "c": diagnose.Warn, "d": diagnose.Warn, "e": diagnose.Skip} {
		if f := diagnosetest.FindingOf(t, fs, target); f.Severity != want {
			t.Errorf("fw.version %s: %s, want %s (%+v)", target, f.Severity, want, f)
		}
	}
	if f := diagnosetest.FindingOf(t, fs, "d"); !strings.Contains(f.Expected, "board_id MT_0000000223") {
		t.Errorf("the board_id policy must win over hca_type: %+v", f)
	}
	if f := diagnosetest.FindingOf(t, fs, "c"); !strings.Contains(f.Remedy, "mlxfwmanager") || !strings.Contains(f.Remedy, "28.40.0 or later") {
		t.Errorf("remedy %q", f.Remedy)
	}
	fs, _ = checkFWUniform(s, nil, cfg)
	for target, want := range map[string]diagnose.Severity{"a": diagnose.Pass, "b": diagnose.Pass, "c": diagnose.Warn, "d": diagnose.Skip} {
		if f := diagnosetest.FindingOf(t, fs, target); f.Severity != want {
			t.Errorf("fw.uniform %s: %s, want %s (%+v)", target, f.Severity, want, f)
		}
	}
	if f := diagnosetest.FindingOf(t, fs, "c"); !strings.Contains(f.Expected, "28.41.1000, as 2 of 3") {
		t.Errorf("fw.uniform reference: %+v", f)
	}
}

func TestSMMaster(t *testing.T) {
	ps := func(dev string, ok bool, err error, state sm.State, stalled bool) sm.PortStatus {
		return sm.PortStatus{Target: sm.Target{Device: dev, Port: 1}, OK: ok, Err: err, Stalled: stalled,
			Info: sm.Info{LID: 1, GUID: "0x0002c90300a1b2c3", Priority: 14, State: state, ActivityCount: 42}, HaveInfo: ok}
	}
	st := &sm.Status{Rounds: 2, Ports: []sm.PortStatus{
		ps("master", true, nil, sm.StateMaster, false),
		ps("standby", true, nil, sm.StateStandby, false),
		ps("hung", true, nil, sm.StateMaster, true),
		ps("nosm", false, errors.New("sminfo: iberror: failed: query"), 0, false),
		ps("noumad", false, errors.New("sminfo: iberror: failed: Failed to open 'mlx5_0' port '1'"), 0, false),
		ps("nobinary", false, fmt.Errorf("start sminfo: %w", exec.ErrNotFound), 0, false),
	}}
	s := diagnosetest.SnapWith()
	diagnosetest.Fixed(s).SMValue = st
	fs, err := checkSMMaster(s, nil, &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]diagnose.Severity{"master/1": diagnose.Pass, "standby/1": diagnose.Warn, "hung/1": diagnose.Warn, "nosm/1": diagnose.Fail, "noumad/1": diagnose.Skip, "nobinary/1": diagnose.Skip} {
		if f := diagnosetest.FindingOf(t, fs, target); f.Severity != want {
			t.Errorf("%s: %s, want %s: %+v", target, f.Severity, want, f)
		}
	}
	if f := diagnosetest.FindingOf(t, fs, "master/1"); !strings.Contains(f.Observed, "state MASTER") || !strings.Contains(f.Observed, "priority 14") {
		t.Errorf("observed %q", f.Observed)
	}
	// The source gate: no runner, no umad, no round yet.
	for _, tc := range []struct {
		st   *sm.Status
		want string
	}{
		{nil, "sm collector is disabled"},
		{&sm.Status{TargetsErr: sm.ErrNoUmad}, "ib_umad not loaded"},
		{&sm.Status{}, "has not completed a run"},
	} {
		diagnosetest.Fixed(s).SMValue = tc.st
		if r := s.Unavailable(diagnose.SourceSM); !strings.Contains(r, tc.want) {
			t.Errorf("unavailable(sm) with %+v = %q, want %q", tc.st, r, tc.want)
		}
	}
}

// dev.present names why devices are missing from what the PCI bus shows.
func TestDevPresentBusHint(t *testing.T) {
	cx7 := func(addr, drv string) pci.BusFunction {
		return pci.BusFunction{Address: addr, Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, Driver: drv}
	}
	virtio := pci.BusFunction{Address: "0000:00:03.0", Vendor: 0x1af4, Device: 0x1041, Class: 0x020000, Driver: "virtio-pci"}
	hfi := pci.BusFunction{Address: "0000:18:00.0", Vendor: 0x8086, Device: 0x24f0, Class: 0x020800}
	one := diagnosetest.IBDev("mlx5_0")
	one.PCIAddress = "0000:1a:00.0"
	// No RDMA hardware and no devices expected: not judged, whether the
	// class is missing or empty.
	for _, s := range []*diagnose.Reading{
		{Host: &diagnosetest.Host{ClassErr: infiniband.ErrNoClass}},
		{Host: &diagnosetest.Host{ClassErr: infiniband.ErrNoClass, BusValue: []pci.BusFunction{virtio}}},
		{Host: &diagnosetest.Host{ClassValue: &infiniband.Class{}, BusValue: []pci.BusFunction{virtio}}},
	} {
		fs, err := checkDevPresent(s, nil, diagnosetest.MustParse(t, ""))
		if err != nil || len(fs) == 0 {
			t.Fatalf("%v %v", fs, err)
		}
		if f := diagnosetest.FindingOf(t, fs, "host"); f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "no RDMA hardware to judge") {
			t.Errorf("plain host: %+v", f)
		}
	}
	for _, tc := range []struct {
		name     string
		snap     *diagnose.Reading
		cfg      string
		observed []string
		remedy   []string
	}{
		{"no class, nothing on the bus, 1 expected", &diagnose.Reading{Host: &diagnosetest.Host{ClassErr: infiniband.ErrNoClass}}, "diagnose:\n  expected_devices: 1\n",
			[]string{"no RDMA devices; no RDMA-capable function of any vendor on the PCI bus"}, []string{"passed through"}},
		{"no class, a virtio NIC, 1 expected", &diagnose.Reading{Host: &diagnosetest.Host{ClassErr: infiniband.ErrNoClass, BusValue: []pci.BusFunction{virtio}}}, "diagnose:\n  expected_devices: 1\n",
			[]string{"(network functions: 0000:00:03.0 (1af4:1041, driver virtio-pci))"}, []string{"passed through"}},
		{"no class, an Omni-Path HFI without a driver", &diagnose.Reading{Host: &diagnosetest.Host{ClassErr: infiniband.ErrNoClass, BusValue: []pci.BusFunction{virtio, hfi}}}, "",
			[]string{"0000:18:00.0 (8086:24f0, no driver)"}, []string{"load the adapter's RDMA driver"}},
		{"empty class, function without a driver", &diagnose.Reading{Host: &diagnosetest.Host{ClassValue: &infiniband.Class{}, BusValue: []pci.BusFunction{cx7("0000:5e:00.0", "")}}}, "",
			[]string{"0000:5e:00.0 (15b3:1021, no driver)"}, []string{"modprobe mlx5_core"}},
		{"mlx5_core without mlx5_ib", &diagnose.Reading{Host: &diagnosetest.Host{ClassValue: &infiniband.Class{}, BusValue: []pci.BusFunction{cx7("0000:5e:00.0", "mlx5_core")}}}, "",
			[]string{"driver mlx5_core"}, []string{"modprobe mlx5_ib", "dmesg | grep mlx5"}},
		{"one of two devices, the other bound to vfio-pci", &diagnose.Reading{Host: &diagnosetest.Host{ClassValue: &infiniband.Class{Devices: []infiniband.Device{one}}, BusValue: []pci.BusFunction{cx7("0000:1a:00.0", "mlx5_core"), cx7("0000:3c:00.0", "vfio-pci")}}}, "diagnose:\n  expected_devices: 2\n",
			[]string{"1 readable RDMA device(s)", "0000:3c:00.0 (15b3:1021, driver vfio-pci)"}, []string{"bound to vfio-pci"}},
		{"bus unreadable", &diagnose.Reading{Host: &diagnosetest.Host{ClassValue: &infiniband.Class{}, BusErr: errors.New("EACCES")}}, "",
			[]string{"0 readable"}, []string{genericDevRemedy}},
	} {
		cfg := diagnosetest.MustParse(t, tc.cfg)
		fs, err := checkDevPresent(tc.snap, nil, cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f := diagnosetest.FindingOf(t, fs, "host")
		if f.Severity != diagnose.Fail {
			t.Errorf("%s: %s, want fail", tc.name, f.Severity)
		}
		for _, o := range tc.observed {
			if !strings.Contains(f.Observed, o) {
				t.Errorf("%s: observed %q lacks %q", tc.name, f.Observed, o)
			}
		}
		for _, r := range tc.remedy {
			if !strings.Contains(f.Remedy, r) {
				t.Errorf("%s: remedy %q lacks %q", tc.name, f.Remedy, r)
			}
		}
		if strings.Contains(f.Observed, "0000:1a:00.0") {
			t.Errorf("%s: a function with its RDMA device is listed: %q", tc.name, f.Observed)
		}
	}
}

// TestSparePorts: a down port nobody needs (never ACTIVE, not in the
// config) never fails, while the same port fails once the config names it,
// once it was ACTIVE, or when no port of the host is up; a down Ethernet
// port gets Ethernet remedies, never ibportstate.
func TestSparePorts(t *testing.T) {
	cx := func() *diagnose.Reading {
		return diagnosetest.SnapWith(diagnosetest.IBDev("mlx4_0", diagnosetest.IBPort(1, 4, 5, "20 Gb/sec (4X DDR)"), diagnosetest.IBPort(2, 1, 2, "10 Gb/sec (4X SDR)")))
	}
	judge := func(s *diagnose.Reading, cfg *config.Config, check func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error), target string) diagnose.Finding {
		t.Helper()
		fs, err := check(s, diagnose.NewHistory(0, 2), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return diagnosetest.FindingOf(t, fs, target)
	}
	none := &config.Config{}
	for _, check := range []func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error){checkPortPhys, checkPortState} {
		if f := judge(cx(), none, check, "mlx4_0/2"); f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "spare port") {
			t.Errorf("never-cabled second port: %s %q, want a skip saying spare port", f.Severity, f.Evidence)
		}
		named := &config.Config{}
		named.Diagnose.Ports.Required = []config.PortRef{{Device: "mlx4_0", Port: 2}}
		if f := judge(cx(), named, check, "mlx4_0/2"); f.Severity != diagnose.Fail {
			t.Errorf("a required port down: %s, want fail", f.Severity)
		}
		was := cx()
		diagnosetest.Fixed(was).WasActiveFunc = func(d string, p int) bool { return d == "mlx4_0" && p == 2 }
		if f := judge(was, none, check, "mlx4_0/2"); f.Severity != diagnose.Fail {
			t.Errorf("a port down after being ACTIVE: %s, want fail", f.Severity)
		}
		allDown := diagnosetest.SnapWith(diagnosetest.IBDev("mlx4_0", diagnosetest.IBPort(1, 1, 2, "10 Gb/sec (4X SDR)"), diagnosetest.IBPort(2, 1, 2, "10 Gb/sec (4X SDR)")))
		if f := judge(allDown, none, check, "mlx4_0/2"); f.Severity != diagnose.Fail {
			t.Errorf("no port up on the host: %s, want fail", f.Severity)
		}
	}

	// RoCE: port 1 up, port 2 Disabled because its netdev is set down.
	roce := func(adminUp bool) *diagnose.Reading {
		up, down := diagnosetest.IBPort(1, 4, 5, "25 Gb/sec (1X EDR)"), diagnosetest.IBPort(2, 1, 3, "40 Gb/sec (4X QDR)")
		up.LinkLayer.V, down.LinkLayer.V = "Ethernet", "Ethernet"
		up.Netdev, down.Netdev = "enp1s0f0np0", "enp1s0f1np1"
		s := diagnosetest.SnapWith(diagnosetest.IBDev("mlx5_1", up, down))
		diagnosetest.Fixed(s).NetdevsValue = &netdev.Snapshot{Netdevs: []netdev.Netdev{
			{Name: "enp1s0f1np1", Kind: netdev.KindRoCE, Device: "mlx5_1", Port: 2,
				AdminUp: netdev.Opt[bool]{V: adminUp, OK: true}, OperState: netdev.Opt[string]{V: "down", OK: true}},
		}}
		diagnosetest.Fixed(s).WasActiveFunc = func(string, int) bool { return true }
		return s
	}
	if f := judge(roce(false), none, checkPortPhys, "mlx5_1/2"); f.Severity != diagnose.Fail ||
		!strings.Contains(f.Remedy, "ip link set enp1s0f1np1 up") || strings.Contains(f.Remedy, "ibportstate") {
		t.Errorf("admin-down RoCE port: %s %q, want fail with ip link set and no ibportstate", f.Severity, f.Remedy)
	}
	if f := judge(roce(true), none, checkPortPhys, "mlx5_1/2"); !strings.Contains(f.Remedy, "no carrier") || !strings.Contains(f.Remedy, "ethtool -m enp1s0f1np1") {
		t.Errorf("RoCE port up without carrier: %q, want cable and transceiver remedies", f.Remedy)
	}
	spare := roce(false)
	diagnosetest.Fixed(spare).WasActiveFunc = nil
	if f := judge(spare, none, checkPortPhys, "mlx5_1/2"); f.Severity != diagnose.Skip {
		t.Errorf("admin-down RoCE port never ACTIVE: %s, want skip", f.Severity)
	}
}
