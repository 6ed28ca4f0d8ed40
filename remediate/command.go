// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose/report"
)

// Exit codes of `rdma_doctor remediate`.
const (
	ExitOK     = 0
	ExitFailed = 1 // apply or rollback stopped on an error
	ExitUsage  = 2 // refused: bad flag, unknown action, no confirmation, not root
	ExitBusy   = 3 // refused: another apply or rollback holds the journal's lock
)

// Command is `rdma_doctor remediate` once its flags are parsed. main
// declares the flags, builds the writer below the host's roots and reads
// the host; Run plans, applies or rolls back and says what it did.
type Command struct {
	// Mode is plan, apply or rollback.
	Mode string
	// Only are the --only values: action ids, each one or several
	// comma-separated; none means every action.
	Only []string
	// Format is the plan's: text or json.
	Format string
	// Yes applies without asking.
	Yes bool
	// Force lets rollback restore what a damaged journal still holds.
	Force bool
	// Root is whether the process runs as root (effective uid 0): apply
	// and rollback on the real host need it.
	Root bool
	// Stdin is where apply asks for a confirmation without Yes, when
	// StdinTerminal says it is a terminal (otherwise it refuses).
	Stdin         io.Reader
	StdinTerminal bool
	Stdout        io.Writer
	// Stderr gets what rollback --force drops.
	Stderr io.Writer
}

// Run runs the mode with w, which writes below the host's roots; input
// reads the host (plan and apply). It returns the exit code: 0 done, 1
// apply or rollback stopped on an error, 2 refused (a bad action id, no
// confirmation, not root), 3 another apply or rollback holds the lock;
// and the error to print, if any.
func (c *Command) Run(w DirWriter, input func() *Input) (int, error) {
	actions, err := Select(report.SplitList(c.Only))
	if err != nil {
		return ExitUsage, fmt.Errorf("remediate: %w", err)
	}
	if c.Mode != "plan" && onRealHost(w.Roots) && !c.Root {
		return ExitUsage, fmt.Errorf("remediate %s: changes the real host (--path.rootfs=/) and needs root", c.Mode)
	}
	if c.Mode == "rollback" {
		return c.rollback(w)
	}
	plan := MakePlan(input(), actions)
	if c.Mode == "plan" {
		if err := RenderPlan(c.Stdout, plan, c.Format); err != nil {
			return ExitFailed, fmt.Errorf("remediate: %w", err)
		}
		return ExitOK, nil
	}
	return c.apply(w, plan)
}

// ActionIDs are the ids of every action, in plan order (--only).
func ActionIDs() []string {
	var ids []string
	for _, a := range Actions() {
		ids = append(ids, a.ID())
	}
	return ids
}

// onRealHost reports whether any root is the real host's (/, /sys or
// /proc), where apply and rollback change the running system.
func onRealHost(r Roots) bool {
	for _, p := range []string{r.Root, r.Sys, r.Proc} {
		if abs, err := filepath.Abs(p); err == nil && (abs == "/" || abs == "/sys" || abs == "/proc") {
			return true
		}
	}
	return false
}

// apply prints the plan, asks (without Yes) and applies its changes.
func (c *Command) apply(w Writer, plan *Plan) (int, error) {
	changes := plan.Changes()
	_ = RenderPlan(c.Stdout, plan, "text")
	if len(changes) == 0 {
		fmt.Fprintln(c.Stdout, "nothing to apply")
		return ExitOK, nil
	}
	if !c.Yes {
		if !c.StdinTerminal {
			return ExitUsage, fmt.Errorf("remediate apply: %d change(s) planned; pass --yes to apply them (stdin is not a terminal to ask)", len(changes))
		}
		fmt.Fprintf(c.Stdout, "Apply %d change(s)? [y/N] ", len(changes))
		line, _ := bufio.NewReader(c.Stdin).ReadString('\n')
		if answer := strings.ToLower(strings.TrimSpace(line)); answer != "y" && answer != "yes" {
			fmt.Fprintln(c.Stdout, "not applied")
			return ExitUsage, nil
		}
	}
	res, err := Apply(w, changes)
	if errors.Is(err, ErrLocked) {
		return ExitBusy, fmt.Errorf("remediate apply: %w", err)
	}
	for _, ch := range res.Applied {
		fmt.Fprintf(c.Stdout, "applied     %-14s %s\n", ch.Action, ch.Target)
	}
	if err != nil {
		for _, ch := range res.NotApplied {
			fmt.Fprintf(c.Stdout, "NOT applied %-14s %s\n", ch.Action, ch.Target)
		}
		if res.Untouched {
			// Refused before any change (a damaged journal, which plain
			// rollback refuses too): the error says what to do instead.
			return ExitFailed, fmt.Errorf("remediate apply stopped: %w", err)
		}
		return ExitFailed, fmt.Errorf("remediate apply stopped: %w; `rdma_doctor remediate rollback` undoes what was applied", err)
	}
	fmt.Fprintf(c.Stdout, "%d change(s) applied; undo with `rdma_doctor remediate rollback`\n", len(res.Applied))
	return ExitOK, nil
}

