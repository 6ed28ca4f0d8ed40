// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"regexp"
	"slices"
	"strings"
)

// OneLine keeps a summary line one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Problem is one line of the report's summary: the failures or warnings of
// one check that share a fix, across every target they were found on. A
// DGX whose nine ports all have a saturated counter is one problem on nine
// ports, not nine rows.
type Problem struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Targets are the findings' targets, in report order.
	Targets []string `json:"targets"`
	// Observed, Expected and Action are set when every target has the same.
	Observed string `json:"observed,omitempty"`
	Expected string `json:"expected,omitempty"`
	// Remedy is the targets' shared remedy. Where the targets' remedies
	// differ only by the target's own name, that name is a placeholder:
	// <device> (an RDMA device of this report), <port> (a port number) or
	// <target>; each finding keeps its own, filled-in remedy.
	Remedy  string `json:"remedy,omitempty"`
	Action  string `json:"action,omitempty"`
	Unknown bool   `json:"unknown,omitempty"`
}

// ProblemGroup is a Problem with its findings, for the renderers.
type ProblemGroup struct {
	Problem
	Findings []Finding
}

// Problems groups the failures and warnings of a report into its summary
// (Report.Summary.Problems): failures first, then warnings, each in report
// order.
func Problems(findings []Finding) []Problem {
	ps := GroupProblems(findings)
	out := make([]Problem, len(ps))
	for i, p := range ps {
		out[i] = p.Problem
	}
	return out
}

// GroupProblems groups failures and warnings by check, severity and fix.
// Findings of one check whose remedies are the same once the varying part
// of the target is a placeholder share a fix; any other difference keeps
// them apart, so a grouped line never hides a different remedy.
func GroupProblems(findings []Finding) []ProblemGroup {
	devices := deviceNames(findings)
	var out []ProblemGroup
	for _, sev := range []Severity{Fail, Warn} {
		// Buckets: one check, one severity, targets of one shape.
		type bucketKey struct {
			check  string
			tokens int
		}
		var keys []bucketKey
		buckets := map[bucketKey][]Finding{}
		for _, f := range findings {
			if f.Severity != sev {
				continue
			}
			k := bucketKey{f.Check, len(targetTokens(f.Target))}
			if _, ok := buckets[k]; !ok {
				keys = append(keys, k)
			}
			buckets[k] = append(buckets[k], f)
		}
		for _, k := range keys {
			out = append(out, splitByFix(buckets[k], devices)...)
		}
	}
	// Buckets of one check with different target shapes came out next to
	// each other; restore report order (by first finding) within a severity.
	first := map[string]int{}
	for i, f := range findings {
		if _, ok := first[f.Check]; !ok {
			first[f.Check] = i
		}
	}
	slices.SortStableFunc(out, func(a, b ProblemGroup) int {
		if a.Severity != b.Severity {
			return b.Severity.rank() - a.Severity.rank()
		}
		return first[a.Check] - first[b.Check]
	})
	return out
}

// splitByFix splits the findings of one bucket into problems by their
// remedy template.
func splitByFix(fs []Finding, devices map[string]bool) []ProblemGroup {
	vary := varyingTokens(fs)
	var order []string
	groups := map[string][]Finding{}
	for _, f := range fs {
		t := fixTemplate(f, vary, devices)
		if _, ok := groups[t]; !ok {
			order = append(order, t)
		}
		groups[t] = append(groups[t], f)
	}
	out := make([]ProblemGroup, 0, len(order))
	for _, t := range order {
		out = append(out, newProblem(groups[t], devices))
	}
	return out
}

