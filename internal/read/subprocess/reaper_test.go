// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package subprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// reaperHelperEnv names the helper a re-run of this test binary runs
// instead of the tests: a Reaper changes the whole process (it becomes
// the subreaper of everything it starts), so each Reaper test has a
// process of its own.
const reaperHelperEnv = "SUBPROCESS_REAPER_HELPER"

func TestMain(m *testing.M) {
	if name := os.Getenv(reaperHelperEnv); name != "" {
		helper := reaperHelpers[name]
		if helper == nil {
			fmt.Fprintf(os.Stderr, "no reaper helper %q\n", name)
			os.Exit(2)
		}
		os.Exit(helper(os.Getenv("SUBPROCESS_REAPER_DIR")))
	}
	os.Exit(m.Run())
}

// reaperHelpers print what failed and return the exit status.
var reaperHelpers = map[string]func(dir string) int{
	"escapes":    helperEscapes,
	"concurrent": helperConcurrent,
}

// runHelper runs the named helper in a process of its own and fails the
// test with its output unless it exits 0.
func runHelper(t *testing.T, name string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), reaperHelperEnv+"="+name, "SUBPROCESS_REAPER_DIR="+dir)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { killListed(dir) })
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", name, err, out)
	}
	if len(out) > 0 {
		t.Logf("helper %s:\n%s", name, out)
	}
}

// killListed kills what a failed helper left: every pid in a file named
// *.pid under dir.
func killListed(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.pid"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && testenv.Alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// helperScript writes an executable shell script into dir.
func helperScript(dir, body string) (string, error) {
	p := filepath.Join(dir, "prog")
	return p, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755)
}

// pidsIn reads the *.pid files a script wrote into dir.
func pidsIn(dir string) (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return out, nil
}

// escapes are programs that leave processes behind outside their process
// group and exit once those have escaped, each with the names of the pid
// files it writes. An escaped process writes its own pid from inside its
// new session or group, and the program waits for that.
var escapes = []struct {
	name, body string
	pids       []string
}{
	{"setsid, holding the output", `setsid sh -c 'echo $$ >D/a.pid; exec sleep 1000' &
until [ -s D/a.pid ]; do sleep 0.01; done
echo out
`, []string{"a"}},
	{"setsid, output let go", `setsid sh -c 'echo $$ >D/a.pid; exec sleep 1000' >/dev/null 2>&1 </dev/null &
until [ -s D/a.pid ]; do sleep 0.01; done
echo out
`, []string{"a"}},
	{"setsid, output let go, failing", `setsid sh -c 'echo $$ >D/a.pid; exec sleep 1000' >/dev/null 2>&1 </dev/null &
until [ -s D/a.pid ]; do sleep 0.01; done
echo out
exit 3
`, []string{"a"}},
	{"double fork into a session with a child of its own", `(setsid sh -c 'sleep 1000 & echo $! >D/b.pid; echo $$ >D/a.pid; wait' >/dev/null 2>&1 </dev/null &)
until [ -s D/a.pid ] && [ -s D/b.pid ]; do sleep 0.01; done
echo out
`, []string{"a", "b"}},
	{"setpgid", `perl -e 'setpgrp(0, 0) or die; open(F, ">D/a.pid.tmp") or die; print F "$$\n"; close F; rename("D/a.pid.tmp", "D/a.pid"); exec("sleep", "1000")' >/dev/null 2>&1 </dev/null &
until [ -s D/a.pid ]; do sleep 0.01; done
echo out
`, []string{"a"}},
}

// TestReaperKillsEscapes: whatever way a program's children left its
// process group (a new session, a double fork, setpgid), with or without
// its output, on success and on failure, none of them exists any more
// when Run returns, not even as a zombie, and a child that held the
// output did not turn the run into ErrEscaped.
func TestReaperKillsEscapes(t *testing.T) { runHelper(t, "escapes") }

