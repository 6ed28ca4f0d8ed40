// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// diagnoseCLI runs `rdma_doctor <args> diagnose <dargs>` and returns
// stdout, stderr and the exit code.
func diagnoseCLI(t testing.TB, args []string, dargs ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), append(append(append([]string{}, args...), "diagnose"), dargs...)...)
	return runCmd(t, cmd)
}

var (
	smFlagOnce sync.Once
	smFlag     string
)

// diagArgs are hostArgs plus a fixed, missing sminfo path: whether the
// machine has infiniband-diags (and what its sminfo says about a fixture
// port it cannot open) must not change the golden findings. sm.master then
// skips with "sminfo is not installed" everywhere.
func diagArgs(t testing.TB, host string) []string {
	t.Helper()
	smFlagOnce.Do(func() {
		out, _ := exec.Command(binary(t), "--help").CombinedOutput()
		if strings.Contains(string(out), "--collector.sm.sminfo-path") {
			smFlag = "--collector.sm.sminfo-path=/nonexistent/rdma_doctor-e2e/sminfo"
		}
	})
	args := hostArgs(t, host)
	if smFlag != "" {
		args = append(args, smFlag)
	}
	return args
}

// stableReport parses a JSON report and blanks what changes between runs
// (the time) so reports compare and golden files stay stable.
func stableReport(t testing.TB, body string) map[string]any {
	t.Helper()
	var r map[string]any
	body = relativeRoots(t, body)
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("not a JSON report: %v\n%.400s", err, body)
	}
	if _, ok := r["time"]; !ok {
		t.Fatalf("report without time: %.400s", body)
	}
	r["time"] = "(volatile)"
	return r
}

// relativeRoots replaces the absolute path of the fixture hosts (errors
// name the files they could not read) so golden files do not depend on
// where the repository is checked out.
func relativeRoots(t testing.TB, body string) string {
	return strings.ReplaceAll(body, filepath.Join(repoRoot(t), "fixtures", "hosts"), "<fixtures>")
}

func marshalStable(t testing.TB, r map[string]any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDiagnoseGolden runs `rdma_doctor diagnose --format=json` on every
// fixture host and compares the findings with
// fixtures/golden/<host>.diagnose.json (-update rewrites them); the exit
// code follows the report's status.
func TestDiagnoseGolden(t *testing.T) {
	for _, host := range hosts(t) {
		t.Run(host, func(t *testing.T) {
			out, stderr, code := diagnoseCLI(t, diagArgs(t, host), "--format=json")
			r := stableReport(t, out)
			want := map[string]int{"pass": 0, "skip": 0, "warn": 1, "fail": 2}[fmt.Sprint(r["status"])]
			if code != want {
				t.Errorf("exit code %d for status %v, want %d\n%s", code, r["status"], want, stderr)
			}
			got := marshalStable(t, r)
			golden := filepath.Join(repoRoot(t), "fixtures", "golden", host+".diagnose.json")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./e2e -run TestDiagnoseGolden -update)", err)
			}
			if got != string(b) {
				t.Errorf("diagnose on %s differs from %s (rerun with -update after checking the change):\n%s", host, golden, lineDiff(string(b), got))
			}
		})
	}
}

