// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
)

func sampleReport() *diagnose.Report {
	r := &diagnose.Report{Version: diagnose.SchemaVersion, Host: "node1", Time: diagnosetest.T0, Samples: 2, WindowSeconds: 600, Status: diagnose.Fail,
		Summary: diagnose.Summary{Pass: 1, Warn: 1, Fail: 2, Skip: 1},
		Checks:  []diagnose.CheckInfo{{ID: "port.rate", Title: "Link rate as expected", Reads: []diagnose.Source{diagnose.SourceInfiniband}, Status: diagnose.Fail}},
		Findings: []diagnose.Finding{
			{Check: "port.phys", Severity: diagnose.Pass, Target: "mlx5_0/1", Observed: "5: LinkUp"},
			{Check: "ctr.downed", Severity: diagnose.Warn, Target: "mlx5_5/1", Observed: "link_downed unknown (saturated)", Unknown: true, Remedy: "perfquery -R"},
			{Check: "port.rate", Severity: diagnose.Fail, Target: "mlx5_0/1", Observed: "56 Gb/sec (4X FDR)", Expected: "200 Gb/sec (config_board_id)",
				Evidence: "rate file", Remedy: "check the switch-port speed setting <and> the \"cable\""},
			{Check: "port.rate", Severity: diagnose.Fail, Target: "mlx5_1/1", Observed: "100 Gb/sec (2X HDR)\nsecond line", Expected: "200 Gb/sec"},
			{Check: "irq.local", Severity: diagnose.Skip, Target: "host", Evidence: "no collector reads IRQ affinity yet"},
		}}
	r.Summary.Problems = diagnose.Problems(r.Findings)
	return r
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, sampleReport(), View{Verbose: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "rdma_doctor diagnose: FAIL: 2 fail, 1 warn, 1 pass, 1 skip; host node1; 2 sample(s) over 10m0s; 2026-01-01T00:00:00Z") {
		t.Errorf("summary line first: %q", lines[0])
	}
	// The problems, worst first, with their fix; then the details: fails,
	// then warns; then passes, then skips.
	order := []string{"\nProblems (3), worst first:\n",
		"FAIL port.rate mlx5_0/1: 56 Gb/sec (4X FDR), expected 200 Gb/sec (config_board_id) — fix: check the switch-port speed setting <and> the \"cable\"\n",
		"FAIL port.rate mlx5_1/1: 100 Gb/sec (2X HDR) second line, expected 200 Gb/sec\n",
		"WARN ctr.downed mlx5_5/1: link_downed unknown (saturated) — fix: perfquery -R\n",
		"\nDetails:\n",
		"\nFAIL port.rate mlx5_0/1\n", "\nFAIL port.rate mlx5_1/1\n", "\nWARN ctr.downed mlx5_5/1 (unknown)\n",
		"PASS port.phys mlx5_0/1: 5: LinkUp", "SKIP irq.local host: no collector",
		// The verdict again at the end, where a terminal leaves the eye.
		"\n\nVerdict: FAIL: 3 problem(s) (2 fail, 1 warn); host node1\n"}
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
	if strings.Contains(out, "not shown") || strings.Contains(out, "\x1b[") {
		t.Errorf("verbose text without colour hides something or has escape codes:\n%s", out)
	}
}

