// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
)

// Formats are the output formats, the first is the default.
var Formats = []string{"text", "json", "html", "nhc"}

// ContentType is the HTTP media type of a format.
func ContentType(format string) string {
	switch format {
	case "json":
		return "application/json; charset=utf-8"
	case "html":
		return "text/html; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}

// View is how the text and HTML formats show a report to a person; JSON
// and NHC ignore it.
type View struct {
	// Verbose lists every pass and skip in the text format (the HTML page
	// always has them, collapsed).
	Verbose bool
	// Color marks severities with ANSI colours in the text format: for a
	// terminal only (the CLI decides: a TTY, NO_COLOR unset).
	Color bool
	// VerboseHint tells a reader of the text format how to see the passes
	// and skips it leaves out: "--verbose" (CLI), "?verbose=1" (HTTP).
	VerboseHint string
}

// Render writes a report in a format.
func Render(w io.Writer, r *diagnose.Report, format string, v View) error {
	switch format {
	case "text":
		return Text(w, r, v)
	case "json":
		return JSON(w, r)
	case "html":
		return HTML(w, r)
	case "nhc":
		_, err := io.WriteString(w, NHC(r)+"\n")
		return err
	}
	return fmt.Errorf("unknown format %q: want one of %s", format, strings.Join(Formats, ", "))
}

// JSON writes the report as indented JSON (docs/diagnose-schema.md).
func JSON(w io.Writer, r *diagnose.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// title is the report's title: the tool, the verdict and the host.
func title(r *diagnose.Report) string {
	s := "rdma_doctor diagnose: " + strings.ToUpper(string(r.Status))
	if r.Host != "" {
		s += " on " + r.Host
	}
	return s
}

// counts is what the report rests on: the counts per severity, the
// samples and their window, the time.
func counts(r *diagnose.Report) string {
	s := fmt.Sprintf("%d fail, %d warn, %d pass, %d skip", r.Summary.Fail, r.Summary.Warn, r.Summary.Pass, r.Summary.Skip)
	s += fmt.Sprintf("; %d sample(s)", r.Samples)
	if r.Samples > 1 {
		s += " over " + diagnose.Span(time.Duration(r.WindowSeconds*float64(time.Second)))
	}
	if !r.Time.IsZero() {
		s += "; " + r.Time.UTC().Format(time.RFC3339)
	}
	return s
}

// summaryLine is the first line of the text output: status and counts.
// Scripts match its start ("rdma_doctor diagnose: FAIL: "), so it keeps
// that shape.
func summaryLine(r *diagnose.Report) string {
	s := fmt.Sprintf("rdma_doctor diagnose: %s: %d fail, %d warn, %d pass, %d skip",
		strings.ToUpper(string(r.Status)), r.Summary.Fail, r.Summary.Warn, r.Summary.Pass, r.Summary.Skip)
	if r.Host != "" {
		s += "; host " + r.Host
	}
	_, rest, _ := strings.Cut(counts(r), "; ")
	return s + "; " + rest
}

// listMax is how many targets or observations a summary line names before
// it elides: enough for a dual-port card, short enough for one line. The
// details below name every one.
const listMax = 4

// elide joins items, keeping the first listMax-1 and the last when there
// are more than listMax: "mlx5_0/1, mlx5_1/1, mlx5_4/1, …, mlx5_bond_0/1".
func elide(items []string) string {
	if len(items) > listMax {
		items = append(slices.Clone(items[:listMax-1]), "…", items[len(items)-1])
	}
	return strings.Join(items, ", ")
}

// where says which targets a problem is on: the target itself, or "on 9
// ports (mlx5_0/1, …)".
func where(p diagnose.ProblemGroup) string {
	if len(p.Targets) == 1 {
		return p.Targets[0]
	}
	return fmt.Sprintf("on %d %s (%s)", len(p.Targets), diagnose.TargetNoun(p.Targets), elide(p.Targets))
}

// what says what is wrong: the shared observation (and expectation), or
// each target's.
func what(p diagnose.ProblemGroup) string {
	s := p.Observed
	if s == "" && len(p.Findings) > 1 {
		obs := make([]string, 0, len(p.Findings))
		for _, f := range p.Findings {
			if f.Observed != "" {
				obs = append(obs, f.Target+" "+f.Observed)
			}
		}
		s = elide(obs)
	}
	if p.Expected != "" && !p.Unknown {
		if s != "" {
			s += ", "
		}
		s += "expected " + p.Expected
	}
	return diagnose.OneLine(s)
}

// fix is what to do: the remedy, and the remediate action that applies it.
func fix(p diagnose.ProblemGroup) string {
	s := diagnose.OneLine(p.Remedy)
	if p.Action != "" {
		if s != "" {
			s += "; or "
		}
		s += "rdma_doctor remediate --only " + p.Action
	}
	return s
}

// problemLine is one line of the text summary.
func problemLine(p diagnose.ProblemGroup, paint func(diagnose.Severity, string) string) string {
	s := paint(p.Severity, strings.ToUpper(string(p.Severity))) + " " + p.Check + " " + where(p)
	if w := what(p); w != "" {
		s += ": " + w
	}
	if f := fix(p); f != "" {
		s += " — fix: " + f
	}
	return s
}

// ANSI SGR colours of the severities (bold red, yellow, green, dim).
var sgr = map[diagnose.Severity]string{diagnose.Fail: "1;31", diagnose.Warn: "33", diagnose.Pass: "32", diagnose.Skip: "2"}

// verdictLine is the last line of the text output: the status and the
// problem count again, so that the end of a long report on a terminal
// says how the host stands (the details scroll the summary away). It
// does not start like summaryLine, so scripts matching that still match
// one line.
func verdictLine(r *diagnose.Report, problems int) string {
	s := fmt.Sprintf("Verdict: %s: %d problem(s) (%d fail, %d warn)", strings.ToUpper(string(r.Status)), problems, r.Summary.Fail, r.Summary.Warn)
	if r.Host != "" {
		s += "; host " + r.Host
	}
	return s
}

// Text writes the report for a terminal or curl: the summary line; the
// problems, one line each, worst first, with the fix; the details of each
// failure and warning; then the passes and skips one line each with
// v.Verbose, else how many were left out; last the verdict and the
// problem count (verdictLine).
func Text(w io.Writer, r *diagnose.Report, v View) error {
	r = printable(r)
	paint := func(_ diagnose.Severity, s string) string { return s }
	if v.Color {
		paint = func(sev diagnose.Severity, s string) string { return "\x1b[" + sgr[sev] + "m" + s + "\x1b[0m" }
	}
	var b strings.Builder
	b.WriteString(paint(r.Status, summaryLine(r)) + "\n")
	writeFaults(&b, r.Faults, paint)
	ps := diagnose.GroupProblems(r.Findings)
	if len(ps) == 0 {
		b.WriteString("\nNo problems: no check failed or warned.\n")
	} else {
		fmt.Fprintf(&b, "\nProblems (%d), worst first:\n", len(ps))
		for _, p := range ps {
			b.WriteString(problemLine(p, paint) + "\n")
		}
		b.WriteString("\nDetails:\n")
	}
	for _, p := range ps {
		for _, f := range p.Findings {
			fmt.Fprintf(&b, "\n%s %s %s", paint(f.Severity, fmt.Sprintf("%-4s", strings.ToUpper(string(f.Severity)))), f.Check, f.Target)
			if f.Unknown {
				b.WriteString(" (unknown)")
			}
			b.WriteString("\n")
			for _, kv := range [][2]string{{"observed", f.Observed}, {"expected", f.Expected}, {"evidence", f.Evidence}, {"remedy", f.Remedy}, {"action", f.Action}} {
				if kv[1] != "" {
					fmt.Fprintf(&b, "     %-9s %s\n", kv[0]+":", kv[1])
				}
			}
		}
	}
	if !v.Verbose {
		if n := r.Summary.Pass + r.Summary.Skip; n > 0 {
			hint := ""
			if v.VerboseHint != "" {
				hint = "; add " + v.VerboseHint + " to list them"
			}
			fmt.Fprintf(&b, "\n%d pass and %d skip not shown%s.\n", r.Summary.Pass, r.Summary.Skip, hint)
		}
		b.WriteString("\n" + paint(r.Status, verdictLine(r, len(ps))) + "\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	for _, sev := range []diagnose.Severity{diagnose.Pass, diagnose.Skip} {
		first := true
		for _, f := range r.Findings {
			if f.Severity != sev {
				continue
			}
			if first {
				b.WriteString("\n")
				first = false
			}
			detail := f.Observed
			if sev == diagnose.Skip {
				detail = f.Evidence
			}
			fmt.Fprintf(&b, "%s %s %s: %s\n", paint(sev, fmt.Sprintf("%-4s", strings.ToUpper(string(sev)))), f.Check, f.Target, detail)
		}
	}
	b.WriteString("\n" + paint(r.Status, verdictLine(r, len(ps))) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFaults writes the text format's faults: one block per fault, the
// class and where on its first line, then each end and what it saw, the
// action, the runbook section and the findings it groups.
func writeFaults(b *strings.Builder, faults []diagnose.Fault, paint func(diagnose.Severity, string) string) {
	if len(faults) == 0 {
		return
	}
	fmt.Fprintf(b, "\nFaults (%d), one per physical link and class:\n", len(faults))
	for _, f := range faults {
		fmt.Fprintf(b, "%s %s: %s\n", paint(f.Severity, strings.ToUpper(string(f.Severity))), f.Class, f.Summary)
		for i := range f.Ends {
			fmt.Fprintf(b, "     %s: %s\n", endShort(&f.Ends[i]), endSeen(&f.Ends[i]))
		}
		refs := make([]string, 0, len(f.Findings))
		for _, r := range f.Findings {
			refs = append(refs, r.Check+" "+r.Target)
		}
		for _, kv := range [][2]string{{"action", f.Action}, {"runbook", f.Runbook}, {"findings", strings.Join(refs, ", ")}} {
			fmt.Fprintf(b, "     %-9s %s\n", kv[0]+":", kv[1])
		}
	}
}

// endShort names an end in a fault's block: its role and name, the
// first line having its GUID and LID.
func endShort(e *diagnose.FaultEnd) string {
	s := e.Role + " "
	switch {
	case e.Node != "":
		s += strconv.Quote(e.Node)
	case e.Device != "":
		s += e.Device
	default:
		s += e.GUID
	}
	if e.Port != 0 {
		s += fmt.Sprintf(" port %d", e.Port)
	}
	return s + diagnose.EndHost(e)
}

// endSeen says what an end saw, or that it is clean, or not read.
func endSeen(e *diagnose.FaultEnd) string {
	switch e.Status {
	case diagnose.EndSeen:
		if len(e.Seen) == 0 {
			return "seen"
		}
		return strings.Join(e.Seen, "; ")
	case diagnose.EndClean:
		return "clean (read and judged)"
	}
	return "not read by this report (unknown)"
}

// nhcMax bounds the NHC line: Slurm keeps the drain reason in its state
// files and prints it in sinfo -R, so it should stay short.
const nhcMax = 200

// NHC returns one line a Slurm drain reason can carry: the first failure
// (or, without failures, the first warning) and how many more there are.
// No newlines and no double quotes (NHC passes it as Reason="...").
func NHC(r *diagnose.Report) string {
	r = printable(r)
	var first *diagnose.Finding
	n := 0
	sev := r.Status
	if sev != diagnose.Fail && sev != diagnose.Warn {
		return fmt.Sprintf("rdma_doctor: OK (%d pass, %d skip)", r.Summary.Pass, r.Summary.Skip)
	}
	for i := range r.Findings {
		if r.Findings[i].Severity == sev {
			if first == nil {
				first = &r.Findings[i]
			}
			n++
		}
	}
	s := fmt.Sprintf("rdma_doctor: %s %s %s", strings.ToUpper(string(sev)), first.Check, first.Target)
	if first.Observed != "" {
		s += " " + first.Observed
	}
	if first.Expected != "" {
		s += ", expected " + first.Expected
	}
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" (+%d more)", n-1)
	}
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '\t':
			return ' '
		case '"':
			return '\''
		}
		return r
	}, s)
	if len(s)+len(more) > nhcMax {
		cut := nhcMax - len(more) - 3
		for cut > 0 && (s[cut]&0xC0) == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "..."
	}
	return s + more
}

//go:embed report.html.tmpl
var htmlSource string

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"upper":    func(s diagnose.Severity) string { return strings.ToUpper(string(s)) },
	"heading":  title,
	"meta":     func(r *diagnose.Report) string { _, rest, _ := strings.Cut(counts(r), "; "); return rest },
	"problems": func(r *diagnose.Report) []diagnose.ProblemGroup { return diagnose.GroupProblems(r.Findings) },
	"where":    where,
	"endName":  func(e diagnose.FaultEnd) string { return diagnose.EndName(&e) },
	"endSeen":  func(e diagnose.FaultEnd) string { return endSeen(&e) },
	"what":     what,
	"bySeverity": func(r *diagnose.Report, sev string) []diagnose.Finding {
		var out []diagnose.Finding
		for _, f := range r.Findings {
			if string(f.Severity) == sev {
				out = append(out, f)
			}
		}
		return out
	},
	"list": func(s ...string) []string { return s },
	"checkTitle": func(r *diagnose.Report, id string) string {
		for _, c := range r.Checks {
			if c.ID == id {
				return c.Title
			}
		}
		return ""
	},
}).Parse(htmlSource))

// HTML writes a self-contained page: inline CSS, no scripts, no external
// assets, readable offline. The problems come first, each with its fix and
// its findings behind a <details>; passes and skips are collapsed at the
// end. Everything wraps, so the page is never wider than the window.
func HTML(w io.Writer, r *diagnose.Report) error { return htmlTmpl.Execute(w, printable(r)) }