// TestDiagnoseServerAgreesWithCLI: /diagnose (JSON) and the CLI give the
// same report on every fixture host, and the text page, the status metric
// and the landing page link are there.
func TestDiagnoseServerAgreesWithCLI(t *testing.T) {
	for _, host := range hosts(t) {
		t.Run(host, func(t *testing.T) {
			// Without its port sampler and kernel log reader, which the CLI
			// cannot have (port.flap, port.drop and kernel.events judge a
			// history), the server must say what the CLI says.
			e := start(t, append(diagArgs(t, host), "--no-collector.portwatch", "--no-collector.kmsg")...)
			code, body := e.get(t, "/diagnose?format=json")
			if code != 200 {
				t.Fatalf("GET /diagnose?format=json: %d\n%s", code, body)
			}
			server := stableReport(t, body)
			out, _, _ := diagnoseCLI(t, diagArgs(t, host), "--format=json")
			cli := stableReport(t, out)
			if s, c := marshalStable(t, server), marshalStable(t, cli); s != c {
				t.Errorf("/diagnose and the CLI disagree on %s:\n%s", host, lineDiff(c, s))
			}

			// The metric carries every non-skip finding, with its value.
			_, metrics := e.get(t, "/metrics")
			findings, _ := server["findings"].([]any)
			for _, x := range findings {
				f := x.(map[string]any)
				line := fmt.Sprintf(`rdma_diagnose_status{check=%q,target=%q}`, f["check"], f["target"])
				val := map[string]string{"pass": " 0", "warn": " 1", "fail": " 2"}[f["severity"].(string)]
				if val == "" {
					if strings.Contains(metrics, line+" ") {
						t.Errorf("skipped finding exported: %s", line)
					}
					continue
				}
				if !strings.Contains(metrics, line+val+"\n") {
					t.Errorf("/metrics lacks %s%s", line, val)
				}
			}
		})
	}
}

func TestDiagnoseServerPages(t *testing.T) {
	e := start(t, hostArgs(t, "cx6-hdr-fdr")...)
	if _, body := e.get(t, "/"); !strings.Contains(body, `href="/diagnose"`) {
		t.Errorf("landing page does not link /diagnose:\n%s", body)
	}
	code, body := e.get(t, "/diagnose")
	if code != 200 || !strings.HasPrefix(body, "rdma_doctor diagnose: FAIL: ") || !strings.Contains(body, "\nFAIL port.rate mlx5_0/1\n") {
		t.Errorf("text page: %d\n%s", code, body)
	}
	code, body = e.get(t, "/diagnose?format=xml")
	if code != 400 || !strings.Contains(body, "text, json, html, nhc") {
		t.Errorf("unknown format: %d %q", code, body)
	}
	code, body = e.get(t, "/diagnose?format=nhc")
	if code != 200 || strings.Count(body, "\n") != 1 || !strings.HasPrefix(body, "rdma_doctor: FAIL port.rate mlx5_0/1 56 Gb/sec (4X FDR)") {
		t.Errorf("nhc: %d %q", code, body)
	}
	req, _ := http.NewRequest("GET", "http://"+e.addr+"/diagnose", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Accept: application/json gave %s", ct)
	}
}