// newProblem summarises findings that share a check, a severity and a fix.
func newProblem(fs []Finding, devices map[string]bool) ProblemGroup {
	p := ProblemGroup{Findings: fs, Problem: Problem{Check: fs[0].Check, Severity: fs[0].Severity, Unknown: true}}
	for _, f := range fs {
		p.Targets = append(p.Targets, f.Target)
		p.Unknown = p.Unknown && f.Unknown
	}
	same := func(field func(Finding) string) string {
		v := field(fs[0])
		for _, f := range fs[1:] {
			if field(f) != v {
				return ""
			}
		}
		return v
	}
	p.Observed = same(func(f Finding) string { return f.Observed })
	p.Expected = same(func(f Finding) string { return f.Expected })
	p.Action = same(func(f Finding) string { return f.Action })
	p.Remedy = fs[0].Remedy
	if len(fs) > 1 {
		// Placeholders only where the targets of this problem differ.
		p.Remedy = fixTemplate(fs[0], varyingTokens(fs), devices)
	}
	return p
}

// targetTokens splits a target into the names it is made of: "mlx5_0/1"
// is mlx5_0 and 1, "/slurm mlx5_0" is slurm and mlx5_0, "irq 123" is irq
// and 123.
func targetTokens(target string) []string {
	return strings.FieldsFunc(target, func(r rune) bool { return r == '/' || r == ' ' })
}

// varyingTokens are the positions of the target tokens that differ between
// findings (all of one shape).
func varyingTokens(fs []Finding) []int {
	var vary []int
	first := targetTokens(fs[0].Target)
	for i := range first {
		for _, f := range fs[1:] {
			if targetTokens(f.Target)[i] != first[i] {
				vary = append(vary, i)
				break
			}
		}
	}
	return vary
}

var numeric = regexp.MustCompile(`^[0-9]+$`)

// fixTemplate is a finding's remedy with the varying tokens of its target
// replaced by placeholders.
func fixTemplate(f Finding, vary []int, devices map[string]bool) string {
	toks := targetTokens(f.Target)
	s := f.Remedy
	for _, i := range vary {
		s = ReplaceWord(s, toks[i], placeholder(toks, i, devices))
	}
	return s
}

// placeholder names a target token for a reader: the device, the port
// number of a device/port target, or the target.
func placeholder(toks []string, i int, devices map[string]bool) string {
	switch {
	case devices[toks[i]]:
		return "<device>"
	case len(toks) == 2 && i == 1 && devices[toks[0]] && numeric.MatchString(toks[i]):
		return "<port>"
	}
	return "<target>"
}

// TargetNoun is the plural for a problem's targets: ports when all are
// device/port targets, else targets.
func TargetNoun(targets []string) string {
	for _, t := range targets {
		if dev, port, ok := strings.Cut(t, "/"); !ok || dev == "" || !numeric.MatchString(port) {
			return "targets"
		}
	}
	return "ports"
}

// deviceNames are the RDMA devices a report names: the device of every
// device/port target.
func deviceNames(findings []Finding) map[string]bool {
	out := map[string]bool{}
	for _, f := range findings {
		if dev, port, ok := strings.Cut(f.Target, "/"); ok && dev != "" && numeric.MatchString(port) {
			out[dev] = true
		}
	}
	return out
}

// ReplaceWord replaces the whole-word occurrences of word in s. Names
// (mlx5_0, net.core.rmem_max, 0000:3b:00.1) are made of letters, digits
// and _.:-, so "1" is not replaced inside "00.1" nor mlx5_1 inside
// mlx5_10; a trailing full stop ends a sentence, not the name. A wrong
// guess here cannot merge findings with different fixes: those templates
// still differ.
func ReplaceWord(s, word, repl string) string {
	if word == "" {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, word)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(word)
		if (i == 0 || !nameByte(s[i-1])) && (end == len(s) || !nameByte(s[end]) || sentenceEnd(s, end)) {
			b.WriteString(s[:i])
			b.WriteString(repl)
		} else {
			b.WriteString(s[:end])
		}
		s = s[end:]
	}
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-'
}

// sentenceEnd reports a full stop or colon at i that ends a sentence or
// clause (followed by a space or the end).
func sentenceEnd(s string, i int) bool {
	return (s[i] == '.' || s[i] == ':') && (i+1 == len(s) || s[i+1] == ' ')
}
