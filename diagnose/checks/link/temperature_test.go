// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hwmon"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

func temp(v float64) hwmon.Opt[float64] { return sysattr.Some(v) }

// The gb300-xdr thresholds (asic 105 °C, Module0 70 °C) with readings from
// the recorded 46 and 57 °C up to and past the threshold.
func TestTemperature(t *testing.T) {
	run := func(s *diagnose.Reading) []diagnose.Finding {
		t.Helper()
		fs, err := checkTemperature(s, diagnose.NewHistory(0, 2), &config.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	snap := func(module hwmon.Sensor) *diagnose.Reading {
		s := diagnosetest.SnapWith(diagnosetest.IBDev("mlx5_0"))
		diagnosetest.Fixed(s).Hwmon = &hwmon.Snapshot{Devices: []hwmon.Device{{Name: "mlx5_0", Sensors: []hwmon.Sensor{
			{Label: "asic", Chip: "mlx5", Input: temp(46), Crit: temp(105), Highest: temp(47)},
			module,
		}}}}
		return s
	}
	module := func(input float64) hwmon.Sensor {
		return hwmon.Sensor{Label: "Module0", Chip: "mlx5", Input: temp(input), Crit: temp(70)}
	}
	for _, tc := range []struct {
		name   string
		module hwmon.Sensor
		sev    diagnose.Severity
		remedy []string
	}{
		{"recorded", module(57), diagnose.Pass, nil},
		{"just outside the margin", module(64.9), diagnose.Pass, nil},
		{"at the margin", module(65), diagnose.Warn, []string{"mlx5_0 Module0 at 65 °C, critical 70 °C", "reseat the transceiver", "mlxlink -d 0000:3b:00.0 -m"}},
		{"at critical", module(70), diagnose.Fail, []string{"reseat"}},
		{"past critical", module(72), diagnose.Fail, []string{"Module0 at 72 °C"}},
	} {
		f := diagnosetest.FindingOf(t, run(snap(tc.module)), "mlx5_0")
		if f.Severity != tc.sev {
			t.Errorf("%s: %s (%s), want %s", tc.name, f.Severity, f.Observed, tc.sev)
		}
		if !strings.Contains(f.Observed, "asic 46 °C (critical 105 °C, highest 47 °C)") {
			t.Errorf("%s: observed %q", tc.name, f.Observed)
		}
		if tc.sev == diagnose.Pass && f.Remedy != "" {
			t.Errorf("%s: remedy %q on a pass", tc.name, f.Remedy)
		}
		for _, r := range tc.remedy {
			if !strings.Contains(f.Remedy, r) {
				t.Errorf("%s: remedy %q lacks %q", tc.name, f.Remedy, r)
			}
		}
	}

	// A hot ASIC gets air, not a reseat.
	s := snap(module(57))
	s.Hwmon().Devices[0].Sensors[0].Input = temp(103)
	if f := diagnosetest.FindingOf(t, run(s), "mlx5_0"); f.Severity != diagnose.Warn || !strings.Contains(f.Remedy, "airflow") || strings.Contains(f.Remedy, "reseat") {
		t.Errorf("hot asic: %s %q", f.Severity, f.Remedy)
	}

	// A sensor without a threshold or a reading is listed, not judged; a
	// device with nothing to judge skips with the reason.
	s = snap(hwmon.Sensor{Label: "Module0", Chip: "mlx5", Input: temp(90)})
	if f := diagnosetest.FindingOf(t, run(s), "mlx5_0"); f.Severity != diagnose.Pass || !strings.Contains(f.Observed, "Module0 90 °C (no critical threshold)") {
		t.Errorf("module without crit: %s %q", f.Severity, f.Observed)
	}
	s.Hwmon().Devices[0].Sensors = []hwmon.Sensor{{Label: "asic", Chip: "mlx5", Crit: temp(105)}}
	if f := diagnosetest.FindingOf(t, run(s), "mlx5_0"); f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "asic no reading (critical 105 °C)") {
		t.Errorf("asic without a reading: %s %q", f.Severity, f.Evidence)
	}

	// No sensors anywhere: one host skip.
	diagnosetest.Fixed(s).Hwmon = &hwmon.Snapshot{}
	if fs := run(s); len(fs) != 1 || fs[0].Severity != diagnose.Skip || fs[0].Target != "host" || !strings.Contains(fs[0].Evidence, "Linux 6.6") {
		t.Errorf("no sensors: %+v", fs)
	}
}

// The recorded sensors of gb300-xdr pass; broken's garbled asic input
// skips with its parse error, its unplugged module is not a sensor.
func TestTemperatureFixtures(t *testing.T) {
	r := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "gb300-xdr"), nil)
	for target, obs := range map[string]string{
		"ibp3s0":    "asic 46 °C (critical 105 °C, highest 47 °C); Module0 57 °C (critical 70 °C, highest 58 °C)",
		"ibP16p3s0": "sensor0 68 °C (critical 105 °C, highest 68 °C)",
		"ibP18p3s0": "asic 46 °C (critical 105 °C)",
	} {
		if f, ok := diagnosetest.ReportFinding(r, "hw.temperature", target); !ok || f.Severity != diagnose.Pass || f.Observed != obs {
			t.Errorf("gb300-xdr %s: %+v, want pass observing %q", target, f, obs)
		}
	}
	if _, ok := diagnosetest.ReportFinding(r, "hw.temperature", "roceP22p1s0f0"); ok {
		t.Error("a device without hwmon has a finding")
	}

	r = evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "broken"), nil)
	if f, ok := diagnosetest.ReportFinding(r, "hw.temperature", "mlx5_2"); !ok || f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "temp1_input") || !strings.Contains(f.Evidence, "garbage") {
		t.Errorf("broken mlx5_2: %+v, want skip naming the garbled input", f)
	}
	if f, ok := diagnosetest.ReportFinding(r, "hw.temperature", "mlx5_3"); !ok || f.Severity != diagnose.Pass || strings.Contains(f.Observed, "Module0") {
		t.Errorf("broken mlx5_3: %+v, want pass on the asic alone", f)
	}

	r = evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "dgx-h100"), nil)
	if f, ok := diagnosetest.ReportFinding(r, "hw.temperature", "host"); !ok || f.Severity != diagnose.Skip {
		t.Errorf("dgx-h100 (kernel before 6.6): %+v, want one host skip", f)
	}
}