// TestDiagnoseCLI covers the exit codes, the formats, --check and
// --interval.
func TestDiagnoseCLI(t *testing.T) {
	cx6 := hostArgs(t, "cx6-hdr-fdr")
	dgx := hostArgs(t, "dgx-h100")
	badCfg := filepath.Join(t.TempDir(), "bad.yml")
	if err := os.WriteFile(badCfg, []byte("diagnose:\n  thresholds:\n    counters:\n      symbol_errors: {warn_above: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typoCfg := filepath.Join(t.TempDir(), "typo.yml")
	if err := os.WriteFile(typoCfg, []byte("diagnose:\n  disable: [port.rat]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		dargs  []string
		code   int
		stdout *regexp.Regexp
		stderr *regexp.Regexp
	}{
		{"fail", cx6, nil, 2, regexp.MustCompile(`^rdma_doctor diagnose: FAIL`), nil},
		{"warn (saturated counters)", dgx, []string{"--check=ctr.*"}, 1, regexp.MustCompile(`(?m)^WARN ctr.downed mlx5_5/1 \(unknown\)$`), nil},
		{"pass with --check", dgx, []string{"--check=port.phys,port.state"}, 0, regexp.MustCompile(`: PASS: 0 fail, 0 warn, 18 pass, 0 skip`), nil},
		{"glob --check", cx6, []string{"--check", "port.*", "--check", "sm.present", "--verbose"}, 2, regexp.MustCompile(`(?m)^PASS sm.present mlx5_0/1`), nil},
		{"problems first, passes collapsed", cx6, nil, 2, regexp.MustCompile(`(?s)^rdma_doctor diagnose: FAIL: [^\n]*\n\nProblems \(\d+\), worst first:\nFAIL port.rate mlx5_0/1: 56 Gb/sec \(4X FDR\), expected 200 Gb/sec \(config_board_id\) — fix: mlx5_0/1 trained at FDR lanes.*\nDetails:\n.*\n\d+ pass and \d+ skip not shown; add --verbose to list them\.\n\nVerdict: FAIL: \d+ problem\(s\) \(\d+ fail, \d+ warn\)[^\n]*\n$`), nil},
		// the two saturated link_downed ports are one line; the nine 4-bit
		// overrun counters pinned at 15 are no problem (ctr.integrity
		// cannot judge them: diagnose.TestProblemsOnTheDemoHost)
		{"demo host: two ports, one line", dgx, nil, 2, regexp.MustCompile(`(?m)^WARN ctr.downed on 2 ports \(mlx5_1/1, mlx5_5/1\): link_downed unknown \(saturated\) — fix: clear the saturated counters so they count again: perfquery -C <device> -P 1 -R`), nil},
		{"nhc", cx6, []string{"--format=nhc"}, 2, regexp.MustCompile(`^rdma_doctor: FAIL port.rate mlx5_0/1 56 Gb/sec \(4X FDR\), expected 200 Gb/sec \(config_board_id\) \(\+\d+ more\)\n$`), nil},
		{"html", cx6, []string{"--format=html"}, 2, regexp.MustCompile(`(?s)^<!DOCTYPE html>.*<h2 id="problems">Problems \(\d+\), worst first</h2>`), nil},
		{"unknown format", cx6, []string{"--format=yaml"}, 3, nil, regexp.MustCompile(`--format="yaml": want one of text, json, html, nhc`)},
		{"unknown check", cx6, []string{"--check=port.nope"}, 3, nil, regexp.MustCompile(`"port.nope" matches no check id`)},
		{"bad config", append([]string{"--config.file=" + badCfg}, cx6[0]), nil, 3, nil, regexp.MustCompile(`line 4: thresholds.counters: unknown counter "symbol_errors"`)},
		{"disable typo", append([]string{"--config.file=" + typoCfg}, cx6[0]), nil, 3, nil, regexp.MustCompile(`line 2.*"port.rat" matches no check id`)},
		{"missing rootfs", []string{"--path.rootfs=/nonexistent/rdma"}, nil, 3, nil, regexp.MustCompile(`path.rootfs`)},
		{"unknown flag", cx6, []string{"--bogus"}, 3, nil, regexp.MustCompile(`bogus`)},
		{"help", cx6, []string{"--help"}, 0, regexp.MustCompile(`--interval`), nil},
		{"list checks", cx6, []string{"--list-checks"}, 0, regexp.MustCompile(`(?m)^irq\.local +Completion IRQs`), nil},
		{"no RDMA at all", []string{"--path.rootfs=" + t.TempDir()}, nil, 2, regexp.MustCompile(`(?m)^FAIL dev.present host$`), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := diagnoseCLI(t, tc.args, tc.dargs...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %.600s\nstderr: %s", code, tc.code, out, stderr)
			}
			if tc.stdout != nil && !tc.stdout.MatchString(out) {
				t.Errorf("stdout does not match %s:\n%.1500s", tc.stdout, out)
			}
			if tc.stderr != nil && !tc.stderr.MatchString(stderr) {
				t.Errorf("stderr does not match %s:\n%s", tc.stderr, stderr)
			}
		})
	}

	// --interval takes two samples: the delta checks judge (an unchanged
	// fixture passes) instead of skipping.
	out, _, _ := diagnoseCLI(t, cx6, "--interval=1s", "--format=json", "--check=ctr.symbol")
	var r struct {
		Samples       int
		WindowSeconds float64 `json:"window_seconds"`
		Findings      []struct{ Severity, Target, Evidence string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Samples != 2 || r.WindowSeconds < 1 || len(r.Findings) != 2 || r.Findings[0].Severity != "pass" {
		t.Errorf("--interval=1s: %+v", r)
	}
}

// TestDiagnoseColorOnlyOnATerminal runs the CLI on a pseudo-terminal
// (util-linux script): colours there, none with NO_COLOR or TERM=dumb, and
// none through a pipe.
func TestDiagnoseColorOnlyOnATerminal(t *testing.T) {
	script := requireTool(t, "script")
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	args := append(append([]string{binary(t)}, hostArgs(t, "cx6-hdr-fdr")...), "diagnose", "--check=port.rate")
	var line []string
	for _, a := range args {
		line = append(line, quote(a))
	}
	onTTY := func(env ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, "-qec", strings.Join(line, " "), "/dev/null")
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.Output()
		if !strings.Contains(string(out), "port.rate mlx5_0/1") {
			t.Fatalf("script %v gave no report:\n%q", env, out)
		}
		return string(out)
	}
	const red = "\x1b[1;31mFAIL\x1b[0m port.rate mlx5_0/1: "
	if out := onTTY("NO_COLOR=", "TERM=xterm"); !strings.Contains(out, red) {
		t.Errorf("no colour on a terminal:\n%q", out)
	}
	for _, env := range [][]string{{"NO_COLOR=1", "TERM=xterm"}, {"NO_COLOR=", "TERM=dumb"}} {
		if out := onTTY(env...); strings.Contains(out, "\x1b[") {
			t.Errorf("escape codes on a terminal with %v:\n%q", env, out)
		}
	}
	out, _, _ := diagnoseCLI(t, hostArgs(t, "cx6-hdr-fdr"), "--check=port.rate")
	if strings.Contains(out, "\x1b[") || !strings.Contains(out, "FAIL port.rate mlx5_0/1: ") {
		t.Errorf("escape codes (or no report) through a pipe:\n%q", out)
	}
}

// TestDiagnoseBadConfigStopsServer: a config the diagnose section rejects
// stops start-up with the line.
func TestDiagnoseBadConfigStopsServer(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  policies:\n    ipoib_mode: cm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runBinary(t, "--config.file="+cfg, "--web.listen-address=127.0.0.1:0", hostArgs(t, "dgx-h100")[0])
	if err == nil || !strings.Contains(out, `line 3: ipoib_mode "cm"`) {
		t.Errorf("bad diagnose config: %v\n%s", err, out)
	}
}

// TestConfigFIFOAndHugeRefused: a FIFO as --config.file (nobody writing)
// or a config past 1 MiB stops diagnose and serve at once with one line
// naming the file, exit 3 for diagnose; neither blocks nor parses it.
func TestConfigFIFOAndHugeRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yml")
	if err := os.WriteFile(huge, []byte("#"+strings.Repeat("x", 2<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := hostArgs(t, "dgx-h100")[0]
	for _, tc := range []struct{ file, want string }{
		{fifo, "not a regular file (a FIFO)"},
		{huge, "over the 1048576-byte (1 MiB) limit"},
	} {
		out, err := runBinary(t, "diagnose", "--config.file="+tc.file, root)
		if code := exitCode(t, err); code != 3 || !strings.Contains(out, tc.file+": ") || !strings.Contains(out, tc.want) {
			t.Errorf("diagnose --config.file=%s: exit %d, want 3 and %q\n%s", tc.file, code, tc.want, out)
		}
		out, err = runBinary(t, "--config.file="+tc.file, "--web.listen-address=127.0.0.1:0", root)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("serve --config.file=%s: %v, want %q\n%s", tc.file, err, tc.want, out)
		}
	}
}

// chromiumFlags are the flags for a sandbox-less, offline, quiet headless
// Chromium that logs the page's console to stderr.
func chromiumFlags(userDir string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
		"--user-data-dir=" + userDir, "--enable-logging=stderr", "--v=0"}
}

// runChromium runs chromium in its own process group with a hard timeout
// and kills the whole group (renderers, GPU and zygote processes) after.
func runChromium(t testing.TB, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("chromium timed out\n%s", e.String())
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of the group
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, e.String())
	}
	return o.String(), e.String()
}

// consoleProblems returns the lines of Chromium's log that report the
// page's console: with --enable-logging=stderr every console message is a
// ":CONSOLE" line ("Uncaught ..." for exceptions), and Content-Security-
// Policy violations ("... violates the following Content Security Policy
// directive", older releases "Refused to ...") are console errors too. The page has
// no script, so any console line at all is a problem.
func consoleProblems(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, ":CONSOLE") || strings.Contains(l, "Uncaught") || strings.Contains(l, "Refused to") ||
			strings.Contains(l, "Content Security Policy") {
			out = append(out, l)
		}
	}
	return out
}