// TestTextCollapsed: without Verbose the passes and skips are counted and
// the hint says how to see them; the problems and details are all there.
func TestTextCollapsed(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, sampleReport(), View{VerboseHint: "--verbose"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "PASS ") || strings.Contains(out, "SKIP ") {
		t.Errorf("passes or skips shown without Verbose:\n%s", out)
	}
	if !strings.HasSuffix(out, "\n1 pass and 1 skip not shown; add --verbose to list them.\n\nVerdict: FAIL: 3 problem(s) (2 fail, 1 warn); host node1\n") {
		t.Errorf("no hint at the end:\n%s", out)
	}
	for _, want := range []string{"FAIL port.rate mlx5_0/1: ", "\nWARN ctr.downed mlx5_5/1 (unknown)\n", "     evidence: rate file\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	// A clean report says so instead of listing nothing.
	r := &diagnose.Report{Version: diagnose.SchemaVersion, Status: diagnose.Pass, Summary: diagnose.Summary{Pass: 1},
		Findings: []diagnose.Finding{{Check: "port.phys", Severity: diagnose.Pass, Target: "mlx5_0/1", Observed: "5: LinkUp"}}}
	b.Reset()
	_ = Text(&b, r, View{})
	if out := b.String(); !strings.Contains(out, "\nNo problems: no check failed or warned.\n") || !strings.HasSuffix(out, "\n1 pass and 0 skip not shown.\n\nVerdict: PASS: 0 problem(s) (0 fail, 0 warn)\n") {
		t.Errorf("clean report:\n%s", out)
	}
}

// TestTextColor: escape codes only when asked for, on the severities.
func TestTextColor(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, sampleReport(), View{Color: true, Verbose: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"\x1b[1;31mrdma_doctor diagnose: FAIL: ", "\x1b[1;31mVerdict: FAIL: 3 problem(s)", "\x1b[1;31mFAIL\x1b[0m port.rate mlx5_0/1: ", "\x1b[33mWARN\x1b[0m ctr.downed mlx5_5/1 (unknown)\n", "\x1b[32mPASS\x1b[0m port.phys"} {
		if !strings.Contains(out, want) {
			t.Errorf("coloured text lacks %q:\n%q", want, out)
		}
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
	r.Status = diagnose.Warn
	r.Findings = r.Findings[:2]
	if got := NHC(r); !strings.HasPrefix(got, "rdma_doctor: WARN ctr.downed mlx5_5/1") {
		t.Errorf("warn only: %q", got)
	}
	r.Status = diagnose.Pass
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
	var back diagnose.Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Version != diagnose.SchemaVersion || back.Findings[1].Unknown != true || back.Findings[2].Severity != diagnose.Fail || back.Time != diagnosetest.T0 {
		t.Errorf("round trip: %+v", back)
	}
	// The documented schema names every field the JSON has.
	doc, err := os.ReadFile("../../docs/diagnose-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	_ = json.Unmarshal(b.Bytes(), &generic)
	keys := map[string]bool{}
	diagnosetest.CollectKeys(generic, keys)
	for k := range keys {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/diagnose-schema.md does not document field %q", k)
		}
	}
	if !strings.Contains(string(doc), "version") || !regexp.MustCompile(`(?m)^Current version: `+fmt.Sprintf("`%d`", diagnose.SchemaVersion)).Match(doc) {
		t.Errorf("docs/diagnose-schema.md must state the current version")
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
		`<h2 id="problems">Problems (3), worst first</h2>`,
		`<li class="problem fail">
<div class="line"><span class="sev">FAIL</span> <code class="check" title="Link rate as expected">port.rate</code> <span class="where">mlx5_0/1</span>: 56 Gb/sec (4X FDR), expected 200 Gb/sec (config_board_id)</div>
<div class="fix"><span class="label">fix</span><code class="remedy">check the switch-port speed setting &lt;and&gt; the &#34;cable&#34;</code></div>
<details><summary>Link rate as expected: evidence</summary>`,
		`<td class="target">mlx5_5/1<span class="unknown">unknown</span></td>`,
		`<summary>Passed (1)</summary>`,
		`<summary>Skipped (1)</summary>`,
		`<a href="?format=text&amp;verbose=1">`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// The title once: in <title> and <h1>, never again in the page.
	if n := strings.Count(out, "rdma_doctor diagnose"); n != 2 {
		t.Errorf("title %d times, want <title> and <h1> only", n)
	}
	// Self-contained: no scripts, no external references.
	if regexp.MustCompile(`(?i)<script|<link|src=|url\(|https?://|@import`).MatchString(out) {
		t.Errorf("HTML is not self-contained:\n%s", out)
	}
}

func TestHandler(t *testing.T) {
	var rep *diagnose.Report
	h := NewHandler(func() *diagnose.Report { return rep })
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
		{"/diagnose", "application/json", "application/json", fmt.Sprintf(`"version": %d`, diagnose.SchemaVersion)},
		{"/diagnose", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html", "<!DOCTYPE html>"},
		{"/diagnose", "text/html;q=0.5, application/json", "application/json", `"findings"`},
		{"/diagnose?format=json", "text/html", "application/json", `"findings"`},
		{"/diagnose?format=html", "", "text/html", "<table"},
		{"/diagnose?format=text", "application/json", "text/plain", "FAIL port.rate"},
		{"/diagnose?format=nhc", "", "text/plain", "rdma_doctor: FAIL port.rate mlx5_0/1"},
		{"/diagnose", "", "text/plain", "not shown; add ?verbose=1 to list them."},
		{"/diagnose?verbose=1", "", "text/plain", "\nPASS port.phys mlx5_0/1: 5: LinkUp\n"},
		{"/diagnose?format=text&verbose", "", "text/plain", "\nSKIP irq.local host: "},
		{"/diagnose?verbose=true&format=json", "", "application/json", `"problems"`},
	} {
		w := get("GET", tc.target, tc.accept)
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), tc.ctype) || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("GET %s (Accept %q): %d %s\n%.200s", tc.target, tc.accept, w.Code, w.Header().Get("Content-Type"), w.Body.String())
		}
	}
	if w := get("GET", "/diagnose?verbose=0", ""); strings.Contains(w.Body.String(), "PASS port.phys") {
		t.Errorf("verbose=0 lists passes:\n%s", w.Body.String())
	}
	if w := get("GET", "/diagnose?verbose=yes", ""); w.Code != 400 || !strings.Contains(w.Body.String(), `verbose="yes"`) {
		t.Errorf("bad verbose: %d %q", w.Code, w.Body.String())
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
