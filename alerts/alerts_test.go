// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/mixin"
)

var update = flag.Bool("update", false, "rewrite "+RulesPath+" and "+PrometheusRulePath)

const runbookBase = "https://github.com/rdma-doctor/rdma_doctor/blob/main/docs/runbook.md#"

// requirePromtool finds the real promtool. Locally a missing tool skips the
// test with a message; in CI (CI=true) it fails, so nothing skips silently.
func requirePromtool(t *testing.T) string {
	t.Helper()
	return testenv.RequireTool(t, "promtool", "promtool not installed (Debian: apt-get install prometheus; .ci/run does)")
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, requirePromtool(t), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPromtoolCheckRules lints the rules file with the real promtool: it
// parses every expression and template and rejects duplicate rules.
func TestPromtoolCheckRules(t *testing.T) {
	out := runPromtool(t, "check", "rules", "rdma_doctor.rules.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
}

// TestPromtoolTestRules runs every rule unit test in tests/.
func TestPromtoolTestRules(t *testing.T) {
	testenv.Long(t, "promtool test rules over every file of tests/")
	files, err := filepath.Glob(filepath.Join("tests", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule tests in tests/: %v", err)
	}
	out := runPromtool(t, append([]string{"test", "rules"}, files...)...)
	if strings.Count(out, "SUCCESS") != len(files) {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

// rule is the part of a Prometheus rule these tests look at.
type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	if err := yaml.Unmarshal(Rules, &f); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

func alertNames(t *testing.T) []string {
	var names []string
	for _, r := range loadRules(t) {
		if r.Alert != "" {
			names = append(names, r.Alert)
		}
	}
	return names
}

// runbookAnchors are the GitHub anchors of the "## " headings in
// docs/runbook.md (lower case, spaces to dashes, punctuation dropped).
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			a := drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), "")
			anchors[strings.ReplaceAll(a, " ", "-")] = true
		}
	}
	return anchors
}

// TestAlertConventions checks the style guide every alert follows: a known
// severity, a summary and description, and a runbook_url whose anchor exists
// in docs/runbook.md.
func TestAlertConventions(t *testing.T) {
	anchors := runbookAnchors(t)
	name := regexp.MustCompile(`^Rdma[A-Z][A-Za-z]+$`)
	seen := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			if !strings.Contains(r.Record, ":") {
				t.Errorf("recording rule %q: want level:metric:operations", r.Record)
			}
			continue
		}
		t.Run(r.Alert, func(t *testing.T) {
			if seen[r.Alert] {
				t.Errorf("alert defined twice")
			}
			seen[r.Alert] = true
			if !name.MatchString(r.Alert) {
				t.Errorf("name %q: want CamelCase with the Rdma prefix", r.Alert)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("severity %q: want critical, warning or info", s)
			}
			if r.Annotations["summary"] == "" || strings.Contains(r.Annotations["summary"], "{{") {
				t.Errorf("summary %q: want a static sentence", r.Annotations["summary"])
			}
			if !strings.Contains(r.Annotations["description"], "{{") {
				t.Errorf("description %q: want a templated sentence", r.Annotations["description"])
			}
			want := runbookBase + strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != want {
				t.Errorf("runbook_url %q, want %q", got, want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("docs/runbook.md has no section %q", "## "+r.Alert)
			}
		})
	}
	// And no runbook section without its alert.
	for a := range anchors {
		if !slices.ContainsFunc(alertNames(t), func(n string) bool { return strings.ToLower(n) == a }) {
			t.Errorf("docs/runbook.md section %q has no alert", a)
		}
	}
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			AlertName string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertTested checks that tests/ holds, for every alert, a case
// where it fires and one where it must not, and names no unknown alert.
func TestEveryAlertTested(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("tests", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rt ruleTests
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(false)
		if err := dec.Decode(&rt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Equal(rt.RuleFiles, []string{"../rdma_doctor.rules.yml"}) {
			t.Errorf("%s: rule_files %v, want the shipped rules file", f, rt.RuleFiles)
		}
		for _, tc := range rt.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.AlertName]++
				} else {
					quiet[a.AlertName]++
				}
			}
		}
	}
	names := alertNames(t)
	for _, n := range names {
		if fires[n] == 0 {
			t.Errorf("%s: no test where it fires", n)
		}
		if quiet[n] == 0 {
			t.Errorf("%s: no test where it must not fire", n)
		}
	}
	var unknown []string
	for n := range fires {
		if !slices.Contains(names, n) {
			unknown = append(unknown, n)
		}
	}
	for n := range quiet {
		if !slices.Contains(names, n) {
			unknown = append(unknown, n)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("tests name alerts that do not exist: %v", unknown)
	}
}

// rendered is the rules file as the template and the default config
// render it now; with -update it is written to rdma_doctor.rules.yml.
func rendered(t *testing.T) []byte {
	t.Helper()
	b, err := Render(mixin.Default())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Base(RulesPath), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestRulesUpToDate checks that the committed rdma_doctor.rules.yml is
// what rdma_doctor.rules.yml.tmpl renders with mixin.Default(); -update
// rewrites it (make generate).
func TestRulesUpToDate(t *testing.T) {
	if !bytes.Equal(rendered(t), Rules) && !*update {
		t.Fatalf("%s is out of date with rdma_doctor.rules.yml.tmpl and mixin.Default(): run make generate", RulesPath)
	}
}

// TestPrometheusRule checks that the Kubernetes PrometheusRule is the
// rendering of the rules file; -update rewrites it. It renders from the
// template, not from the embedded Rules, so one -update run of both tests
// brings both files up to date.
func TestPrometheusRule(t *testing.T) {
	got, err := PrometheusRuleFrom(rendered(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", PrometheusRulePath)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./alerts -run TestPrometheusRule -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with alerts/rdma_doctor.rules.yml: run go test ./alerts -run TestPrometheusRule -update", PrometheusRulePath)
	}

	// The rendering carries every rule over unchanged.
	var pr struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Groups []struct {
				Rules []rule `yaml:"rules"`
			} `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(got, &pr); err != nil {
		t.Fatal(err)
	}
	var carried []rule
	for _, g := range pr.Spec.Groups {
		carried = append(carried, g.Rules...)
	}
	if pr.Kind != "PrometheusRule" || fmt.Sprint(carried) != fmt.Sprint(loadRules(t)) {
		t.Errorf("PrometheusRule does not carry the rules unchanged")
	}
}
