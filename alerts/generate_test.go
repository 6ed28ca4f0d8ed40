// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// TestAggregationsKeepClusterAndJob parses every rule expression and
// checks that each aggregation with by (...) and each vector match with
// on (...) keeps the cluster label and the job: without them, rules
// evaluated over a global view (Thanos, Mimir) mix clusters, or fail on
// series of two clusters whose instance names collide.
func TestAggregationsKeepClusterAndJob(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	checked := 0
	for _, r := range loadRules(t) {
		name := r.Alert + r.Record
		e, err := p.ParseExpr(r.Expr)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			var labels []string
			var what string
			switch x := n.(type) {
			case *parser.AggregateExpr:
				if x.Without || len(x.Grouping) == 0 {
					return nil
				}
				labels, what = x.Grouping, "by"
			case *parser.BinaryExpr:
				if x.VectorMatching == nil || !x.VectorMatching.On {
					return nil
				}
				labels, what = x.VectorMatching.MatchingLabels, "on"
			default:
				return nil
			}
			checked++
			if !slices.Contains(labels, "cluster") || !slices.Contains(labels, "job") {
				t.Errorf("%s: %s (%s) drops the cluster label or the job", name, what, strings.Join(labels, ", "))
			}
			return nil
		})
	}
	if checked < 20 {
		t.Errorf("only %d by/on clauses found: the walk misses some", checked)
	}
}

// TestRenderOtherConfig renders the rules with every configurable value
// changed and checks each one reaches the output, nothing of the defaults
// is left where a value was configurable, and promtool accepts the result.
func TestRenderOtherConfig(t *testing.T) {
	c := mixin.Default()
	c.JobSelector = `job="rdma-exporter"`
	c.ClusterLabel = "k8s_cluster"
	c.RunbookURLBase = "https://wiki.example.com/rdma#"
	c.DiagnoseURL = "http://{{ $labels.instance }}:9873/diagnose"
	c.RateWindow = model.Duration(2 * time.Minute)
	c.Thresholds = mixin.Thresholds{
		SymbolErrorsPerHour: 11, LinkErrorRecoveryPerHour: 12, ReceiveErrorsPerHour: 13,
		TransmitDiscardsPerHour: 140, TransmitWaitTicksPerSecond: 1500, LinkDownsPerDayFlapping: 3,
		RetransmitsPerSecond: 2.5, CongestionNotificationsPerSecond: 2000,
		ProbeBandwidthRatio: 0.85, ProbeLatencyLoopbackSeconds: 3e-6, ProbeLatencySwitchSeconds: 8e-6,
		FabricTransmitWaitRatio: 0.25,
		FlapDowns:               4, FlapWindow: model.Duration(7 * time.Minute), FlapHold: model.Duration(13 * time.Minute),
		DropAfter: model.Duration(6 * time.Minute), SwitchFaultLinks: 5,
	}
	b, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, want := range []string{
		`up{job="rdma-exporter"} == 0`,
		`sum by (k8s_cluster, job, instance, device, port)`,
		`max by (k8s_cluster, job, board_id, link_layer)`,
		`count by (k8s_cluster, job, hca_type)`,
		`$labels.k8s_cluster`,
		`runbook_url: https://wiki.example.com/rdma#rdmaportlinkdegraded`,
		`instance_device_port:rdma_port_retransmits:rate2m > 2.5`,
		`rate(rdma_port_data_received_bytes_total[2m])`,
		`increase(rdma_port_symbol_errors_total[1h]) > 11`,
		`increase(rdma_port_link_error_recovery_total[1h]) > 12`,
		`increase(rdma_port_receive_errors_total[1h]) > 13`,
		`increase(rdma_port_transmit_discards_total[1h]) > 140`,
		`instance_guid_port:rdma_fabric_port_transmit_wait:ratio_rate2m > 0.25`,
		`"port_xmit_discards", "", "") > 140`,
		`rate(rdma_port_transmit_wait_total[2m]) > 1500`,
		`increase(rdma_port_link_downed_total[1d]) >= 3`,
		`) > 2000`,
		`rdma_probe_bandwidth_ratio < 0.85`,
		`summary: RDMA probe bandwidth is below 85 % of the port rate.`,
		`peer="loopback"} > 3e-06`,
		`memory="gpu"} > 3e-06`,
		`peer!="loopback", memory!="gpu"} > 8e-06`,
		`(limit 3 µs in loopback and from GPU memory, 8 µs through a switch)`,
		`http://{{ $labels.instance }}:9873/diagnose has the evidence and the remedy.`,
		`increase(rdma_port_state_transitions_total{to="down"}[7m])`,
		`) >= 4`,
		`)[13m:1m])`,
		`for: 6m`,
		`) >= 5,`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered rules lack %q", want)
		}
	}
	for _, stale := range []string{"[5m]", "rate5m", "(cluster, ", "docs/runbook.md#", `job="rdma_doctor"`, "rdma_doctor diagnose\" on the node"} {
		if strings.Contains(out, stale) {
			t.Errorf("rendered rules still contain the default %q", stale)
		}
	}
	// Nothing of the template is left over.
	if m := regexp.MustCompile(`\{%|%\}|<no value>`).FindString(out); m != "" {
		t.Errorf("rendered rules contain %q", m)
	}
	path := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runPromtool(t, "check", "rules", path); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
}

// TestRenderRejectsBadConfig: a config the rules could not be right with
// is an error from Render, not a broken file.
func TestRenderRejectsBadConfig(t *testing.T) {
	c := mixin.Default()
	c.ClusterLabel = "k8s-cluster"
	if _, err := Render(c); err == nil || !strings.Contains(err.Error(), "cluster_label") {
		t.Errorf("Render with cluster label %q: %v, want a cluster_label error", c.ClusterLabel, err)
	}
}
