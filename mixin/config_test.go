// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package mixin

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestParse: an empty file is the defaults, a partial one overrides only
// what it names, and a misspelt or invalid field is a one-line error.
func TestParse(t *testing.T) {
	c, err := Parse(nil)
	if err != nil || c != Default() {
		t.Errorf("Parse(empty) = %+v, %v; want the defaults", c, err)
	}
	c, err = Parse([]byte("cluster_label: k8s_cluster\nrate_window: 2m\nthresholds:\n  symbol_errors_per_hour: 20\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.ClusterLabel, want.RateWindow, want.Thresholds.SymbolErrorsPerHour = "k8s_cluster", model.Duration(2*time.Minute), 20
	if c != want {
		t.Errorf("Parse(partial) = %+v, want %+v", c, want)
	}
	for _, tc := range []struct{ in, err string }{
		{"thresholds:\n  symbol_errors_per_hr: 20\n", "field symbol_errors_per_hr not found"},
		{"cluster_label: k8s-cluster\n", "cluster_label"},
		{"job_selector: rdma_doctor\n", "job_selector"},
		{"runbook_url_base: wiki/runbook\n", "runbook_url_base"},
		{"rate_window: 10s\n", "rate_window"},
		{"thresholds:\n  probe_bandwidth_ratio: 90\n", "probe_bandwidth_ratio"},
		{"thresholds:\n  retransmits_per_second: 0\n", "retransmits_per_second"},
		{"diagnose_url: \"it's\"\n", "diagnose_url"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Parse(%q) error %v, want one naming %q", tc.in, err, tc.err)
		}
	}
}
