// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFabricTamperedThresholdsOnIbsim is issue 35 item 2 on the real
// tools: a threshold file changed between the exporter's write and the
// real ibqueryerrors' read (a wrapper raises LinkDownedCounter's threshold
// to 255 in the file it is handed, then runs the real tool: an attacker
// who wins the race) hides leaf002/5's 3 link downs from the errors run;
// the exporter reads the thresholds the run printed, and the port is
// unknown, never a real 0 with sweep_success 1. A second exporter given a
// world-writable cache directory refuses it: every port unknown, one
// warning naming the directory.
func TestFabricTamperedThresholdsOnIbsim(t *testing.T) {
	s := startSimFabric(t)
	s.set(t, "S-leaf002", 5, "LinkDownedCounter", 3, 3)
	real := requireTool(t, "ibqueryerrors")
	wrapper := filepath.Join(t.TempDir(), "ibqueryerrors")
	script := "#!/bin/sh\np=\nfor a; do [ \"$p\" = --threshold-file ] && sed -i 's/^LinkDownedCounter=0$/LinkDownedCounter=255/' \"$a\"; p=$a; done\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	switchPorts := float64(fabricShape.SwitchPorts())

	addr, logs := serveFabric(t, s, "--collector.fabric.ibqueryerrors-path="+wrapper)
	body := metricsWhen(t, addr, logs, "a sweep", func(b string) bool { return sweeps(b) >= 1 })
	g := nodeGUIDs(body)
	for _, w := range []struct {
		series string
		want   float64
	}{
		{"rdma_fabric_counter_sweep_success", 0},
		{"rdma_fabric_counter_sweep_ports_unknown", switchPorts},
		{portSeries("rdma_fabric_port_counters_unknown", g["leaf002"], 5), 1},
	} {
		if got, ok := sample(body, w.series); !ok || got != w.want {
			t.Errorf("tampered thresholds: %s = %v (present %v), want %v", w.series, got, ok, w.want)
		}
	}
	if v, ok := sample(body, portSeries("rdma_fabric_port_link_downed_total", g["leaf002"], 5)); ok {
		t.Errorf("leaf002/5 exports %v link downs from a run whose LinkDownedCounter threshold was 255", v)
	}
	if v, _ := sample(body, `rdma_fabric_counter_sweep_failures_total{reason="unparsable"}`); v < 1 {
		t.Errorf("the tampered run is not counted:\n%s", smGrep(body, "rdma_fabric_counter_sweep_failures_total"))
	}
	if !strings.Contains(logs.String(), "the threshold of LinkDownedCounter is 255, not 0") {
		t.Errorf("no log line naming the tampered threshold:\n%s", logs.String())
	}

	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	addr, logs = serveFabric(t, s, "--collector.fabric.cache-dir="+open)
	body = metricsWhen(t, addr, logs, "a sweep", func(b string) bool { return sweeps(b) >= 2 })
	for _, w := range []struct {
		series string
		want   float64
	}{
		{"rdma_fabric_counter_sweep_success", 0},
		{"rdma_fabric_counter_sweep_ports_unknown", switchPorts},
	} {
		if got, ok := sample(body, w.series); !ok || got != w.want {
			t.Errorf("0777 cache directory: %s = %v (present %v), want %v", w.series, got, ok, w.want)
		}
	}
	if n := strings.Count(logs.String(), "refusing the fabric cache directory "+open); n != 1 {
		t.Errorf("%d log lines refusing %s in two sweeps, want 1:\n%s", n, open, logs.String())
	}
	if left, _ := os.ReadDir(open); len(left) != 0 {
		t.Errorf("the refused directory was written: %v", left)
	}
}