// TestDiagnoseHTMLInChromium loads /diagnose in a headless Chromium: the
// page renders the problems first, logs nothing to the console, and a
// screenshot is kept. A control page with a script error and a blocked
// external stylesheet proves the console detection works. Then the demo
// host's page (the widest: 26 findings, nine-port groups) is measured at
// 1280×800: no horizontal scrolling, collapsed or with every <details>
// open, the title once, the first problem and its fix on the first screen,
// remedies selectable in one click; and the screenshot's right margin is
// page background from the header down.
func TestDiagnoseHTMLInChromium(t *testing.T) {
	bin := requireTool(t, "chromium")
	artifacts, err := os.MkdirTemp("", "rdma_doctor-diagnose-html-")
	if err != nil {
		t.Fatal(err)
	}
	// Kept to look at only when the test fails.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("artifacts (screenshots, DOM, chromium log) kept in %s", artifacts)
			return
		}
		_ = os.RemoveAll(artifacts)
	})

	// Control: the detector must see a console error and a CSP violation.
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'")
		fmt.Fprint(w, `<!DOCTYPE html><html><head><link rel="stylesheet" href="/x.css"></head><body><p>control</p><script>undefinedFunction();</script></body></html>`)
	}))
	defer control.Close()
	_, cerr := runChromium(t, bin, append(chromiumFlags(filepath.Join(artifacts, "profile-control")), "--dump-dom", control.URL)...)
	problems := consoleProblems(cerr)
	if all := strings.Join(problems, "\n"); !strings.Contains(all, "Uncaught ReferenceError") || !strings.Contains(all, "Content Security Policy") {
		t.Fatalf("console detection does not work: a page with an error and a CSP violation gave %q\nfull log:\n%s", problems, cerr)
	}

	e := start(t, hostArgs(t, "cx6-hdr-fdr")...)
	url := "http://" + e.addr + "/diagnose?format=html"
	dom, stderr := runChromium(t, bin, append(chromiumFlags(filepath.Join(artifacts, "profile")), "--dump-dom", url)...)
	_ = os.WriteFile(filepath.Join(artifacts, "diagnose.dom.html"), []byte(dom), 0o644)
	_ = os.WriteFile(filepath.Join(artifacts, "chromium.log"), []byte(stderr), 0o644)
	if !regexp.MustCompile(`<h2 id="problems">Problems \(\d+\), worst first</h2>`).MatchString(dom) {
		t.Errorf("rendered DOM has no problems heading")
	}
	for _, want := range []string{"<title>rdma_doctor diagnose: FAIL</title>",
		`<code class="check" title="Link rate as expected">port.rate</code> <span class="where">mlx5_0/1</span>`,
		`<td class="target">mlx5_1/1</td>`, "switch-port speed setting", `<code class="remedy">`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if p := consoleProblems(stderr); len(p) > 0 {
		t.Errorf("console output while loading /diagnose:\n%s", strings.Join(p, "\n"))
	}

	// The demo host, measured in the browser. The page has no script (its
	// policy forbids one), so a proxy serves the same bytes with a
	// measuring script appended; the proxy's policy allows only that.
	demo := start(t, hostArgs(t, "dgx-h100")...)
	demoURL := "http://" + demo.addr + "/diagnose?format=html"
	code, demoPage := demo.get(t, "/diagnose?format=html")
	if code != 200 {
		t.Fatalf("GET %s: %d\n%s", demoURL, code, demoPage)
	}
	measured := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := demoPage
		if r.URL.Query().Get("page") == "wide" { // control: a page that does scroll sideways
			body = `<!DOCTYPE html><html><head><title>wide</title><style>div { width: 2000px; }</style></head><body><div>wide</div></body></html>`
		}
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'")
		fmt.Fprint(w, strings.Replace(body, "</body>", measureScript+"</body>", 1))
	}))
	defer measured.Close()
	measure := func(page string) viewportMeasure {
		t.Helper()
		dom, stderr := runChromium(t, bin, append(chromiumFlags(filepath.Join(artifacts, "profile-measure-"+page)),
			"--window-size=1280,800", "--dump-dom", measured.URL+"?page="+page)...)
		_ = os.WriteFile(filepath.Join(artifacts, "measure-"+page+".dom.html"), []byte(dom), 0o644)
		m := regexp.MustCompile(`<pre id="measure">([^<]*)</pre>`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("%s: the measuring script wrote nothing\n%.2000s\n%s", page, dom, stderr)
		}
		var v viewportMeasure
		if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &v); err != nil {
			t.Fatalf("%s: %v: %s", page, err, m[1])
		}
		if v.InnerWidth != 1280 {
			t.Fatalf("%s: window is %d px wide, not 1280: --window-size did not apply", page, v.InnerWidth)
		}
		return v
	}
	if w := measure("wide"); w.ScrollWidth <= w.InnerWidth {
		t.Fatalf("the measurement cannot see horizontal scrolling: a 2000 px page measured %+v", w)
	}
	v := measure("demo")
	t.Logf("demo page at 1280×800: %+v", v)
	if v.ScrollWidth > v.InnerWidth || v.OpenScrollWidth > v.InnerWidth {
		t.Errorf("the page scrolls sideways at 1280 px: scrollWidth %d collapsed, %d with every <details> open, innerWidth %d",
			v.ScrollWidth, v.OpenScrollWidth, v.InnerWidth)
	}
	if v.WidestRight > v.InnerWidth {
		t.Errorf("an element ends at x=%d, right of the %d px window", v.WidestRight, v.InnerWidth)
	}
	if v.Titles != 1 {
		t.Errorf("the visible text has the title %d times, want once", v.Titles)
	}
	if v.Problems < 5 || v.FirstFixBottom <= 0 || v.FirstFixBottom > v.InnerHeight {
		t.Errorf("the first problem's fix is not on the first screen (bottom %d of %d px; %d problems)", v.FirstFixBottom, v.InnerHeight, v.Problems)
	}
	if v.RemedySelect != "all" {
		t.Errorf("a remedy is not selected whole by one click: user-select %q", v.RemedySelect)
	}
	if v.Details < v.Problems {
		t.Errorf("%d problems but %d expandable <details>", v.Problems, v.Details)
	}

	for _, shot := range []struct{ name, url string }{{"diagnose", url}, {"demo", demoURL}} {
		file := filepath.Join(artifacts, shot.name+".png")
		_, stderr = runChromium(t, bin, append(chromiumFlags(filepath.Join(artifacts, "profile-shot-"+shot.name)),
			"--hide-scrollbars", "--window-size=1280,800", "--screenshot="+file, shot.url)...)
		if p := consoleProblems(stderr); len(p) > 0 {
			t.Errorf("console output while taking the screenshot of %s:\n%s", shot.name, strings.Join(p, "\n"))
		}
		if err := checkScreenshot(file); err != nil {
			t.Errorf("screenshot %s: %v", file, err)
		}
		t.Logf("screenshot: %s", file)
	}
}