func helperEscapes(dir string) int {
	r, err := NewReaper()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	failed := 0
	for i, tc := range escapes {
		d := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			fmt.Println(err)
			return 1
		}
		p, err := helperScript(d, strings.ReplaceAll(tc.body, "D/", d+"/"))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		res, err := Run(context.Background(), Spec{Path: p, Timeout: time.Hour, Reaper: r})
		fail := func(format string, args ...any) {
			fmt.Printf("%s: %s\n", tc.name, fmt.Sprintf(format, args...))
			failed++
		}
		if want := strings.Contains(tc.body, "exit 3"); want != (err != nil) || errors.Is(err, ErrEscaped) {
			fail("err = %v", err)
		}
		if string(res.Stdout) != "out\n" {
			fail("stdout %q", res.Stdout)
		}
		pids, err := pidsIn(d)
		if err != nil || len(pids) != len(tc.pids) {
			fail("pid files %v, %v; want %v", pids, err, tc.pids)
		}
		for name, pid := range pids {
			if exists(pid) {
				fail("%s (pid %d) exists after Run returned", name, pid)
			}
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// TestReaperSparesRunningRuns: an orphan of a run that is still running
// (its leader lives; the orphan's parent exited) is not killed when
// another run ends; an escaped child of that other run which let go of
// its output cannot be told from it, so it waits too, but one that holds
// the run's output is killed with the run. Once the first run ends, both
// orphans are gone.
func TestReaperSparesRunningRuns(t *testing.T) { runHelper(t, "concurrent") }

func helperConcurrent(dir string) int {
	r, err := NewReaper()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	failed := 0
	fail := func(format string, args ...any) {
		fmt.Printf(format+"\n", args...)
		failed++
	}
	dirA, dirB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	a, err := helperScript(dirA, `(setsid sh -c 'echo $$ >`+dirA+`/orphan.pid; exec sleep 1000' >/dev/null 2>&1 </dev/null &)
until [ -s `+dirA+`/orphan.pid ]; do sleep 0.01; done
echo $$ >`+dirA+`/leader.pid
exec sleep 1000
`)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Spec{Path: a, Reaper: r})
		doneA <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(dirA + "/leader.pid"); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("run A never started")
			cancel()
			return 1
		}
	}
	b, err := helperScript(dirB, `setsid sh -c 'echo $$ >`+dirB+`/quiet.pid; exec sleep 1000' >/dev/null 2>&1 </dev/null &
setsid sh -c 'echo $$ >`+dirB+`/holder.pid; exec sleep 1000' &
until [ -s `+dirB+`/quiet.pid ] && [ -s `+dirB+`/holder.pid ]; do sleep 0.01; done
echo out
`)
	if err != nil {
		fmt.Println(err)
		cancel()
		return 1
	}
	if _, err := Run(context.Background(), Spec{Path: b, Reaper: r, Timeout: time.Hour}); err != nil {
		fail("run B: %v", err)
	}
	pa, _ := pidsIn(dirA)
	pb, _ := pidsIn(dirB)
	if !testenv.Alive(pa["orphan"]) || !testenv.Alive(pa["leader"]) {
		fail("run A's leader %d or orphan %d was killed when run B ended", pa["leader"], pa["orphan"])
	}
	if !testenv.Alive(pb["quiet"]) {
		fail("run B's quiet orphan %d is gone while run A, which could own it, still runs", pb["quiet"])
	}
	if exists(pb["holder"]) {
		fail("run B's orphan %d that held its output exists after run B", pb["holder"])
	}
	cancel()
	if err := <-doneA; !errors.Is(err, context.Canceled) {
		fail("run A: %v, want context.Canceled", err)
	}
	for name, pid := range map[string]int{"A's orphan": pa["orphan"], "B's quiet orphan": pb["quiet"]} {
		if exists(pid) {
			fail("%s %d exists after the last run ended", name, pid)
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line string
		want procInfo
	}{
		// /proc/PID/stat of a sleep (Linux 6.x), and one whose command
		// name holds a space and parentheses.
		{"4242 (sleep) S 4200 4242 4100 0 -1 4194304 95 0 0 0 0 0 0 0 20 0 1 0 123456 8216576 244 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
			procInfo{pid: 4242, ppid: 4200, pgid: 4242, start: 123456}},
		{"17 (a) (b c) Z 1 17 17 0 -1 4227148 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
			procInfo{pid: 17, ppid: 1, pgid: 17, start: 99, zombie: true}},
	} {
		pid, _ := strconv.Atoi(strings.Fields(tc.line)[0])
		got, err := parseStat(pid, []byte(tc.line))
		if err != nil || got != tc.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 0 1", "1 (x) S a 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5"} {
		if _, err := parseStat(1, []byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

// BenchmarkSweep is the cost a run's end adds when it left nothing: one
// pass over every process's stat line (no prctl: this process has no
// orphans to find either way).
func BenchmarkSweep(b *testing.B) {
	r := &Reaper{self: os.Getpid(), proc: "/proc", runs: map[int]*leader{}}
	procs := len(r.scan())
	b.ReportAllocs()
	for b.Loop() {
		r.sweep(ending{pgid: 1})
	}
	b.ReportMetric(float64(procs), "procs")
}
