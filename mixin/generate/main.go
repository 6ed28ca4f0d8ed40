// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command generate renders rdma_doctor's monitoring mixin for a config:
//
//	go run ./mixin/generate -config my-mixin.yml -o out/
//
// writes out/rdma_doctor.rules.yml (Prometheus rules), out/prometheusrule.yaml
// (the same as a prometheus-operator PrometheusRule), out/inhibit_rules.yml
// (Alertmanager), out/alertmanager.yml (a complete Alertmanager
// configuration with them), out/dashboards/*.json (Grafana provisioning) and
// out/dashboards/grafana.com/*.json (for Grafana's import page). Without
// -config it renders the defaults, which are the files committed in the
// repository. The config's fields are mixin.Config's YAML names.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rdma-doctor/rdma_doctor/alerts"
	"github.com/rdma-doctor/rdma_doctor/dashboards/build"
	"github.com/rdma-doctor/rdma_doctor/mixin"
)

func main() {
	config := flag.String("config", "", "mixin config file (YAML; fields left out keep their defaults)")
	out := flag.String("o", "", "output directory (created)")
	flag.Parse()
	if err := run(*config, *out); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run(config, out string) error {
	if out == "" || flag.NArg() > 0 {
		return fmt.Errorf("usage: generate [-config FILE] -o DIR")
	}
	c := mixin.Default()
	if config != "" {
		var err error
		if c, err = mixin.Load(config); err != nil {
			return err
		}
	}
	rules, err := alerts.Render(c)
	if err != nil {
		return err
	}
	pr, err := alerts.PrometheusRuleFrom(rules)
	if err != nil {
		return err
	}
	inhibit, err := alerts.RenderInhibitRules(c)
	if err != nil {
		return err
	}
	am, err := alerts.RenderAlertmanager(c)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"alertmanager.yml":      am,
		"rdma_doctor.rules.yml": rules,
		"prometheusrule.yaml":   pr,
		"inhibit_rules.yml":     inhibit,
	}
	dashboards, err := build.All(c)
	if err != nil {
		return err
	}
	for _, d := range dashboards {
		files[filepath.Join("dashboards", d.File)] = d.JSON
		imp, err := build.ForImport(d)
		if err != nil {
			return err
		}
		files[filepath.Join("dashboards", "grafana.com", d.File)] = imp
	}
	for name, b := range files {
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
