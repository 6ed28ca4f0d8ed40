// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"bytes"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"text/template"

	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// RulesPath is the generated rules file, relative to the repository root.
const RulesPath = "alerts/rdma_doctor.rules.yml"

// rulesTemplate is the source of the rules: rdma_doctor.rules.yml with the
// configurable parts as {% ... %} actions. The delimiters are not Go's
// default {{ }} because Prometheus' own annotation templates use those and
// must pass through untouched.
//
//go:embed rdma_doctor.rules.yml.tmpl
var rulesTemplate string

// Render renders the rules for c: Render(mixin.Default()) is the committed
// rdma_doctor.rules.yml.
func Render(c mixin.Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t, err := template.New("rdma_doctor.rules.yml.tmpl").
		Delims("{%", "%}").
		Option("missingkey=error").
		Funcs(template.FuncMap{
			// runbook is an alert's runbook_url: the anchor of its
			// section in docs/runbook.md is the lower-cased name.
			"runbook": func(alert string) string { return c.RunbookURLBase + strings.ToLower(alert) },
			// num prints a threshold as PromQL reads it (10, 0.9, 2e-06).
			"num": func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) },
			// percent and micros print a ratio and a duration for people
			// (90 %, 2 µs).
			"percent": func(v float64) string { return strconv.FormatFloat(v*100, 'g', 4, 64) + " %" },
			"micros":  func(v float64) string { return strconv.FormatFloat(v*1e6, 'g', 4, 64) + " µs" },
			// pinnable is the counter label regex of the counters that
			// cannot be judged when pinned at their maximum
			// (infiniband.CounterSpec.Pinnable): the one list diagnose
			// uses too.
			"pinnable": func() string { return strings.Join(infiniband.PinnableCounters(), "|") },
		}).
		Parse(rulesTemplate)
	if err != nil {
		return nil, fmt.Errorf("parsing the rules template: %w", err)
	}
	// The label lists every aggregation and join keeps: the cluster label
	// and the job first, so rules evaluated over a global view (Thanos,
	// Mimir) neither mix clusters nor match series of two clusters whose
	// instance names collide.
	jobLabels := c.ClusterLabel + ", job"
	data := struct {
		mixin.Config
		Window                                          string
		JobLabels, HostLabels, DeviceLabels, PortLabels string
		LinkLabels                                      string
	}{
		Config:       c,
		Window:       c.RateWindow.String(),
		JobLabels:    jobLabels,
		HostLabels:   jobLabels + ", instance",
		DeviceLabels: jobLabels + ", instance, device",
		PortLabels:   jobLabels + ", instance, device, port",
		// A link's identity and the names of its two ends
		// (rdma_fabric_link_info's switch end and remote end).
		LinkLabels: "link, switch_node, switch_guid, switch_port, remote_node, remote_guid, remote_port",
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("rendering the rules: %w", err)
	}
	return b.Bytes(), nil
}