// measureScript measures the page it is appended to and writes the
// result into the DOM, where --dump-dom shows it.
const measureScript = `<script>
(function () {
  var d = document.documentElement, m = {};
  m.innerWidth = innerWidth; m.innerHeight = innerHeight; m.scrollWidth = d.scrollWidth;
  m.titles = (document.body.innerText.match(/rdma_doctor diagnose/g) || []).length;
  var ps = document.querySelectorAll("li.problem");
  m.problems = ps.length;
  m.details = document.querySelectorAll("li.problem details").length;
  var fix = document.querySelector("li.problem .fix");
  m.firstFixBottom = fix ? Math.ceil(fix.getBoundingClientRect().bottom) : 0;
  var rem = document.querySelector("code.remedy");
  m.remedySelect = rem ? getComputedStyle(rem).userSelect : "";
  document.querySelectorAll("details").forEach(function (x) { x.open = true; });
  m.openScrollWidth = d.scrollWidth;
  var right = 0;
  document.querySelectorAll("body *").forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > right) { right = r.right; }
  });
  m.widestRight = Math.ceil(right);
  var pre = document.createElement("pre");
  pre.id = "measure"; pre.textContent = JSON.stringify(m);
  document.body.appendChild(pre);
})();
</script>`

// viewportMeasure is what measureScript reports.
type viewportMeasure struct {
	InnerWidth      int    `json:"innerWidth"`
	InnerHeight     int    `json:"innerHeight"`
	ScrollWidth     int    `json:"scrollWidth"`
	OpenScrollWidth int    `json:"openScrollWidth"`
	WidestRight     int    `json:"widestRight"`
	Titles          int    `json:"titles"`
	Problems        int    `json:"problems"`
	Details         int    `json:"details"`
	FirstFixBottom  int    `json:"firstFixBottom"`
	RemedySelect    string `json:"remedySelect"`
}

