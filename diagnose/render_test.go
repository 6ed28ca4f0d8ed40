// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func sampleReport() *Report {
	return &Report{Version: SchemaVersion, Host: "node1", Time: t0, Samples: 2, WindowSeconds: 600, Status: Fail,
		Summary: Summary{Pass: 1, Warn: 1, Fail: 2, Skip: 1},
		Checks:  []CheckInfo{{ID: "port.rate", Title: "Link rate as expected", Reads: []Source{SourceInfiniband}, Status: Fail}},
		Findings: []Finding{
			{Check: "port.phys", Severity: Pass, Target: "mlx5_0/1", Observed: "5: LinkUp"},
			{Check: "ctr.downed", Severity: Warn, Target: "mlx5_5/1", Observed: "link_downed unknown (saturated)", Unknown: true, Remedy: "perfquery -R"},
			{Check: "port.rate", Severity: Fail, Target: "mlx5_0/1", Observed: "56 Gb/sec (4X FDR)", Expected: "200 Gb/sec (config_board_id)",
				Evidence: "rate file", Remedy: "check the switch-port speed setting <and> the \"cable\""},
			{Check: "port.rate", Severity: Fail, Target: "mlx5_1/1", Observed: "100 Gb/sec (2X HDR)\nsecond line", Expected: "200 Gb/sec"},
			{Check: "irq.local", Severity: Skip, Target: "host", Evidence: "no collector reads IRQ affinity yet"},
		}}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "rdma_doctor diagnose: FAIL: 2 fail, 1 warn, 1 pass, 1 skip; host node1; 2 sample(s) over 10m0s; 2026-01-01T00:00:00Z") {
		t.Errorf("summary line first: %q", lines[0])
	}
	// Fails, then warns, then passes, then skips.
	order := []string{"FAIL port.rate mlx5_0/1", "FAIL port.rate mlx5_1/1", "WARN ctr.downed mlx5_5/1 (unknown)", "PASS port.phys mlx5_0/1: 5: LinkUp", "SKIP irq.local host: no collector"}
	last := -1
	for _, o := range order {
		i := strings.Index(out, o)
		if i < 0 || i < last {
			t.Errorf("%q missing or out of order in\n%s", o, out)
		}
		last = i
	}
	if !strings.Contains(out, "     remedy:   check the switch-port speed setting") {
		t.Errorf("remedy line missing:\n%s", out)
	}
}

func TestNHC(t *testing.T) {
	r := sampleReport()
	got := NHC(r)
	want := "rdma_doctor: FAIL port.rate mlx5_0/1 56 Gb/sec (4X FDR), expected 200 Gb/sec (config_board_id) (+1 more)"
	if got != want {
		t.Errorf("NHC\n got %q\nwant %q", got, want)
	}
	// The line stays one line, short, without double quotes, whole UTF-8.
	r.Findings[2].Observed = strings.Repeat("ü\"x\n", 200)
	got = NHC(r)
	if len(got) > nhcMax || strings.ContainsAny(got, "\"\n\r") || !strings.HasSuffix(got, "... (+1 more)") || !utf8Valid(got) {
		t.Errorf("long NHC line %d bytes: %q", len(got), got)
	}
	r.Status = Warn
	r.Findings = r.Findings[:2]
	if got := NHC(r); !strings.HasPrefix(got, "rdma_doctor: WARN ctr.downed mlx5_5/1") {
		t.Errorf("warn only: %q", got)
	}
	r.Status = Pass
	if got := NHC(r); got != "rdma_doctor: OK (1 pass, 1 skip)" {
		t.Errorf("pass: %q", got)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Version != SchemaVersion || back.Findings[1].Unknown != true || back.Findings[2].Severity != Fail || back.Time != t0 {
		t.Errorf("round trip: %+v", back)
	}
	// The documented schema names every field the JSON has.
	doc, err := os.ReadFile("../docs/diagnose-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	_ = json.Unmarshal(b.Bytes(), &generic)
	keys := map[string]bool{}
	collectKeys(generic, keys)
	for k := range keys {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/diagnose-schema.md does not document field %q", k)
		}
	}
	if !strings.Contains(string(doc), "version") || !regexp.MustCompile(`(?m)^Current version: `+"`1`").Match(doc) {
		t.Errorf("docs/diagnose-schema.md must state the current version")
	}
}

func collectKeys(v any, keys map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			keys[k] = true
			collectKeys(c, keys)
		}
	case []any:
		for _, c := range x {
			collectKeys(c, keys)
		}
	}
}

