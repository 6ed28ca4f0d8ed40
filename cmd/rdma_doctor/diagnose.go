// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks"
	"github.com/rdma-doctor/rdma_doctor/diagnose/report"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// sampleTimeout bounds one reading of the host.
const sampleTimeout = 30 * time.Second

func setupDiagnose(cmd *kingpin.CmdClause) func(context.Context, *App) int {
	c := &report.Command{View: report.View{VerboseHint: "--verbose"}, Checks: checks.All()}
	interval := cmd.Flag("interval", "Take two samples this far apart so the delta checks (error counters, data flowing) can judge increases; 0 takes one sample and those checks skip.").
		Default("0s").Duration()
	cmd.Flag("format", "Output format: "+strings.Join(report.Formats, ", ")+" (nhc: one line for a Slurm drain reason).").
		Default("text").StringVar(&c.Format)
	cmd.Flag("check", "Only run checks whose id matches (an id such as port.rate or a glob such as 'ctr.*'); repeatable or comma-separated.").
		PlaceHolder("ID").StringsVar(&c.Only)
	cmd.Flag("list-checks", "Print every check id with its title and exit.").BoolVar(&c.List)
	cmd.Flag("verbose", "Text format: also list every passed and skipped check (by default only problems and their details).").Short('v').BoolVar(&c.View.Verbose)
	return func(ctx context.Context, a *App) int {
		c.View.Color = report.UseColor(isTerminal(os.Stdout), os.Getenv)
		code, err := c.Run(ctx, os.Stdout, func(ctx context.Context, patterns []string) (report.Outcome, error) {
			return runDiagnose(ctx, a, *interval, patterns)
		})
		if err != nil {
			errorf(os.Stderr, "%v", err)
		}
		return code
	}
}

// runDiagnose reads the host once, or twice interval apart, and evaluates
// the checks matching patterns.
func runDiagnose(ctx context.Context, a *App, interval time.Duration, patterns []string) (report.Outcome, error) {
	eval, err := diagnose.NewEvaluator(a.Config, patterns, checks.All())
	if err != nil {
		return report.Outcome{}, err
	}
	if err := eval.TopologyErr(); err != nil {
		// One run asked for: could not run, as any bad config.
		return report.Outcome{}, err
	}
	// No background loop runs here: each sample's snapshot runs one
	// sminfo round (unless --no-collector.sm), on the host's one runner
	// for both samples, so a stalled SM (activity count not rising)
	// shows with --interval. Its errors become findings.
	reader := &diagnose.Reader{Host: a.Host, ExpectedDevices: a.Config.Diagnose.ExpectedDevices}
	hist := diagnose.NewHistory(0, 2)
	read := func() *diagnose.Reading {
		c, cancel := context.WithTimeout(ctx, sampleTimeout)
		defer cancel()
		return reader.Read(c)
	}
	snap := read()
	hist.Add(snap)
	if interval > 0 {
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return report.Outcome{}, fmt.Errorf("interrupted while waiting --interval=%v for the second sample", interval)
		case <-t.C:
		}
		snap = read()
		hist.Add(snap)
	}
	if err := ctx.Err(); err != nil {
		return report.Outcome{}, err
	}
	out := report.Outcome{Report: eval.Evaluate(snap, hist)}
	if class, err := snap.Host.Class(); class == nil && err != nil && !errors.Is(err, infiniband.ErrNoClass) {
		out.ReadErr = fmt.Errorf("cannot read /sys/class/infiniband: %w", err)
	}
	return out, nil
}
