// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/alerts"
)

// TestDefaultsAreTheCommittedFiles: without a config the command writes
// exactly the files committed in the repository.
func TestDefaultsAreTheCommittedFiles(t *testing.T) {
	out := t.TempDir()
	if err := run("", out); err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		"rdma_doctor.rules.yml":    filepath.Join("..", "..", alerts.RulesPath),
		"prometheusrule.yaml":      filepath.Join("..", "..", alerts.PrometheusRulePath),
		"inhibit_rules.yml":        filepath.Join("..", "..", alerts.InhibitPath),
		"dashboards/host.json":     filepath.Join("..", "..", "dashboards", "host.json"),
		"dashboards/fabric.json":   filepath.Join("..", "..", "dashboards", "fabric.json"),
		"dashboards/fleet.json":    filepath.Join("..", "..", "dashboards", "fleet.json"),
		"dashboards/probes.json":   filepath.Join("..", "..", "dashboards", "probes.json"),
		"dashboards/diagnose.json": filepath.Join("..", "..", "dashboards", "diagnose.json"),
	} {
		g, err := os.ReadFile(filepath.Join(out, got))
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.ReadFile(want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(g, w) {
			t.Errorf("%s differs from %s", got, want)
		}
	}
}

// TestConfig renders a config with a cluster variable and checks the
// dashboards and the grafana.com variant follow it.
func TestConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mixin.yml")
	if err := os.WriteFile(cfg, []byte("cluster_label: k8s_cluster\nmulti_cluster: true\nrate_window: 2m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := run(cfg, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "dashboards", "grafana.com", "host.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Inputs []struct {
			Name     string `json:"name"`
			PluginID string `json:"pluginId"`
		} `json:"__inputs"`
		Templating struct {
			List []struct {
				Name    string         `json:"name"`
				Current map[string]any `json:"current"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].PluginID != "prometheus" || d.Templating.List[0].Current["value"] != "${DS_PROMETHEUS}" {
		t.Errorf("grafana.com variant: inputs %+v, datasource %+v", d.Inputs, d.Templating.List[0])
	}
	if d.Templating.List[1].Name != "cluster" {
		t.Errorf("variables %+v: want cluster after the datasource", d.Templating.List)
	}
	for _, want := range []string{`k8s_cluster=~\"$cluster\", job=\"$job\"`, "instance_device_port:rdma_port_receive_bytes:rate2m"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("host.json lacks %s", want)
		}
	}
	if err := run(filepath.Join(dir, "missing.yml"), out); err == nil {
		t.Error("a missing config file is no error")
	}
}
