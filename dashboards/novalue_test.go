// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// optInMetrics are the metric families only an opt-in setting exports,
// with the setting: a panel that shows nothing else belongs in a
// collapsed row.
var optInMetrics = map[string]string{
	"rdma_fabric_":                    "--collector.fabric",
	"instance_guid_port:rdma_fabric_": "--collector.fabric (its recording rules)",
	"rdma_probe_":                     "probe: in the config file",
	"rdma_netdev_module_":             "--collector.netdev.module-eeprom",
	"rdma_resource_process_":          "--collector.rdma_netlink.process-resources",
	"rdma_port_qp_counter":            "--collector.rdma_netlink.qp-counters",
}

// dashPanel is a panel as the JSON has it, with what the test needs.
type dashPanel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Collapsed   bool   `json:"collapsed"`
	FieldConfig struct {
		Defaults struct {
			NoValue string `json:"noValue"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// TestNoValueAndOptInRows checks what an evaluator sees on an empty panel:
// every panel that can be legitimately empty says what empty means
// (Grafana's noValue): one whose query filters (a comparison without
// bool, other than a count "or vector(0)"), one in a collapsed row, and
// one that dashboards/empty_on_demo.txt lists as empty on make demo. And
// the opt-in rows are collapsed: a panel showing only opt-in metrics
// (optInMetrics) is in a collapsed row, and a collapsed row holds such a
// panel (a default row is never hidden).
func TestNoValueAndOptInRows(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	empty, err := EmptyOnDemo()
	if err != nil {
		t.Fatal(err)
	}
	emptyPanels := map[[2]string]string{}
	for q, why := range empty {
		emptyPanels[[2]string{q.File, q.Where}] = why
	}
	checked, collapsed := 0, 0
	for name, b := range files {
		var d struct {
			Panels []dashPanel `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		check := func(p dashPanel, inCollapsed bool) {
			optIn, filters := panelKind(t, p)
			why := ""
			switch {
			case filters:
				why = "its query filters"
			case inCollapsed:
				why = "it is in an opt-in row"
			case emptyPanels[[2]string{name, p.Title}] != "":
				why = "it is empty on make demo (" + emptyPanels[[2]string{name, p.Title}] + ")"
			}
			if why != "" {
				checked++
				if p.FieldConfig.Defaults.NoValue == "" {
					t.Errorf("%s: panel %q has no noValue text, and %s: say what empty means (dashboards/build/novalue.go)", name, p.Title, why)
				}
			}
			if optIn != "" && !inCollapsed {
				t.Errorf("%s: panel %q shows only metrics of %s but is not in a collapsed row (optIn in dashboards/build)", name, p.Title, optIn)
			}
		}
		for _, p := range d.Panels {
			if p.Type != "row" {
				check(p, false)
				continue
			}
			if !p.Collapsed {
				if len(p.Panels) > 0 {
					t.Errorf("%s: open row %q holds panels", name, p.Title)
				}
				continue
			}
			collapsed++
			hasOptIn := false
			for _, c := range p.Panels {
				check(c, true)
				if o, _ := panelKind(t, c); o != "" {
					hasOptIn = true
				}
			}
			if !hasOptIn {
				t.Errorf("%s: row %q is collapsed but shows no opt-in metric: a default row stays open", name, p.Title)
			}
		}
	}
	if checked < 40 || collapsed < 4 {
		t.Errorf("only %d panels needing a noValue text and %d collapsed rows found: the walk misses some", checked, collapsed)
	}
}

// panelKind says whether every metric a panel selects is opt-in (the
// setting, or "") and whether a query filters.
func panelKind(t *testing.T, p dashPanel) (optIn string, filters bool) {
	t.Helper()
	all := true
	seen := false
	for _, tg := range p.Targets {
		expr, err := Expand(tg.Expr)
		if err != nil {
			t.Fatal(err)
		}
		e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
		if err != nil {
			t.Fatal(err)
		}
		// "count(x == 0) or vector(0)" is a stat that shows 0, never
		// empty.
		orVector := false
		if be, ok := e.(*parser.BinaryExpr); ok && be.Op == parser.LOR {
			if c, ok := be.RHS.(*parser.Call); ok && c.Func.Name == "vector" {
				orVector = true
			}
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			switch x := n.(type) {
			case *parser.BinaryExpr:
				if x.Op.IsComparisonOperator() && !x.ReturnBool && !orVector {
					filters = true
				}
			case *parser.VectorSelector:
				seen = true
				setting := ""
				for prefix, s := range optInMetrics {
					if strings.HasPrefix(x.Name, prefix) {
						setting = s
					}
				}
				if setting == "" {
					all = false
				} else if optIn == "" {
					optIn = setting
				}
			}
			return nil
		})
	}
	if !all || !seen {
		optIn = ""
	}
	return optIn, filters
}
