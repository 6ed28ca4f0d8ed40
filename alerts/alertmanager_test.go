// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// TestAlertmanagerUpToDate checks the committed alertmanager.yml is what
// RenderAlertmanager makes of mixin.Default(); -update rewrites it.
func TestAlertmanagerUpToDate(t *testing.T) {
	got, err := RenderAlertmanager(mixin.Default())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Base(AlertmanagerPath), got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, Alertmanager) {
		t.Fatalf("%s is out of date: run make generate", AlertmanagerPath)
	}
}

func runAmtool(t *testing.T, args ...string) string {
	t.Helper()
	amtool := testenv.RequireTool(t, "amtool", "amtool not installed (Debian: apt-get install prometheus-alertmanager; .ci/run does)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, amtool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("amtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertmanagerCheckConfig checks the shipped configuration with the
// real amtool: it parses, and it has every inhibit rule.
func TestAlertmanagerCheckConfig(t *testing.T) {
	out := runAmtool(t, "check-config", "alertmanager.yml")
	if !strings.Contains(out, "SUCCESS") || !strings.Contains(out, fmt.Sprintf(" - %d inhibit rules", len(inhibitions))) || !strings.Contains(out, " - 1 receivers") {
		t.Fatalf("amtool check-config:\n%s", out)
	}
}

// TestAlertmanagerRoutesOneGroupPerFault routes the alerts the promtool
// tests in tests/faults.yml expect with the real amtool (config routes
// test --tree) and computes each one's group from the route it reaches:
// the host's and the switch's alerts about one link land in one group,
// two faults in two, and an alert that is no fault in its own.
func TestAlertmanagerRoutesOneGroupPerFault(t *testing.T) {
	link := map[string]string{
		"link": "0x0000000000200001/1", "fault": "0x0000000000200001/1",
		"switch_node": "leaf1", "switch_guid": "0x0000000000200001", "switch_port": "1",
		"remote_node": "node01 mlx5_0", "remote_guid": "0x0000000000100001", "remote_port": "1",
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{"job": "rdma_doctor", "cluster": "c1"}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	alerts := []struct {
		name   string
		labels map[string]string
		group  string // alerts with the same group name must share a group
	}{
		{"host end drop", with(link, "alertname", "RdmaLinkDropped", "fault_class", "cable", "instance", "node01", "device", "mlx5_0", "port", "1"), "cable"},
		{"switch end drop", with(link, "alertname", "RdmaLinkDropped", "fault_class", "cable", "instance", "fab1", "guid", "0x0000000000200001", "port", "1", "end", "switch"), "cable"},
		{"switch end errors", with(link, "alertname", "RdmaLinkErrors", "fault_class", "cable", "instance", "fab2", "guid", "0x0000000000200001", "port", "1", "end", "switch", "counter", "symbol_error"), "cable"},
		{"other link", with(nil, "alertname", "RdmaLinkDropped", "fault_class", "cable", "fault", "0x0000000000200001/2", "link", "0x0000000000200001/2", "instance", "node02", "device", "mlx5_0", "port", "1"), "other"},
		{"nic", with(link, "alertname", "RdmaHostNicFault", "fault_class", "host_nic", "fault", "node01/mlx5_0", "instance", "node01", "device", "mlx5_0", "port", "1"), "nic"},
		{"no fault", with(nil, "alertname", "RdmaDoctorDown", "instance", "node01"), "down"},
	}
	var cfg struct {
		Route struct {
			GroupBy []string `yaml:"group_by"`
			Routes  []struct {
				Matchers []string `yaml:"matchers"`
				GroupBy  []string `yaml:"group_by"`
			} `yaml:"routes"`
		} `yaml:"route"`
	}
	if err := yaml.Unmarshal(Alertmanager, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Route.Routes) != 1 {
		t.Fatalf("want one sub-route (the faults'), got %d", len(cfg.Route.Routes))
	}
	keys := map[string]string{} // group name -> group key
	seen := map[string]string{} // group key -> group name
	for _, a := range alerts {
		args := []string{"config", "routes", "test", "--config.file=alertmanager.yml", "--tree"}
		for k, v := range a.labels {
			args = append(args, k+"="+v)
		}
		out := runAmtool(t, args...)
		groupBy := cfg.Route.GroupBy
		if strings.Contains(out, "fault_class=~") {
			groupBy = cfg.Route.Routes[0].GroupBy
		}
		var key []string
		for _, l := range groupBy {
			key = append(key, l+"="+a.labels[l])
		}
		k := strings.Join(key, ",")
		if prev, ok := keys[a.group]; ok && prev != k {
			t.Errorf("%s: group %s, want the group of the other %s alerts %s", a.name, k, a.group, prev)
		}
		if other, ok := seen[k]; ok && other != a.group {
			t.Errorf("%s: lands in group %s with the %s alerts", a.name, k, other)
		}
		keys[a.group], seen[k] = k, a.group
	}
	if len(seen) != 4 {
		t.Errorf("%d groups, want 4 (one link's cable fault, another link's, the NIC, the exporter down): %v", len(seen), seen)
	}
}
