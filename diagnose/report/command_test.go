// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks"
)

func TestUseColor(t *testing.T) {
	for _, tc := range []struct {
		tty      bool
		noColor  string
		term     string
		wantColr bool
	}{
		{true, "", "xterm-256color", true},
		{true, "", "", true},
		{false, "", "xterm", false},
		{true, "1", "xterm", false},
		{true, "0", "xterm", false}, // any value disables (no-color.org)
		{true, "", "dumb", false},
	} {
		env := map[string]string{"NO_COLOR": tc.noColor, "TERM": tc.term}
		if got := UseColor(tc.tty, func(k string) string { return env[k] }); got != tc.wantColr {
			t.Errorf("UseColor(tty=%v, NO_COLOR=%q, TERM=%q) = %v", tc.tty, tc.noColor, tc.term, got)
		}
	}
}

func TestSplitList(t *testing.T) {
	got := SplitList([]string{"port.rate", " ctr.*, ,irq.affinity ", "", "a,,b"})
	want := []string{"port.rate", "ctr.*", "irq.affinity", "a", "b"}
	if !slices.Equal(got, want) {
		t.Errorf("SplitList = %q, want %q", got, want)
	}
	if got := SplitList(nil); got != nil {
		t.Errorf("SplitList(nil) = %q, want nil (every check)", got)
	}
}

// The exit code is the report's worst severity, whatever the format, and
// 3 whenever the command could not do its job, the report printed or not.
func TestCommandExitCodes(t *testing.T) {
	// A report as the evaluator makes it: its status is its worst finding's.
	report := func(s diagnose.Severity) *diagnose.Report {
		return &diagnose.Report{Version: diagnose.SchemaVersion, Host: "h", Status: s,
			Findings: []diagnose.Finding{{Check: "port.state", Target: "mlx5_0/1", Severity: s, Observed: "DOWN", Expected: "ACTIVE"}}}
	}
	errRead := errors.New("cannot read /sys/class/infiniband: permission denied")
	for _, tc := range []struct {
		name     string
		cmd      Command
		out      Outcome
		evalErr  error
		want     int
		wantErr  string // substring of the error; "" none
		printed  bool   // something on stdout
		evalCall bool
	}{
		{name: "pass", cmd: Command{Format: "text"}, out: Outcome{Report: report(diagnose.Pass)}, want: ExitPass, printed: true, evalCall: true},
		{name: "all skipped", cmd: Command{Format: "json"}, out: Outcome{Report: report(diagnose.Skip)}, want: ExitPass, printed: true, evalCall: true},
		{name: "warn", cmd: Command{Format: "nhc"}, out: Outcome{Report: report(diagnose.Warn)}, want: ExitWarn, printed: true, evalCall: true},
		{name: "fail", cmd: Command{Format: "html"}, out: Outcome{Report: report(diagnose.Fail)}, want: ExitFail, printed: true, evalCall: true},
		{name: "bad format", cmd: Command{Format: "yaml"}, want: ExitCannotRun, wantErr: `--format="yaml": want one of text, json, html, nhc`},
		{name: "evaluation error", cmd: Command{Format: "text"}, evalErr: errors.New(`check "nope": no such check`),
			want: ExitCannotRun, wantErr: `diagnose: check "nope": no such check`, evalCall: true},
		{name: "host unreadable", cmd: Command{Format: "text"}, out: Outcome{Report: report(diagnose.Fail), ReadErr: errRead},
			want: ExitCannotRun, wantErr: "diagnose: cannot read /sys/class/infiniband", printed: true, evalCall: true},
		{name: "list", cmd: Command{Format: "yaml", List: true, Checks: testChecks()}, want: ExitPass, printed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			called := false
			code, err := tc.cmd.Run(context.Background(), &out, func(context.Context, []string) (Outcome, error) {
				called = true
				return tc.out, tc.evalErr
			})
			if code != tc.want {
				t.Errorf("exit code %d, want %d", code, tc.want)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if called != tc.evalCall {
				t.Errorf("host read and evaluated: %v, want %v", called, tc.evalCall)
			}
			if printed := out.Len() > 0; printed != tc.printed {
				t.Errorf("printed %v, want %v:\n%s", printed, tc.printed, out.String())
			}
		})
	}
}

// The --check values reach the evaluation split, and the format chooses
// the renderer.
func TestCommandOutputSelection(t *testing.T) {
	r := &diagnose.Report{Version: diagnose.SchemaVersion, Host: "node7", Status: diagnose.Pass, Findings: []diagnose.Finding{}}
	for _, format := range Formats {
		var got, want bytes.Buffer
		var patterns []string
		c := &Command{Format: format, Only: []string{"port.*,ctr.errors", "sm.master"}}
		if _, err := c.Run(context.Background(), &got, func(_ context.Context, p []string) (Outcome, error) {
			patterns = p
			return Outcome{Report: r}, nil
		}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if !slices.Equal(patterns, []string{"port.*", "ctr.errors", "sm.master"}) {
			t.Errorf("%s: patterns %q", format, patterns)
		}
		if err := Render(&want, r, format, View{}); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: printed\n%s\nwant Render's\n%s", format, got.String(), want.String())
		}
	}
}

func TestWriteCheckList(t *testing.T) {
	var out bytes.Buffer
	WriteCheckList(&out, testChecks())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	checks := checks.All()
	if len(lines) != len(checks) {
		t.Fatalf("%d lines for %d checks", len(lines), len(checks))
	}
	for i, c := range checks {
		if want := fmt.Sprintf("%-16s %s", c.ID, c.Title); !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d %q, want it to start with %q", i, lines[i], want)
		}
		if pending := strings.Contains(lines[i], "(pending: "); pending != (c.Run == nil) {
			t.Errorf("line %q: pending shown %v, check runs %v", lines[i], pending, c.Run != nil)
		}
	}
}