// rollback restores what the journal holds and says what it did.
func (c *Command) rollback(w Writer) (int, error) {
	restored, err := RollbackWith(w, RollbackOptions{Force: c.Force, Log: c.Stderr})
	if errors.Is(err, ErrLocked) {
		return ExitBusy, fmt.Errorf("remediate rollback: %w", err)
	}
	if errors.Is(err, ErrNoJournal) {
		// Idempotent: a second rollback has nothing left to undo.
		fmt.Fprintf(c.Stdout, "nothing to roll back: %v\n", err)
		return ExitOK, nil
	}
	for _, e := range restored {
		verb, what := "restored", string(e.Area)+":"+e.Path
		switch {
		case e.Gone:
			verb = "gone    " // the attribute went, and its setting with it
		case e.Kind == "dir" || !e.Existed:
			verb = "removed "
		}
		if e.Key != "" {
			what += " (" + e.Key + ")"
		}
		fmt.Fprintf(c.Stdout, "%s %-14s %s\n", verb, e.Action, what)
	}
	if err != nil {
		return ExitFailed, fmt.Errorf("remediate rollback: %w", err)
	}
	gone := 0
	for _, e := range restored {
		if e.Gone {
			gone++
		}
	}
	if gone > 0 {
		fmt.Fprintf(c.Stdout, "%d path(s) restored, %d gone since the apply (nothing to restore); journal removed\n", len(restored)-gone, gone)
		return ExitOK, nil
	}
	fmt.Fprintf(c.Stdout, "%d path(s) restored; journal removed\n", len(restored))
	return ExitOK, nil
}

// RenderPlan prints the plan as JSON, or as text: per action the changes
// (target, current -> desired, where), its notes and errors, then the
// manual steps remediate never does.
func RenderPlan(w io.Writer, p *Plan, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	for _, ap := range p.Actions {
		if len(ap.Checks) == 0 {
			fmt.Fprintf(w, "%s (answers no check: the config asks for it)\n", ap.Action)
		} else {
			fmt.Fprintf(w, "%s (answers %s)\n", ap.Action, strings.Join(ap.Checks, ", "))
		}
		if ap.Error != "" {
			fmt.Fprintf(w, "  ERROR: cannot plan: %s\n", ap.Error)
		}
		for _, c := range ap.Changes {
			cur := strings.TrimSpace(c.Current)
			if !c.Exists {
				cur = "(absent)"
			} else if strings.Contains(cur, "\n") {
				cur = fmt.Sprintf("(%d lines)", strings.Count(c.Current, "\n"))
			}
			des := strings.TrimSpace(c.Desired)
			if c.Key != "" { // a record: the target names the key already
				cur, des = strings.TrimPrefix(cur, c.Key+" "), strings.TrimPrefix(des, c.Key+" ")
			}
			if strings.Contains(des, "\n") {
				des = fmt.Sprintf("(%d lines)", strings.Count(c.Desired, "\n"))
			}
			fmt.Fprintf(w, "  %-28s %s -> %s   [%s:%s]\n", c.Target, cur, des, c.Area, c.Path)
		}
		for _, n := range ap.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	fmt.Fprintln(w, "never done by remediate (manual steps):")
	for _, m := range p.Manual {
		fmt.Fprintf(w, "  %-15s %s (%s)\n", m.Topic, m.Step, m.Reason)
	}
	return nil
}
