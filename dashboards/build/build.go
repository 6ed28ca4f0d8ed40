// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

// Package build generates rdma_doctor's Grafana dashboards with Grafana's
// Foundation SDK, whose types are generated from Grafana's own dashboard
// schema: what the builders accept is what Grafana's model allows. The
// rendered JSON is committed in dashboards/ and checked to be up to date by
// its tests (go test ./dashboards -update rewrites it).
package build

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// Dashboard is one generated dashboard: its file name in dashboards/ and
// its JSON.
type Dashboard struct {
	File string
	JSON []byte
}

// All builds every dashboard for c (mixin.Default() gives the committed
// files). UIDs are fixed here, never generated: links, bookmarks and
// provisioning depend on them.
func All(c mixin.Config) ([]Dashboard, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s := newSelectors(c)
	builders := []struct {
		file string
		b    *dashboard.DashboardBuilder
	}{
		{"fleet.json", fleet(s)},
		{"host.json", host(s)},
		{"fabric.json", fabric(s)},
		{"probes.json", probes(s)},
		{"diagnose.json", diagnose(s)},
	}
	var out []Dashboard
	for _, d := range builders {
		built, err := d.b.Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.file, err)
		}
		layout(built.Panels)
		if err := setNoValue(d.file, built.Panels); err != nil {
			return nil, err
		}
		// Panel ids must be unique within a dashboard (Grafana links
		// panels by id); number them in layout order.
		for i, p := range built.Panels {
			id := uint32(i + 1)
			switch {
			case p.Panel != nil:
				p.Panel.Id = &id
			case p.RowPanel != nil:
				p.RowPanel.Id = id
			}
		}
		built.Panels = collapse(built.Panels)
		b, err := json.MarshalIndent(built, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.file, err)
		}
		out = append(out, Dashboard{File: d.file, JSON: append(b, '\n')})
	}
	return out, nil
}

// GridWidth is the width of Grafana's dashboard grid in columns.
const GridWidth = 24

// layout places the panels left to right in rows of GridWidth columns,
// starting a new line when a panel would not fit (the SDK's builder only
// wraps after a line is full, so a 24-wide panel after a 12-wide one
// overflowed the grid) and below the tallest panel of the line. A row
// header takes a line of its own.
func layout(panels []dashboard.PanelOrRowPanel) {
	var x, y, lineHeight uint32
	for _, p := range panels {
		if p.RowPanel != nil {
			y += lineHeight
			x, lineHeight = 0, 0
			p.RowPanel.GridPos = &dashboard.GridPos{X: 0, Y: y, W: GridWidth, H: 1}
			y++
			continue
		}
		if p.Panel == nil || p.Panel.GridPos == nil {
			continue
		}
		g := p.Panel.GridPos
		if x+g.W > GridWidth {
			y += lineHeight
			x, lineHeight = 0, 0
		}
		g.X, g.Y = x, y
		x += g.W
		lineHeight = max(lineHeight, g.H)
	}
}

// selectors are the label matchers shared by every query, and the names
// that depend on the mixin config. $instance, $device and $port are
// multi-value variables, hence =~.
type selectors struct {
	job, host, dev, port string
	// rate is the recording rules' suffix for their window (rate5m).
	rate string
	cfg  mixin.Config
}

func newSelectors(c mixin.Config) selectors {
	job := `job="$job"`
	if c.MultiCluster {
		job = c.ClusterLabel + `=~"$cluster", ` + job
	}
	return selectors{
		job:  job,
		host: job + `, instance=~"$instance"`,
		dev:  job + `, instance=~"$instance", device=~"$device"`,
		port: job + `, instance=~"$instance", device=~"$device", port=~"$port"`,
		rate: "rate" + c.RateWindow.String(),
		cfg:  c,
	}
}

// record names a per-port recording rule of alerts/ (the same config names
// it there): instance_device_port:rdma_port_NAME:rate5m.
func (s selectors) record(name string) string {
	return "instance_device_port:rdma_port_" + name + ":" + s.rate
}

var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// newDashboard starts a dashboard with the shared settings, the five
// template variables (datasource, job, instance, device, port; cluster
// after the datasource where the config asks for it) and links to its
// siblings.
func newDashboard(s selectors, uid, title, description string) *dashboard.DashboardBuilder {
	d := dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"rdma_doctor", "rdma", "infiniband"}).
		Editable().
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("rdma_doctor").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"rdma_doctor"}).
			AsDropdown(true).
			IncludeVars(true).
			KeepTime(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus"))
	jobQuery := `label_values(rdma_scrape_collector_success, job)`
	if s.cfg.MultiCluster {
		cl := s.cfg.ClusterLabel
		d = d.WithVariable(queryVar("cluster", "Cluster", `label_values(rdma_scrape_collector_success, `+cl+`)`, false))
		jobQuery = `label_values(rdma_scrape_collector_success{` + cl + `=~"$cluster"}, job)`
	}
	return d.
		WithVariable(queryVar("job", "Job", jobQuery, false)).
		WithVariable(queryVar("instance", "Instance", `label_values(rdma_scrape_collector_success{`+s.job+`}, instance)`, true)).
		WithVariable(queryVar("device", "Device", `label_values(rdma_device_info{`+s.host+`}, device)`, true)).
		WithVariable(queryVar("port", "Port", `label_values(rdma_port_state{`+s.dev+`}, port)`, true))
}

func queryVar(name, label, query string, multi bool) *dashboard.QueryVariableBuilder {
	v := dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).
		Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
	if multi {
		v = v.Multi(true).IncludeAll(true).AllValue(".+")
	}
	return v
}

// query is a range query with a legend.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource).Expr(expr).LegendFormat(legend).Range()
}

