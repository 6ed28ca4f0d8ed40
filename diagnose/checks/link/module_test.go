// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sff"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sff/sfftest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// recordedModule decodes a recorded dump of internal/read/sff/testdata (see
// its README for the sources).
func recordedModule(t *testing.T, name string, a2 bool) *sff.Module {
	t.Helper()
	m, err := sff.Decode(sfftest.Load(t, "../../../internal/read/sff/testdata/"+name, a2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// moduleSnap is mlx5_1 with port 1 ACTIVE (enp59s0f0np0, carrying the
// module) and port 2 DOWN (enp59s0f1np1); spare makes port 1 the down
// spare one instead (never ACTIVE since start, port 2 up).
func moduleSnap(me *netdev.ModuleEEPROM, spare bool) *diagnose.Reading {
	p1, p2 := diagnosetest.IBPort(1, 4, 5, "100 Gb/sec (4X EDR)"), diagnosetest.IBPort(2, 1, 3, "40 Gb/sec (4X QDR)")
	if spare {
		p1, p2 = diagnosetest.IBPort(1, 1, 3, "40 Gb/sec (4X QDR)"), diagnosetest.IBPort(2, 4, 5, "100 Gb/sec (4X EDR)")
	}
	p1.LinkLayer.V, p2.LinkLayer.V = "Ethernet", "Ethernet"
	p1.Netdev, p2.Netdev = "enp59s0f0np0", "enp59s0f1np1"
	s := diagnosetest.SnapWith(diagnosetest.IBDev("mlx5_1", p1, p2))
	diagnosetest.Fixed(s).ModulesAskedValue = true
	diagnosetest.Fixed(s).NetdevsValue = &netdev.Snapshot{Netdevs: []netdev.Netdev{
		{Name: "enp59s0f0np0", Kind: netdev.KindRoCE, Device: "mlx5_1", Port: 1, Module: me},
		// Not asked (an unmapped or foreign netdev): no finding.
		{Name: "enp59s0f1np1", Kind: netdev.KindRoCE, Device: "mlx5_1", Port: 2},
	}}
	return s
}

func runModule(t *testing.T, s *diagnose.Reading) []diagnose.Finding {
	t.Helper()
	fs, err := checkModule(s, diagnose.NewHistory(0, 2), &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestModuleRecordedDR8: the Juniper 800G DR8 OSFP (CMIS) as recorded
// passes: 57.93 °C against its own high warning 73 °C, every lane's Rx
// power well above its own low warning 0.1819 mW. The other cases change
// only one reading of that decoded module to or past one of its recorded
// thresholds (temperature high warning 73 / alarm 76 °C, Rx power low
// warning 0.1819 / alarm 0.1288 mW); nothing else is altered.
func TestModuleRecordedDR8(t *testing.T) {
	dr8 := func(change func(m *sff.Module)) *diagnose.Reading {
		m := recordedModule(t, "cmis-osfp-dr8-juniper-qfx5240.txt", false)
		if change != nil {
			change(m)
		}
		return moduleSnap(&netdev.ModuleEEPROM{Module: m}, false)
	}
	f := diagnosetest.FindingOf(t, runModule(t, dr8(nil)), "enp59s0f0np0")
	if f.Severity != diagnose.Pass || f.Remedy != "" {
		t.Fatalf("recorded DR8: %s %q, want pass without remedy", f.Severity, f.Remedy)
	}
	for _, want := range []string{"temperature 57.93 °C (high warning 73 °C, high alarm 76 °C)",
		"lane 1 1.6946 mW (2.29 dBm)", "lane 8 1.5247 mW", "(low warning 0.1819 mW (-7.4 dBm), low alarm 0.1288 mW (-8.9 dBm))"} {
		if !strings.Contains(f.Observed, want) {
			t.Errorf("recorded DR8 observed %q lacks %q", f.Observed, want)
		}
	}
	if !strings.Contains(f.Evidence, "(module memory: cmis osfp, JUNIPER-1G1 740-174932)") {
		t.Errorf("evidence %q", f.Evidence)
	}

	temp := func(v float64) func(m *sff.Module) {
		return func(m *sff.Module) { m.Temperature = sysattr.Some(v) }
	}
	rx := func(lane int, w float64) func(m *sff.Module) {
		return func(m *sff.Module) { m.Lanes[lane-1].RxPower = sysattr.Some(w) }
	}
	for _, tc := range []struct {
		name   string
		change func(m *sff.Module)
		sev    diagnose.Severity
		remedy []string
	}{
		{"temperature just below the high warning", temp(72.99), diagnose.Pass, nil},
		{"temperature at the high warning", temp(73), diagnose.Warn, []string{"enp59s0f0np0 (mlx5_1 port 1) runs at 73 °C, at or above its high warning 73 °C",
			"airflow", "reseat the module", "ethtool -m enp59s0f0np0; mlxlink -d 0000:3b:00.0 -p 1 -m"}},
		{"temperature at the high alarm", temp(76), diagnose.Fail, []string{"at or above its high alarm 76 °C"}},
		{"lane 7 just above the low warning", rx(7, 0.182e-3), diagnose.Pass, nil},
		{"lane 7 at the low warning", rx(7, 0.1819e-3), diagnose.Warn, []string{"lane 7 of enp59s0f0np0 (mlx5_1 port 1) receives 0.1819 mW (-7.4 dBm), at or below its low warning",
			"clean the fiber connectors", "far end's Tx power", "replace the optic", "mlxlink -d 0000:3b:00.0 -p 1 -m"}},
		{"lane 7 at the low alarm", rx(7, 0.1288e-3), diagnose.Fail, []string{"lane 7", "at or below its low alarm 0.1288 mW"}},
		{"lane 7 dark", rx(7, 0), diagnose.Fail, []string{"receives 0 mW (no light)"}},
	} {
		f := diagnosetest.FindingOf(t, runModule(t, dr8(tc.change)), "enp59s0f0np0")
		if f.Severity != tc.sev {
			t.Errorf("%s: %s (%s), want %s", tc.name, f.Severity, f.Observed, tc.sev)
		}
		if tc.sev == diagnose.Pass && f.Remedy != "" {
			t.Errorf("%s: remedy %q on a pass", tc.name, f.Remedy)
		}
		for _, r := range tc.remedy {
			if !strings.Contains(f.Remedy, r) {
				t.Errorf("%s: remedy %q lacks %q", tc.name, f.Remedy, r)
			}
		}
		if tc.sev != diagnose.Pass && strings.Contains(f.Remedy, "lane 1 ") {
			t.Errorf("%s: remedy names a lane that is fine: %q", tc.name, f.Remedy)
		}
	}

	// Thresholds the module does not program (all zero) are not used:
	// a dark lane is then not judged rather than failed.
	f = diagnosetest.FindingOf(t, runModule(t, dr8(func(m *sff.Module) {
		m.Thresholds.RxPower = sysattr.Some(sff.Limits{})
		m.Lanes[6].RxPower = sysattr.Some(0.0)
	})), "enp59s0f0np0")
	if f.Severity != diagnose.Pass || !strings.Contains(f.Evidence, "no usable Rx power thresholds") {
		t.Errorf("unprogrammed thresholds: %s %q", f.Severity, f.Evidence)
	}
}

// TestModuleRecordedSFF8636: the Mellanox QSFP28 optic as recorded reads
// zero Rx power on all four lanes (no light at the time) against its own
// low alarm 0.0467 mW: on a port that must be up that fails; on a spare
// port its dark lanes are not judged and its 39.47 °C (high warning
// 70 °C) passes.
func TestModuleRecordedSFF8636(t *testing.T) {
	me := func() *netdev.ModuleEEPROM {
		return &netdev.ModuleEEPROM{Module: recordedModule(t, "sff8636-qsfp28-mellanox-mlxsw.txt", false)}
	}
	f := diagnosetest.FindingOf(t, runModule(t, moduleSnap(me(), false)), "enp59s0f0np0")
	if f.Severity != diagnose.Fail || !strings.Contains(f.Remedy, "lane 4 of enp59s0f0np0 (mlx5_1 port 1) receives 0 mW (no light), at or below its low alarm 0.0467 mW") ||
		!strings.Contains(f.Observed, "temperature 39.47 °C (high warning 70 °C, high alarm 80 °C)") {
		t.Errorf("dark lanes on an active port: %s %q %q", f.Severity, f.Observed, f.Remedy)
	}
	f = diagnosetest.FindingOf(t, runModule(t, moduleSnap(me(), true)), "enp59s0f0np0")
	if f.Severity != diagnose.Pass || f.Remedy != "" || !strings.Contains(f.Evidence, "Rx power not judged on a spare port: not ACTIVE since rdma_doctor started") {
		t.Errorf("dark lanes on a spare port: %s %q %q", f.Severity, f.Evidence, f.Remedy)
	}
}

// TestModuleUnjudged: what cannot be judged skips with the reason; what
// can be judged of a module decides alone.
func TestModuleUnjudged(t *testing.T) {
	// The Credo AEC (copper, CMIS): temperature 51.27 °C against its own
	// 70 °C high warning passes; no lane monitors to judge.
	aec := recordedModule(t, "cmis-osfp-aec-credo-qfx5240.txt", false)
	f := diagnosetest.FindingOf(t, runModule(t, moduleSnap(&netdev.ModuleEEPROM{Module: aec}, false)), "enp59s0f0np0")
	if f.Severity != diagnose.Pass || !strings.Contains(f.Observed, "temperature 51.27 °C (high warning 70 °C") || !strings.Contains(f.Evidence, "no Rx power monitor") {
		t.Errorf("AEC: %s %q %q", f.Severity, f.Observed, f.Evidence)
	}
	// The same AEC without its threshold page: nothing to judge.
	aec.Thresholds = nil
	f = diagnosetest.FindingOf(t, runModule(t, moduleSnap(&netdev.ModuleEEPROM{Module: aec, Reason: netdev.ModuleReasonError}, false)), "enp59s0f0np0")
	if f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "no usable temperature thresholds") || !strings.Contains(f.Evidence, "partly read: error") {
		t.Errorf("AEC without thresholds: %s %q", f.Severity, f.Evidence)
	}
	// The GPON SFP without diagnostics (SFF-8472 byte 92 = 0).
	noDDM := recordedModule(t, "sff8472-sfp-noddm-odi-hack-gpon.txt", true)
	f = diagnosetest.FindingOf(t, runModule(t, moduleSnap(&netdev.ModuleEEPROM{Module: noDDM}, false)), "enp59s0f0np0")
	if f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "no temperature monitor") || !strings.Contains(f.Evidence, "no digital diagnostics") {
		t.Errorf("no DDM: %s %q", f.Severity, f.Evidence)
	}
	// Not read, by reason.
	for reason, want := range map[string]string{
		netdev.ModuleReasonPermission:  "CAP_NET_ADMIN",
		netdev.ModuleReasonUnsupported: "before 5.13",
		netdev.ModuleReasonIO:          "empty cage",
	} {
		f = diagnosetest.FindingOf(t, runModule(t, moduleSnap(&netdev.ModuleEEPROM{Reason: reason}, false)), "enp59s0f0np0")
		if f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, want) {
			t.Errorf("%s: %s %q", reason, f.Severity, f.Evidence)
		}
	}
	// No module read anywhere (a fixture tree): one host skip.
	fs := runModule(t, moduleSnap(nil, false))
	if len(fs) != 1 || fs[0].Severity != diagnose.Skip || fs[0].Target != "host" {
		t.Errorf("nothing read: %+v", fs)
	}
	// The flag off: the evaluator skips the check and says which flag.
	s := moduleSnap(nil, false)
	diagnosetest.Fixed(s).ModulesAskedValue = false
	if why := s.Unavailable(diagnose.SourceModule); !strings.Contains(why, "--collector.netdev.module-eeprom") {
		t.Errorf("flag off: %q", why)
	}
}
