// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sff"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sff/sfftest"
)

// moduleSeries collects the module series of one netdev, by metric name
// and then by the labels after netdev.
func moduleSeries(t *testing.T, me *netdev.ModuleEEPROM) map[string]map[string]float64 {
	t.Helper()
	d := newModuleDescs()
	var sk sink
	d.module(&sk, "enp59s0f0np0", me)
	out := map[string]map[string]float64{}
	for _, m := range sk.all() {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		key := ""
		for _, l := range pb.GetLabel() {
			if l.GetName() != "netdev" {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
		}
		name := m.Desc().String()
		name = name[len(`Desc{fqName: "`):]
		name = name[:len(name)-len(name[indexQuote(name):])]
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][key] = pb.GetGauge().GetValue()
	}
	return out
}

func indexQuote(s string) int {
	for i := range s {
		if s[i] == '"' {
			return i
		}
	}
	return len(s)
}

// The recorded DR8 optic: eight lanes of each monitor in base units, the
// module's thresholds, and the info series.
func TestNetdevModuleSeriesDR8(t *testing.T) {
	m, err := sff.Decode(sfftest.Load(t, "../internal/read/sff/testdata/cmis-osfp-dr8-juniper-qfx5240.txt", false))
	if err != nil {
		t.Fatal(err)
	}
	s := moduleSeries(t, &netdev.ModuleEEPROM{Module: m})
	if v := s["rdma_netdev_module_eeprom_readable"]["reason=,"]; v != 1 {
		t.Errorf("readable %v", s["rdma_netdev_module_eeprom_readable"])
	}
	if _, ok := s["rdma_netdev_module_info"]["identifier=osfp,monitors_absent=,part_number=740-174932,spec=cmis,vendor=JUNIPER-1G1,"]; !ok {
		t.Errorf("info %v", s["rdma_netdev_module_info"])
	}
	for name, n := range map[string]int{"rdma_netdev_module_rx_power_watts": 8, "rdma_netdev_module_tx_bias_amperes": 8, "rdma_netdev_module_tx_power_watts": 8,
		"rdma_netdev_module_temperature_threshold_celsius": 4, "rdma_netdev_module_rx_power_threshold_watts": 4} {
		if len(s[name]) != n {
			t.Errorf("%s: %d series, want %d", name, len(s[name]), n)
		}
	}
	if v := s["rdma_netdev_module_rx_power_watts"]["lane=7,"]; math.Abs(v-0x29d3*1e-7) > 1e-12 {
		t.Errorf("lane 7 rx power %v", v)
	}
	if v := s["rdma_netdev_module_temperature_celsius"][""]; math.Abs(v-0x39ee/256.0) > 1e-12 {
		t.Errorf("temperature %v", v)
	}
	if v := s["rdma_netdev_module_rx_power_threshold_watts"]["threshold=low_alarm,"]; math.Abs(v-0.1288e-3) > 1e-12 {
		t.Errorf("rx low alarm %v", v)
	}
}

// The AEC: no lane series at all (not zeros); an unreadable module: the
// reason and nothing else.
func TestNetdevModuleSeriesAbsent(t *testing.T) {
	m, err := sff.Decode(sfftest.Load(t, "../internal/read/sff/testdata/cmis-osfp-aec-credo-qfx5240.txt", false))
	if err != nil {
		t.Fatal(err)
	}
	s := moduleSeries(t, &netdev.ModuleEEPROM{Module: m})
	for _, name := range []string{"rdma_netdev_module_rx_power_watts", "rdma_netdev_module_tx_bias_amperes", "rdma_netdev_module_tx_power_watts", "rdma_netdev_module_rx_power_threshold_watts"} {
		if len(s[name]) != 0 {
			t.Errorf("%s on an AEC: %v", name, s[name])
		}
	}
	if len(s["rdma_netdev_module_temperature_celsius"]) != 1 {
		t.Errorf("temperature %v", s["rdma_netdev_module_temperature_celsius"])
	}
	s = moduleSeries(t, &netdev.ModuleEEPROM{Reason: netdev.ModuleReasonPermission})
	if len(s) != 1 || s["rdma_netdev_module_eeprom_readable"]["reason=permission,"] != 0 || len(s["rdma_netdev_module_eeprom_readable"]) != 1 {
		t.Errorf("permission: %v", s)
	}
	if s := moduleSeries(t, nil); len(s) != 0 {
		t.Errorf("not asked: %v", s)
	}
}
