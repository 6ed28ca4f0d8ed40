// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// InhibitPath is the generated Alertmanager snippet, relative to the
// repository root.
const InhibitPath = "alerts/inhibit_rules.yml"

// Inhibit is inhibit_rules.yml, the snippet as rendered with
// mixin.Default().
//
//go:embed inhibit_rules.yml
var Inhibit []byte

// inhibition is one Alertmanager inhibit rule: while an alert matching
// source fires, alerts matching target with the same port labels are
// muted, because the source names the cause the target only shows.
type inhibition struct {
	why            string // the comment above the rule
	source, target string // matchers, Alertmanager syntax
}

// inhibitions are the known overlaps between rdma_doctor's alerts. Adding
// one: a line here, a case in e2e/alertmanager_test.go, make generate.
var inhibitions = []inhibition{
	{"An InfiniBand port that no subnet manager swept stays in INIT: the missing SM is the cause, the port state its symptom.",
		`alertname="RdmaPortNoSubnetManager"`, `alertname="RdmaPortNotActive"`},
	{"The same port seen by the diagnose check that judges SM presence.",
		`alertname="RdmaPortNoSubnetManager"`, `alertname="RdmaDiagnoseCheckFailing", check="sm.present"`},
	{"A link below its expected rate is also the diagnose check port.rate failing for that port.",
		`alertname="RdmaPortLinkDegraded"`, `alertname="RdmaDiagnoseCheckFailing", check="port.rate"`},
}

// RenderInhibitRules renders the Alertmanager inhibit rules for c: a
// top-level inhibit_rules key to merge into alertmanager.yml. Every rule is
// scoped to one port (the cluster label, job, instance, device and port
// must be equal), so a fault on one port never mutes another's alerts.
func RenderInhibitRules(c mixin.Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(`# Alertmanager inhibit rules for rdma_doctor's alerts, generated from
# alerts/inhibit.go and the mixin config (make generate; go run
# ./mixin/generate for another config). Merge the inhibit_rules list into
# alertmanager.yml (Alertmanager 0.22 or later: matchers syntax). See
# docs/monitoring.md.
inhibit_rules:
`)
	equal := fmt.Sprintf("[%s, job, instance, device, port]", c.ClusterLabel)
	for _, in := range inhibitions {
		fmt.Fprintf(&b, "  # %s\n", in.why)
		fmt.Fprintf(&b, "  - source_matchers: [%s]\n", quoteMatchers(in.source))
		fmt.Fprintf(&b, "    target_matchers: [%s]\n", quoteMatchers(in.target))
		fmt.Fprintf(&b, "    equal: %s\n", equal)
	}
	return []byte(b.String()), nil
}

// quoteMatchers turns `a="x", b="y"` into a YAML flow list of single-quoted
// matcher strings.
func quoteMatchers(ms string) string {
	parts := strings.Split(ms, ", ")
	for i, p := range parts {
		parts[i] = "'" + p + "'"
	}
	return strings.Join(parts, ", ")
}
