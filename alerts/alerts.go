// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package alerts holds rdma_doctor's Prometheus alerting and recording rules
// (rdma_doctor.rules.yml, rendered from rdma_doctor.rules.yml.tmpl with the
// mixin config's defaults and tested with promtool in tests/), renders them
// as a prometheus-operator PrometheusRule for Kubernetes, and renders the
// Alertmanager inhibit rules that go with them.
package alerts

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Rules is rdma_doctor.rules.yml, the rules as rendered with
// mixin.Default(): the PrometheusRule in deploy/kubernetes is generated
// from it.
//
//go:embed rdma_doctor.rules.yml
var Rules []byte

// PrometheusRulePath is where the generated PrometheusRule lives, relative
// to the repository root.
const PrometheusRulePath = "deploy/kubernetes/prometheusrule.yaml"

// header marks the generated file so nobody edits it by hand.
const header = `# Generated from alerts/rdma_doctor.rules.yml by "go test ./alerts -run TestPrometheusRule -update".
# Do not edit: change the rules file and regenerate.
`

// PrometheusRule renders Rules as a monitoring.coreos.com/v1 PrometheusRule.
func PrometheusRule() ([]byte, error) { return PrometheusRuleFrom(Rules) }

// PrometheusRuleFrom renders a rules file (Rules, or Render's output for
// another config) as a monitoring.coreos.com/v1 PrometheusRule. The groups
// are carried over as YAML nodes, so the rules' comments (which explain
// every threshold) survive into the manifest.
func PrometheusRuleFrom(rules []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(rules, &doc); err != nil {
		return nil, fmt.Errorf("parsing rdma_doctor.rules.yml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("rdma_doctor.rules.yml: want a mapping with groups")
	}
	var groups *yaml.Node
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "groups" {
			groups = root.Content[i+1]
		}
	}
	if groups == nil {
		return nil, errors.New("rdma_doctor.rules.yml: no groups")
	}

	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
	mapping := func(kv ...*yaml.Node) *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Content: kv} }
	manifest := mapping(
		str("apiVersion"), str("monitoring.coreos.com/v1"),
		str("kind"), str("PrometheusRule"),
		str("metadata"), mapping(
			str("name"), str("rdma-doctor"),
			str("namespace"), str("rdma-doctor"),
			str("labels"), mapping(
				str("app.kubernetes.io/name"), str("rdma_doctor"),
				str("app.kubernetes.io/component"), str("alerting-rules"),
				// kube-prometheus-stack's Prometheus selects rules by
				// the release label of its own Helm release.
				str("release"), str("kube-prometheus-stack"),
			),
		),
		str("spec"), mapping(str("groups"), groups),
	)

	var b bytes.Buffer
	b.WriteString(header)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(manifest); err != nil {
		return nil, fmt.Errorf("rendering PrometheusRule: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("rendering PrometheusRule: %w", err)
	}
	return b.Bytes(), nil
}
