// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command wakeups measures how often an idle server wakes up: it starts
// each command given with -run, lets it settle, and sums the voluntary and
// nonvoluntary context switches of all its threads (/proc/PID/task/*/status)
// over a window in which nobody sends it a request. A thread that sleeps
// in the kernel and is woken (a timer, a poller, a futex) is one voluntary
// switch when it sleeps again: the sum per second is the process's
// wake-ups, the OS noise HPC sites count on compute nodes. The commands run
// one after the other, never at once, so one's timers do not wake the
// other's threads' CPUs.
//
//	go run ./tools/wakeups -duration 20s -o wakeups.json \
//	  -run 'rdma_doctor=./rdma_doctor --path.rootfs=fixtures/hosts/dgx-h100 --web.listen-address=127.0.0.1:19873' \
//	  -run 'node_exporter=node_exporter --web.listen-address=127.0.0.1:19100'
//
// A -run value is LABEL=COMMAND ARGS..., split at spaces (no quoting).
// This is a measurement, not a test: the figures go to docs/performance.md
// (tools/perfreport -wakeups).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/procstat"
	"github.com/rdma-doctor/rdma_doctor/tools/internal/sbsresult"
)

type runs []string

func (r *runs) String() string     { return strings.Join(*r, ", ") }
func (r *runs) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	var rs runs
	duration := flag.Duration("duration", 20*time.Second, "measured window per command")
	settle := flag.Duration("settle", 5*time.Second, "time after start before the window (start-up work is not idle)")
	out := flag.String("o", "", "write the results as JSON here (stdout always gets a table)")
	flag.Var(&rs, "run", "LABEL=COMMAND ARGS... (repeatable; split at spaces)")
	flag.Parse()
	if len(rs) == 0 {
		fmt.Fprintln(os.Stderr, "wakeups: at least one -run LABEL=COMMAND")
		os.Exit(2)
	}
	var results []sbsresult.Wakeup
	for _, r := range rs {
		label, cmdline, ok := strings.Cut(r, "=")
		args := strings.Fields(cmdline)
		if !ok || label == "" || len(args) == 0 {
			fmt.Fprintf(os.Stderr, "wakeups: -run %q: want LABEL=COMMAND ARGS...\n", r)
			os.Exit(2)
		}
		res, err := measure(label, args, *settle, *duration)
		if err != nil {
			fmt.Fprintf(os.Stderr, "wakeups: %s: %v\n", label, err)
			os.Exit(1)
		}
		results = append(results, res)
		fmt.Printf("%-40s %6.2f wake-ups/s  (%d switches, %d voluntary, in %.1f s; %d threads)\n",
			res.Label, res.PerSecond, res.Switches, res.Voluntary, res.Seconds, res.Threads)
	}
	if *out != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			fmt.Fprintln(os.Stderr, "wakeups:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "wakeups:", err)
			os.Exit(1)
		}
	}
}

// measure runs args, waits settle, and counts its threads' switches over d.
// The command is killed after; its output goes to stderr.
func measure(label string, args []string, settle, d time.Duration) (sbsresult.Wakeup, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return sbsresult.Wakeup{}, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()
	select {
	case err := <-exited:
		return sbsresult.Wakeup{}, fmt.Errorf("exited during the settle time: %v", err)
	case <-time.After(settle):
	}
	pid := cmd.Process.Pid
	before, err := switches(pid)
	if err != nil {
		return sbsresult.Wakeup{}, err
	}
	t0 := time.Now()
	select {
	case err := <-exited:
		return sbsresult.Wakeup{}, fmt.Errorf("exited during the window: %v", err)
	case <-time.After(d):
	}
	after, err := switches(pid)
	if err != nil {
		return sbsresult.Wakeup{}, err
	}
	secs := time.Since(t0).Seconds()
	res := sbsresult.Wakeup{Label: label, Command: args, Seconds: secs, Threads: len(after)}
	for tid, a := range after {
		b := before[tid] // zero for a thread started in the window
		res.Switches += a.Voluntary + a.Nonvoluntary - b.Voluntary - b.Nonvoluntary
		res.Voluntary += a.Voluntary - b.Voluntary
	}
	for tid := range before {
		if _, ok := after[tid]; !ok {
			res.Exited++
		}
	}
	res.PerSecond = float64(res.Switches) / secs
	return res, nil
}

// switches reads every thread's context switch counts of process pid.
func switches(pid int) (map[string]procstat.Switches, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[string]procstat.Switches, len(tasks))
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited since the listing
		}
		if err != nil {
			return nil, err
		}
		c, err := procstat.ParseSwitches(b)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name(), err)
		}
		out[t.Name()] = c
	}
	return out, nil
}
