// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
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

// Render writes a report in a format.
func Render(w io.Writer, r *Report, format string) error {
	switch format {
	case "text":
		return Text(w, r)
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
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// summaryLine is the first line of the text output: status and counts.
func summaryLine(r *Report) string {
	s := fmt.Sprintf("rdma_doctor diagnose: %s: %d fail, %d warn, %d pass, %d skip",
		strings.ToUpper(string(r.Status)), r.Summary.Fail, r.Summary.Warn, r.Summary.Pass, r.Summary.Skip)
	if r.Host != "" {
		s += "; host " + r.Host
	}
	s += fmt.Sprintf("; %d sample(s)", r.Samples)
	if r.Samples > 1 {
		s += " over " + span(time.Duration(r.WindowSeconds*float64(time.Second)))
	}
	if !r.Time.IsZero() {
		s += "; " + r.Time.UTC().Format(time.RFC3339)
	}
	return s
}

// Text writes the report for a terminal or curl: the summary line, then
// failures and warnings with every field, then passes and skips one line
// each.
func Text(w io.Writer, r *Report) error {
	var b strings.Builder
	b.WriteString(summaryLine(r) + "\n")
	for _, sev := range []Severity{Fail, Warn} {
		for _, f := range r.Findings {
			if f.Severity != sev {
				continue
			}
			fmt.Fprintf(&b, "\n%-4s %s %s", strings.ToUpper(string(sev)), f.Check, f.Target)
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
	for _, sev := range []Severity{Pass, Skip} {
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
			if sev == Skip {
				detail = f.Evidence
			}
			fmt.Fprintf(&b, "%-4s %s %s: %s\n", strings.ToUpper(string(sev)), f.Check, f.Target, detail)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// nhcMax bounds the NHC line: Slurm keeps the drain reason in its state
// files and prints it in sinfo -R, so it should stay short.
const nhcMax = 200

// NHC returns one line a Slurm drain reason can carry: the first failure
// (or, without failures, the first warning) and how many more there are.
// No newlines and no double quotes (NHC passes it as Reason="...").
func NHC(r *Report) string {
	var first *Finding
	n := 0
	sev := r.Status
	if sev != Fail && sev != Warn {
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
	"upper":   func(s Severity) string { return strings.ToUpper(string(s)) },
	"summary": summaryLine,
	"bySeverity": func(r *Report, sev string) []Finding {
		var out []Finding
		for _, f := range r.Findings {
			if string(f.Severity) == sev {
				out = append(out, f)
			}
		}
		return out
	},
	"list": func(s ...string) []string { return s },
	"title": func(r *Report, id string) string {
		for _, c := range r.Checks {
			if c.ID == id {
				return c.Title
			}
		}
		return ""
	},
}).Parse(htmlSource))

// HTML writes a self-contained page: inline CSS, no scripts, no external
// assets, readable offline.
func HTML(w io.Writer, r *Report) error { return htmlTmpl.Execute(w, r) }
