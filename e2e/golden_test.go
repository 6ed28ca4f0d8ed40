// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in fixtures/golden")

// volatile matches series that change between runs or builds: the Go and
// process metrics, build info, timings, the port sampler's clock and the
// count of kept descriptors (it grows as files are first read).
var volatile = regexp.MustCompile(`^(# (HELP|TYPE) )?(go_|process_|promhttp_|rdma_doctor_build_info|rdma_scrape_collector_duration_seconds|rdma_snapshot_age_seconds|rdma_host_kept_descriptors|rdma_port_sampler_|rdma_port_state_changed_timestamp_seconds|rdma_diagnose_report_timestamp_seconds)`)

func stable(exposition string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(exposition, "\n") {
		if line == "" || volatile.MatchString(line) {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// TestGolden scrapes the binary on every fixture host and compares the
// output with fixtures/golden/<host>.metrics; -update rewrites them. The
// full output is then linted by the real promtool: only that part needs it.
func TestGolden(t *testing.T) {
	bodies := map[string]string{}
	for _, host := range hosts(t) {
		t.Run(host, func(t *testing.T) {
			e := start(t, hostArgs(t, host)...)
			code, body := e.get(t, "/metrics")
			if code != 200 {
				t.Fatalf("GET /metrics: HTTP %d\n%s", code, body)
			}
			bodies[host] = body
			got := stable(body)
			golden := filepath.Join(repoRoot(t), "fixtures", "golden", host+".metrics")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run make update-golden)", err)
			}
			if got != string(want) {
				t.Errorf("/metrics on %s differs from %s (run make update-golden after checking the change):\n%s",
					host, golden, lineDiff(string(want), got))
			}
		})
	}
	t.Run("promtool", func(t *testing.T) {
		promtool := requireTool(t, "promtool")
		for host, body := range bodies {
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(body)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if problems := lintProblems(out.String()); len(problems) > 0 || err != nil && out.Len() == 0 {
				t.Errorf("promtool check metrics on %s: %v\n%s", host, err, strings.Join(problems, "\n"))
			}
		}
	})
}

// contractLint are promtool's objections to metric names that DESIGN.md
// fixes as a contract: the generic hw_counter families carry the driver's
// counter name in a "counter" label, and promtool dislikes the word.
var contractLint = map[string]bool{
	"rdma_port_hw_counter_total metric name should not include type 'counter'":   true,
	"rdma_device_hw_counter_total metric name should not include type 'counter'": true,
	"rdma_port_counter_saturated metric name should not include type 'counter'":  true,
}

// lintProblems returns promtool's findings that are not contract names.
func lintProblems(out string) []string {
	var p []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !contractLint[l] {
			p = append(p, l)
		}
	}
	return p
}

// lineDiff lists lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	n := 0
	for _, l := range strings.Split(want, "\n") {
		if !g[l] && n < 40 {
			b.WriteString("- " + l + "\n")
			n++
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] && n < 80 {
			b.WriteString("+ " + l + "\n")
			n++
		}
	}
	return b.String()
}
