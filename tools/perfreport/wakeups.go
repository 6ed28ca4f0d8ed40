// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/sbsresult"
)

// wakeup is one command's result from tools/wakeups.
type wakeup = sbsresult.Wakeup

// wakeupGoal is issue 27's goal for the idle default server: at most two
// wake-ups a second, all threads together.
const wakeupGoal = 2.0

func readWakeups(name string) ([]wakeup, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var w []wakeup
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return w, nil
}

// writeWakeups writes the "Idle wake-ups" section.
func writeWakeups(w io.Writer, ws []wakeup) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\n## Idle wake-ups\n\n")
	p("Each server started alone on the DGX fixture host (node_exporter with its\n")
	p("default collectors on this machine), nobody sending it a request: the\n")
	p("voluntary and nonvoluntary context switches of all its threads\n")
	p("(`/proc/PID/task/*/status`) over the window after a settle time, per\n")
	p("second (tools/wakeups). A thread woken by a timer, a poller or another\n")
	p("thread is one switch when it sleeps again: the OS noise HPC sites count\n")
	p("on compute nodes. Nonvoluntary switches are preemptions, which on this\n")
	p("shared machine come mostly from the other builds. The window should hold\n")
	p("the slow periodic work (the diagnose sample every 30 s, sminfo every\n")
	p("minute); a 20 s window between two samples reads 0. The goal for the\n")
	p("default server is at most %.0f a second.\n\n", wakeupGoal)
	p("    make wakeups WAKEUPS_DURATION=90s   # or: go run ./tools/wakeups -duration 90s -run 'LABEL=COMMAND ARGS' ...\n\n")
	if len(ws) == 0 {
		p("Not measured in this run.\n")
		return
	}
	p("| server | wake-ups/s | switches (voluntary) | window | threads |\n|---|---|---|---|---|\n")
	for _, r := range ws {
		p("| %s | %.2f | %d (%d) | %.0f s | %d |\n", r.Label, r.PerSecond, r.Switches, r.Voluntary, r.Seconds, r.Threads)
	}
	p("\nCommands:\n\n")
	for _, r := range ws {
		cmd := append([]string{filepath.Base(r.Command[0])}, r.Command[1:]...) // no machine's paths
		p("- %s: `%s`\n", r.Label, strings.Join(cmd, " "))
	}
}