func TestHTML(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"<title>rdma_doctor diagnose: FAIL on node1</title>",
		`<header class="fail">`,
		`<h2 id="fail">Failures (2)</h2>`,
		`<tr class="fail"><td class="sev">FAIL</td><td class="check"><code>port.rate</code><br><span class="muted">Link rate as expected</span></td><td class="target">mlx5_0/1</td>`,
		"check the switch-port speed setting &lt;and&gt; the &#34;cable&#34;", // escaped
		`<span class="unknown">unknown</span>`,
		`<summary>Passed (1)</summary>`,
		`<summary>Skipped (1)</summary>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// Self-contained: no scripts, no external references.
	if regexp.MustCompile(`(?i)<script|<link|src=|url\(|https?://|@import`).MatchString(out) {
		t.Errorf("HTML is not self-contained:\n%s", out)
	}
}

func TestHandler(t *testing.T) {
	var rep *Report
	h := NewHandler(func() *Report { return rep })
	get := func(method, target, accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := get("GET", "/diagnose", ""); w.Code != http.StatusServiceUnavailable {
		t.Errorf("before the first sample: %d", w.Code)
	}
	rep = sampleReport()
	for _, tc := range []struct {
		target, accept, ctype, body string
	}{
		{"/diagnose", "", "text/plain", "rdma_doctor diagnose: FAIL"},
		{"/diagnose", "*/*", "text/plain", "rdma_doctor diagnose: FAIL"},
		{"/diagnose", "application/json", "application/json", `"version": 1`},
		{"/diagnose", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html", "<!DOCTYPE html>"},
		{"/diagnose", "text/html;q=0.5, application/json", "application/json", `"findings"`},
		{"/diagnose?format=json", "text/html", "application/json", `"findings"`},
		{"/diagnose?format=html", "", "text/html", "<table"},
		{"/diagnose?format=text", "application/json", "text/plain", "FAIL port.rate"},
		{"/diagnose?format=nhc", "", "text/plain", "rdma_doctor: FAIL port.rate mlx5_0/1"},
	} {
		w := get("GET", tc.target, tc.accept)
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), tc.ctype) || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("GET %s (Accept %q): %d %s\n%.200s", tc.target, tc.accept, w.Code, w.Header().Get("Content-Type"), w.Body.String())
		}
	}
	w := get("GET", "/diagnose?format=yaml", "")
	if w.Code != 400 || !strings.Contains(w.Body.String(), "text, json, html, nhc") || !strings.Contains(w.Body.String(), `"yaml"`) {
		t.Errorf("unknown format: %d %q", w.Code, w.Body.String())
	}
	if w := get("POST", "/diagnose", ""); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", w.Code)
	}
	if w := get("HEAD", "/diagnose", ""); w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") == "0" {
		t.Errorf("HEAD: %d, %d bytes", w.Code, w.Body.Len())
	}
	if csp := get("GET", "/diagnose?format=html", "").Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("HTML without a CSP: %q", csp)
	}
}

func TestStatusCollector(t *testing.T) {
	var rep *Report
	c := NewStatusCollector(func() *Report { return rep })
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("before the first sample: %d series", n)
	}
	rep = sampleReport()
	// A duplicate (check, target) keeps the worst severity.
	rep.Findings = append(rep.Findings, Finding{Check: "port.phys", Severity: Warn, Target: "mlx5_0/1"})
	want := `# HELP rdma_diagnose_status Latest diagnose result per check and target: 0 pass, 1 warn, 2 fail (skipped checks are absent).
# TYPE rdma_diagnose_status gauge
rdma_diagnose_status{check="ctr.downed",target="mlx5_5/1"} 1
rdma_diagnose_status{check="port.phys",target="mlx5_0/1"} 1
rdma_diagnose_status{check="port.rate",target="mlx5_0/1"} 2
rdma_diagnose_status{check="port.rate",target="mlx5_1/1"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic registry: %v", err)
	}
}

// TestSampler: the background sampler keeps the latest report and its
// history grows to two samples.
func TestSampler(t *testing.T) {
	e, err := NewEvaluator(nil, []string{"ctr.symbol"})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	s := &Sampler{Reader: &Reader{Host: hostAt("../fixtures/hosts/cx6-hdr-fdr", nil, func() time.Time { return now })},
		Eval: e, History: HistoryFor(10*time.Minute, time.Minute), Interval: time.Minute}
	if s.Latest() != nil {
		t.Fatal("report before the first sample")
	}
	r1 := s.Sample(t.Context())
	now = now.Add(time.Minute)
	r2 := s.Sample(t.Context())
	if s.Latest() != r2 || r1.Samples != 1 || r2.Samples != 2 {
		t.Errorf("samples %d %d", r1.Samples, r2.Samples)
	}
	if f, _ := finding(r2, "ctr.symbol", "mlx5_0/1"); f.Severity != Pass {
		t.Errorf("unchanged fixture, two samples: %+v", f)
	}
}
