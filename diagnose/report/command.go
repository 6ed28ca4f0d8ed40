// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
)

// Exit codes of `rdma_doctor diagnose` (Nagios/NHC style, worst wins).
const (
	ExitPass      = 0
	ExitWarn      = 1
	ExitFail      = 2
	ExitCannotRun = 3
)

// Command is `rdma_doctor diagnose` once its flags are parsed: what to
// print and how. main declares the flags and reads the host; Run decides
// the output and the exit code.
type Command struct {
	// Format is one of Formats (--format).
	Format string
	// Only are the --check values, each an id or glob, or several
	// comma-separated.
	Only []string
	// List prints every check id with its title instead of a report.
	List bool
	// Checks is the catalogue List prints (checks.All).
	Checks []*diagnose.Check
	// View is how the text format looks (--verbose, colour).
	View View
}

// Outcome is what reading the host and evaluating the checks gave.
type Outcome struct {
	Report *diagnose.Report
	// ReadErr is set when the host could not be read at all (not "no RDMA
	// here", which is a finding): the report is printed, the exit code is 3.
	ReadErr error
}

// Run prints the check list, or the report of evaluate (called with the
// --check patterns) in c.Format, and returns the exit code: 0 pass, 1
// warn, 2 fail, 3 could not run. A non-nil error is for the operator (one
// line on stderr) and comes with exit code 3.
func (c *Command) Run(ctx context.Context, stdout io.Writer, evaluate func(ctx context.Context, patterns []string) (Outcome, error)) (int, error) {
	if c.List {
		WriteCheckList(stdout, c.Checks)
		return ExitPass, nil
	}
	if !slices.Contains(Formats, c.Format) {
		return ExitCannotRun, fmt.Errorf("--format=%q: want one of %s", c.Format, strings.Join(Formats, ", "))
	}
	r, err := evaluate(ctx, SplitList(c.Only))
	if err != nil {
		return ExitCannotRun, fmt.Errorf("diagnose: %w", err)
	}
	if err := Render(stdout, r.Report, c.Format, c.View); err != nil {
		return ExitCannotRun, fmt.Errorf("diagnose: %w", err)
	}
	if r.ReadErr != nil {
		return ExitCannotRun, fmt.Errorf("diagnose: %w", r.ReadErr)
	}
	return ExitCode(r.Report.Status), nil
}

// ExitCode is the exit code of a report's status: fail 2, warn 1, pass
// (and all skipped) 0.
func ExitCode(s diagnose.Severity) int {
	switch s {
	case diagnose.Fail:
		return ExitFail
	case diagnose.Warn:
		return ExitWarn
	}
	return ExitPass
}

// WriteCheckList prints every check of all: its id with its title, and why a check
// that does not run yet is pending (--list-checks).
func WriteCheckList(w io.Writer, all []*diagnose.Check) {
	for _, c := range all {
		state := ""
		if c.Run == nil {
			state = " (pending: " + c.Pending + ")"
		}
		fmt.Fprintf(w, "%-16s %s%s\n", c.ID, c.Title, state)
	}
}

// SplitList splits repeatable, comma-separated flag values (--check,
// remediate's --only) into their items, blanks dropped.
func SplitList(values []string) []string {
	var out []string
	for _, o := range values {
		for _, p := range strings.Split(o, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// UseColor decides whether the text report gets ANSI colours: only on a
// terminal, and never with NO_COLOR set to anything (no-color.org) or
// TERM=dumb. A pipe, a file or NHC never sees escape codes.
func UseColor(tty bool, getenv func(string) string) bool {
	return tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}