// instant is an instant query whose result is shown as a table.
func instant(expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource).Expr(expr).Instant().Format(prometheus.PromQueryFormatTable)
}

func graph(title, description, unit string, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Height(8).Span(12).
		FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true).
			Calcs([]string{"lastNotNull", "max"}))
	for _, t := range targets {
		p = p.WithTarget(t)
	}
	return p
}

// single is a stat panel showing one number, green below warn and red from
// it (warn 0 means any value is fine).
func single(title, description, unit string, warn float64, t *prometheus.DataqueryBuilder) *stat.PanelBuilder {
	steps := []dashboard.Threshold{{Color: "green"}}
	if warn > 0 {
		steps = append(steps, dashboard.Threshold{Value: cog.ToPtr(warn), Color: "red"})
	}
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Height(4).Span(4).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps)).
		WithTarget(t)
}

// tableOf is a table of instant queries, merged on their labels, with the
// internal columns hidden.
func tableOf(title, description string, span uint32, targets ...*prometheus.DataqueryBuilder) *table.PanelBuilder {
	p := table.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Height(8).Span(span).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "__name__": true, "job": true},
		}})
	for i, t := range targets {
		p = p.WithTarget(t.RefId(string(rune('A' + i))))
	}
	return p
}

// timeline shows a state over time (port state, probe success, check
// status) with value mappings.
func timeline(title, description string, mappings []dashboard.ValueMapping, t *prometheus.DataqueryBuilder) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Height(8).Span(12).
		MergeValues(true).
		ShowValue(common.VisibilityModeAuto).
		Mappings(mappings).
		WithTarget(t)
}

// valueMap maps numeric values to text and colour.
func valueMap(entries ...[3]string) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i, e := range entries {
		opts[e[0]] = dashboard.ValueMappingResult{Text: cog.ToPtr(e[1]), Color: cog.ToPtr(e[2]), Index: cog.ToPtr(int32(i))}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

var (
	portStates = valueMap(
		[3]string{"1", "DOWN", "red"},
		[3]string{"2", "INIT", "orange"},
		[3]string{"3", "ARMED", "yellow"},
		[3]string{"4", "ACTIVE", "green"},
		[3]string{"5", "ACTIVE_DEFER", "green"},
	)
	physStates = valueMap(
		[3]string{"1", "Sleep", "red"},
		[3]string{"2", "Polling", "red"},
		[3]string{"3", "Disabled", "red"},
		[3]string{"4", "Training", "yellow"},
		[3]string{"5", "LinkUp", "green"},
		[3]string{"6", "LinkErrorRecovery", "orange"},
		[3]string{"7", "PhyTest", "yellow"},
	)
	checkStates = valueMap(
		[3]string{"0", "pass", "green"},
		[3]string{"1", "warn", "orange"},
		[3]string{"2", "fail", "red"},
	)
	okFail = valueMap(
		[3]string{"0", "fail", "red"},
		[3]string{"1", "ok", "green"},
	)
	smStates = valueMap(
		[3]string{"0", "NOTACTIVE", "red"},
		[3]string{"1", "DISCOVERING", "yellow"},
		[3]string{"2", "STANDBY", "orange"},
		[3]string{"3", "MASTER", "green"},
	)
)

func row(title string) *dashboard.RowBuilder { return dashboard.NewRowBuilder(title) }

// optIn is the row of what a default install does not collect: collapsed,
// so that an evaluator's first look shows no panels waiting for a flag.
// Its title names the flag.
func optIn(title string) *dashboard.RowBuilder { return row(title).Collapsed(true) }

// collapse moves the panels that follow a collapsed row (up to the next
// row) into it, as Grafana stores a collapsed row. layout placed them as
// if open: Grafana keeps those positions for when the row is opened.
func collapse(panels []dashboard.PanelOrRowPanel) []dashboard.PanelOrRowPanel {
	var out []dashboard.PanelOrRowPanel
	var open *dashboard.RowPanel
	for _, p := range panels {
		switch {
		case p.RowPanel != nil:
			open = nil
			if p.RowPanel.Collapsed {
				open = p.RowPanel
			}
			out = append(out, p)
		case open != nil:
			open.Panels = append(open.Panels, *p.Panel)
		default:
			out = append(out, p)
		}
	}
	return out
}

// ForImport turns a dashboard into the variant grafana.com's import and
// Grafana's "Import dashboard" page expect: an __inputs entry asks the
// importing user for a Prometheus data source, which Grafana substitutes
// for ${DS_PROMETHEUS} before saving, and that becomes the default of the
// datasource variable every panel already uses. __requires names the
// panel plugins. Nothing else changes.
func ForImport(d Dashboard) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(d.JSON, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", d.File, err)
	}
	m["__inputs"] = []map[string]string{{
		"name": "DS_PROMETHEUS", "label": "Prometheus", "description": "The Prometheus that scrapes rdma_doctor",
		"type": "datasource", "pluginId": "prometheus", "pluginName": "Prometheus",
	}}
	requires := []map[string]string{{"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"}}
	panels, _ := m["panels"].([]any)
	seen := map[string]bool{}
	for _, p := range panels {
		typ, _ := p.(map[string]any)["type"].(string)
		if typ == "" || typ == "row" || seen[typ] {
			continue
		}
		seen[typ] = true
		requires = append(requires, map[string]string{"type": "panel", "id": typ, "name": typ, "version": ""})
	}
	m["__requires"] = requires
	templating, _ := m["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	found := false
	for _, v := range list {
		if v, _ := v.(map[string]any); v["name"] == "datasource" {
			v["current"] = map[string]any{"selected": true, "text": "${DS_PROMETHEUS}", "value": "${DS_PROMETHEUS}"}
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: no datasource variable", d.File)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.File, err)
	}
	return append(b, '\n'), nil
}
