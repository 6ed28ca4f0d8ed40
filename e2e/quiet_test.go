// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestNoRDMAHost runs the binary on plain-vm, a recorded server without
// RDMA hardware (issue 36: a DaemonSet on every node of a mixed cluster
// lands there): /metrics has every collector at success 1 and no failing
// diagnose status, and `diagnose` skips dev.present with the reason and
// exits 0. The alerts on the same facts stay quiet
// (alerts/tests/quiet.yml).
func TestNoRDMAHost(t *testing.T) {
	e := start(t, hostArgs(t, "plain-vm")...)
	waitFirstDiagnosis(t, e)
	code, body := e.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: HTTP %d\n%s", code, body)
	}
	success := regexp.MustCompile(`(?m)^rdma_scrape_collector_success\{collector="([^"]+)"\} (\S+)$`)
	ms := success.FindAllStringSubmatch(body, -1)
	if len(ms) < 5 {
		t.Fatalf("%d collector success series\n%s", len(ms), body)
	}
	for _, m := range ms {
		if m[2] != "1" {
			t.Errorf("collector %s: success %s on a host without RDMA", m[1], m[2])
		}
	}
	if m := regexp.MustCompile(`(?m)^rdma_diagnose_status\{.*\} [12]$`).FindAllString(body, -1); len(m) > 0 {
		t.Errorf("failing or warning diagnose status on a host without RDMA: %q", m)
	}

	out, stderr, exit := diagnoseCLI(t, diagArgs(t, "plain-vm"), "--format=json")
	if exit != 0 {
		t.Errorf("diagnose exit %d, want 0\n%s", exit, stderr)
	}
	var r struct {
		Status   string
		Findings []struct{ Check, Severity, Target, Evidence string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := false
	for _, f := range r.Findings {
		if f.Check == "dev.present" {
			found = true
			if f.Severity != "skip" || !strings.Contains(f.Evidence, "no RDMA hardware to judge") {
				t.Errorf("dev.present: %+v", f)
			}
		}
		if f.Severity == "fail" || f.Severity == "warn" {
			t.Errorf("%s finding on a host without RDMA: %+v", f.Severity, f)
		}
	}
	if !found || r.Status == "fail" || r.Status == "warn" {
		t.Errorf("status %s, dev.present found %v", r.Status, found)
	}
}