// checkScreenshot checks a 1280×800 screenshot's layout: a coloured
// header band across the full width, then, down to the bottom, a right
// margin of page background (#fafafa): nothing runs into the window's
// edge, as a table wider than the window does.
func checkScreenshot(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return err
	}
	b := img.Bounds()
	if b.Dx() != 1280 || b.Dy() != 800 {
		return fmt.Errorf("%dx%d, want 1280x800", b.Dx(), b.Dy())
	}
	rgb := func(x, y int) [3]uint8 {
		r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
		return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
	}
	background := [3]uint8{0xfa, 0xfa, 0xfa}
	header := rgb(1279, 2)
	if header == background || rgb(0, 2) != header {
		return fmt.Errorf("no header band across the top: %v at the left, %v at the right", rgb(0, 2), header)
	}
	y := 0
	for y < 200 && rgb(1279, y) == header {
		y++
	}
	if y == 0 || y == 200 {
		return fmt.Errorf("header band ends at y=%d", y)
	}
	for ; y < 800; y++ {
		for x := 1280 - 12; x < 1280; x++ {
			if c := rgb(x, y); c != background {
				return fmt.Errorf("pixel (%d,%d) in the right margin is %v, not the page background: something runs into the window's edge", x, y, c)
			}
		}
	}
	return nil
}

