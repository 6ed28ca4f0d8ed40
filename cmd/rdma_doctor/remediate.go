// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/remediate"
)

// Exit codes of `rdma_doctor remediate`.
const (
	remediateOK     = 0
	remediateFailed = 1 // apply or rollback stopped on an error
	remediateUsage  = 2 // refused: bad flag, unknown action, no confirmation, not root
	remediateBusy   = 3 // refused: another apply or rollback holds the journal's lock
)

func setupRemediate(cmd *kingpin.CmdClause) func(context.Context, *App) int {
	mode := cmd.Arg("mode", "plan (default), apply or rollback.").Default("plan").Enum("plan", "apply", "rollback")
	only := cmd.Flag("only", "Only these action ids (comma-separated or repeated): "+strings.Join(actionIDs(), ", ")+".").PlaceHolder("ID").Strings()
	format := cmd.Flag("format", "Plan output format: text or json.").Default("text").Enum("text", "json")
	yes := cmd.Flag("yes", "Apply without asking.").Bool()
	force := cmd.Flag("force", "rollback: restore the entries that can be read whole from a damaged journal (empty, cut short, data after its end, no entries), then remove it.").Bool()
	return func(ctx context.Context, a *App) int {
		var ids []string
		for _, o := range *only {
			for _, p := range strings.Split(o, ",") {
				if p = strings.TrimSpace(p); p != "" {
					ids = append(ids, p)
				}
			}
		}
		actions, err := remediate.Select(ids)
		if err != nil {
			errorf(os.Stderr, "remediate: %v", err)
			return remediateUsage
		}
		w := remediate.DirWriter{Roots: remediate.Roots{Root: a.Paths.Rootfs, Sys: a.Paths.Sysfs, Proc: a.Paths.Procfs}}
		var counters remediate.Counters
		if k := a.Host.Options().Kernel; k != nil {
			// Only where the tree is the running kernel's /sys: the
			// optional counters live in the kernel, not in files.
			counters = remediate.KernelCounters{Conn: k}
			w.Counters = counters
		}
		if *mode != "plan" && onRealHost(a) && os.Geteuid() != 0 {
			errorf(os.Stderr, "remediate %s: changes the real host (--path.rootfs=/) and needs root", *mode)
			return remediateUsage
		}
		if *mode == "rollback" {
			return runRollback(w, *force)
		}
		reader := &diagnose.Reader{Host: a.Host, ExpectedDevices: a.Config.Diagnose.ExpectedDevices}
		in := &remediate.Input{Snap: reader.Read(ctx), Config: a.Config, W: w, Counters: counters}
		plan := remediate.MakePlan(in, actions)
		if *mode == "plan" {
			if err := renderPlan(os.Stdout, plan, *format); err != nil {
				errorf(os.Stderr, "remediate: %v", err)
				return remediateFailed
			}
			return remediateOK
		}
		return runApply(w, plan, *yes)
	}
}

func actionIDs() []string {
	var ids []string
	for _, a := range remediate.Actions() {
		ids = append(ids, a.ID())
	}
	return ids
}

func onRealHost(a *App) bool {
	for _, p := range []string{a.Paths.Rootfs, a.Paths.Sysfs, a.Paths.Procfs} {
		if abs, err := filepath.Abs(p); err == nil && (abs == "/" || abs == "/sys" || abs == "/proc") {
			return true
		}
	}
	return false
}

func runApply(w remediate.Writer, plan *remediate.Plan, yes bool) int {
	changes := plan.Changes()
	_ = renderPlan(os.Stdout, plan, "text")
	if len(changes) == 0 {
		fmt.Println("nothing to apply")
		return remediateOK
	}
	if !yes {
		if !isTerminal(os.Stdin) {
			errorf(os.Stderr, "remediate apply: %d change(s) planned; pass --yes to apply them (stdin is not a terminal to ask)", len(changes))
			return remediateUsage
		}
		fmt.Printf("Apply %d change(s)? [y/N] ", len(changes))
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Println("not applied")
			return remediateUsage
		}
	}
	res, err := remediate.Apply(w, changes)
	if errors.Is(err, remediate.ErrLocked) {
		errorf(os.Stderr, "remediate apply: %v", err)
		return remediateBusy
	}
	for _, c := range res.Applied {
		fmt.Printf("applied     %-14s %s\n", c.Action, c.Target)
	}
	if err != nil {
		for _, c := range res.NotApplied {
			fmt.Printf("NOT applied %-14s %s\n", c.Action, c.Target)
		}
		if res.Untouched {
			// Refused before any change (a damaged journal, which plain
			// rollback refuses too): the error says what to do instead.
			errorf(os.Stderr, "remediate apply stopped: %v", err)
			return remediateFailed
		}
		errorf(os.Stderr, "remediate apply stopped: %v; `rdma_doctor remediate rollback` undoes what was applied", err)
		return remediateFailed
	}
	fmt.Printf("%d change(s) applied; undo with `rdma_doctor remediate rollback`\n", len(res.Applied))
	return remediateOK
}

func runRollback(w remediate.Writer, force bool) int {
	restored, err := remediate.RollbackWith(w, remediate.RollbackOptions{Force: force, Log: os.Stderr})
	if errors.Is(err, remediate.ErrLocked) {
		errorf(os.Stderr, "remediate rollback: %v", err)
		return remediateBusy
	}
	if errors.Is(err, remediate.ErrNoJournal) {
		// Idempotent: a second rollback has nothing left to undo.
		fmt.Printf("nothing to roll back: %v\n", err)
		return remediateOK
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
		fmt.Printf("%s %-14s %s\n", verb, e.Action, what)
	}
	if err != nil {
		errorf(os.Stderr, "remediate rollback: %v", err)
		return remediateFailed
	}
	gone := 0
	for _, e := range restored {
		if e.Gone {
			gone++
		}
	}
	if gone > 0 {
		fmt.Printf("%d path(s) restored, %d gone since the apply (nothing to restore); journal removed\n", len(restored)-gone, gone)
		return remediateOK
	}
	fmt.Printf("%d path(s) restored; journal removed\n", len(restored))
	return remediateOK
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func renderPlan(w io.Writer, p *remediate.Plan, format string) error {
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