// TestDiagnoseNeverShowsOpenSMSecrets runs every format, from the CLI and
// the server, on the host whose opensm.conf and command line carry unique
// secret keys (fixtures/hosts.d/30-sm.sh), and greps for them.
func TestDiagnoseNeverShowsOpenSMSecrets(t *testing.T) {
	const host = "sm-opensm"
	if _, err := os.Stat(filepath.Join(repoRoot(t), "fixtures", "hosts", host)); err != nil {
		t.Fatalf("fixture host %s: %v", host, err)
	}
	secret := regexp.MustCompile(`(?i)5ec7e7f[0-9a-f]ab5c0de[0-9a-f]`)
	args := diagArgs(t, host)
	e := start(t, args...) // start logs at debug level
	for _, format := range []string{"text", "json", "html", "nhc"} {
		// --verbose and verbose=1: the passing findings carry evidence too.
		out, stderr, _ := diagnoseCLI(t, append(args, "--log.level=debug"), "--format="+format, "--verbose")
		_, page := e.get(t, "/diagnose?verbose=1&format="+format)
		for what, s := range map[string]string{"CLI " + format: out + stderr, "/diagnose " + format: page} {
			if m := secret.FindString(s); m != "" {
				t.Errorf("%s shows the secret %s", what, m)
			}
		}
		if format == "json" && !strings.Contains(page, `"check": "sm.local"`) {
			t.Errorf("sm.local missing from /diagnose on %s", host)
		}
	}
	// Diagnose's own metric and log lines (other collectors answer for
	// theirs).
	_, metrics := e.get(t, "/metrics")
	var mine []string
	for _, l := range strings.Split(metrics+"\n"+e.stderr.String(), "\n") {
		if strings.Contains(l, "rdma_diagnose") || strings.Contains(l, "component=diagnose") {
			mine = append(mine, l)
		}
	}
	if m := secret.FindString(strings.Join(mine, "\n")); m != "" {
		t.Errorf("rdma_diagnose_status or a diagnose log line shows the secret %s", m)
	}
}
