// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package subprocess

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// script writes an executable shell script (the program under test, not a
// shell that Run uses) and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// exists reports whether pid exists at all (a zombie counts).
func exists(pid int) bool { return syscall.Kill(pid, 0) == nil }

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestRunOutputAndExitStatus(t *testing.T) {
	tests := []struct {
		name, body  string
		wantOut     string
		wantErr     string
		wantErrType error
	}{
		{name: "ok", body: "echo hello; echo warn >&2", wantOut: "hello\n"},
		{name: "args", body: `printf '%s|' "$@"`, wantOut: "a b|c|"},
		{name: "fails with the last stderr line", body: "echo 'ibwarn: x' >&2; echo 'sminfo: iberror: failed: query' >&2; exit 255",
			wantErr: "exit status 255: sminfo: iberror: failed: query"},
		{name: "pid in the message is masked", body: "echo 'ibwarn: [31250] mad_rpc_open_port: cannot open UMAD port' >&2; exit 1",
			wantErr: "exit status 1: ibwarn: [pid] mad_rpc_open_port"},
		{name: "too large", body: "head -c 5000 /dev/zero", wantErrType: ErrOutputTooLarge},
		{name: "exactly the limit", body: "head -c 4096 /dev/zero | tr '\\0' x", wantOut: strings.Repeat("x", 4096)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(context.Background(), Spec{Path: script(t, tt.body), Args: []string{"a b", "c"}, MaxOutput: 4096, Timeout: time.Minute})
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
			case tt.wantErrType != nil:
				if !errors.Is(err, tt.wantErrType) {
					t.Fatalf("err = %v, want %v", err, tt.wantErrType)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if string(res.Stdout) != tt.wantOut {
					t.Errorf("stdout = %q, want %q", res.Stdout, tt.wantOut)
				}
			}
		})
	}
}

func TestRunMissingProgram(t *testing.T) {
	_, err := Run(context.Background(), Spec{Path: filepath.Join(t.TempDir(), "nope")})
	if err == nil {
		t.Fatal("no error for a missing program")
	}
}

// TestTimeoutKillsGroupNoZombie: a program that hangs, with a child that
// hangs too, is killed at the timeout with its whole group, and the leader
// is reaped (no zombie left).
func TestTimeoutKillsGroupNoZombie(t *testing.T) {
	dir := t.TempDir()
	p := script(t, `echo $$ >`+dir+`/leader
sleep 1000 &
echo $! >`+dir+`/child
echo started
wait
`)
	for _, streaming := range []bool{false, true} {
		spec := Spec{Path: p, Timeout: 300 * time.Millisecond}
		if streaming {
			spec.Stdout = func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }
		}
		_, err := Run(context.Background(), spec)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("streaming=%v: err = %v, want ErrTimeout", streaming, err)
		}
		leader, child := readPid(t, dir+"/leader"), readPid(t, dir+"/child")
		if exists(leader) {
			t.Errorf("streaming=%v: leader %d still exists after Run returned (zombie or alive)", streaming, leader)
		}
		// The child was killed by the group kill; init reaps it, which
		// may take a moment, but it must not be running.
		deadline := time.Now().Add(10 * time.Second)
		for testenv.Alive(child) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if testenv.Alive(child) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Errorf("streaming=%v: child %d survived the group kill", streaming, child)
		}
	}
}

func TestContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err := Run(ctx, Spec{Path: script(t, "exec sleep 1000")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestStreamingConsumerError: a consumer that gives up early stops the
// program instead of waiting for the timeout.
func TestStreamingConsumerError(t *testing.T) {
	boom := errors.New("parse failed")
	_, err := Run(context.Background(), Spec{
		Path:    script(t, "while :; do echo line; done"),
		Timeout: time.Hour,
		Stdout: func(r io.Reader) error {
			sc := bufio.NewScanner(r)
			for i := 0; i < 10 && sc.Scan(); i++ {
			}
			return boom
		},
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the consumer's error", err)
	}
}

func TestStreamingReadsAll(t *testing.T) {
	n := 0
	_, err := Run(context.Background(), Spec{
		Path: script(t, "i=0; while [ $i -lt 20000 ]; do echo line $i; i=$((i+1)); done"),
		Stdout: func(r io.Reader) error {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				n++
			}
			return sc.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 20000 {
		t.Errorf("read %d lines, want 20000", n)
	}
}

// waitPid reads the pid a fake tool wrote to path, waiting for the file
// (the failure guard is generous: this is not a timing assertion).
func waitPid(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return readPid(t, path)
		}
	}
	t.Fatalf("%s never written", path)
	return 0
}

// assertGone polls until pid no longer runs; a survivor fails the test
// (after a generous guard) and is killed.
func assertGone(t *testing.T, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); testenv.Alive(pid) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if testenv.Alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("%s %d survived Run", what, pid)
	}
}

// TestChildrenKilledOnEveryExit: whatever way the program ends (success,
// failure, cancellation, kept or streamed output), a child it forked and
// left sleeping is killed with its group. The child either keeps the
// output pipes (then Run must not wait for it) or has let go of them
// (then nothing but the group kill ends it). The timeout is an hour, so
// only the kill on exit can end the child in time.
func TestChildrenKilledOnEveryExit(t *testing.T) {
	for _, tc := range []struct {
		name, exit string
		streaming  bool
		cancel     bool
		wantErr    string
	}{
		{name: "success", exit: "exit 0"},
		{name: "success streaming", exit: "exit 0", streaming: true},
		{name: "failure", exit: "exit 3", wantErr: "exit status 3"},
		{name: "failure streaming", exit: "exit 3", streaming: true, wantErr: "exit status 3"},
		{name: "cancel", exit: "exec sleep 1000", cancel: true, wantErr: context.Canceled.Error()},
	} {
		for _, redirect := range []string{"", ">/dev/null 2>&1 </dev/null"} {
			name := tc.name + map[string]string{"": ", child keeps the pipes"}[redirect]
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				p := script(t, "sleep 1000 "+redirect+" &\necho $! >"+dir+"/child\necho out\n"+tc.exit+"\n")
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.cancel {
					go func() { waitPid(t, dir+"/child"); cancel() }()
				}
				spec := Spec{Path: p, Timeout: time.Hour}
				var streamed string
				if tc.streaming {
					spec.Stdout = func(r io.Reader) error { b, err := io.ReadAll(r); streamed = string(b); return err }
				}
				res, err := Run(ctx, spec)
				switch {
				case tc.wantErr == "" && err != nil:
					t.Fatal(err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if got := string(res.Stdout) + streamed; got != "out\n" {
					t.Errorf("output %q, want %q", got, "out\n")
				}
				assertGone(t, "child", waitPid(t, dir+"/child"))
			})
		}
	}
}

// TestOutputCapKills: a program that writes without end, on standard
// output (kept or streamed) or on standard error, is killed when it passes
// its limit, long before its hour-long timeout, with an error that says
// so; no more than the limit reaches the consumer.
func TestOutputCapKills(t *testing.T) {
	const limit = 64 << 10
	for _, tc := range []struct {
		name, body, want string
		streaming        bool
	}{
		{name: "stdout kept", body: "exec yes", want: "more than 65536 bytes on standard output"},
		{name: "stdout streamed", body: "exec yes", streaming: true, want: "more than 65536 bytes on standard output"},
		{name: "stderr", body: "exec yes >&2", want: "more than 65536 bytes on standard error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := script(t, "echo $$ >"+dir+"/pid\n"+tc.body+"\n")
			streamed := 0
			spec := Spec{Path: p, Timeout: time.Hour, MaxOutput: limit, MaxStderr: limit}
			if tc.streaming {
				spec.Stdout = func(r io.Reader) error {
					n, err := io.Copy(io.Discard, r)
					streamed = int(n)
					return err
				}
			}
			res, err := Run(context.Background(), spec)
			if !errors.Is(err, ErrOutputTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrOutputTooLarge saying %q", err, tc.want)
			}
			if len(res.Stdout) > limit || streamed > limit {
				t.Errorf("%d bytes kept, %d streamed: more than the limit %d", len(res.Stdout), streamed, limit)
			}
			if len(res.Stderr) > stderrKeep {
				t.Errorf("%d bytes of standard error kept, want at most %d", len(res.Stderr), stderrKeep)
			}
			if pid := readPid(t, dir+"/pid"); exists(pid) {
				t.Errorf("program %d still exists after Run returned", pid)
			}
		})
	}
}

// TestEscapedChildDoesNotHoldRun: a child that left the group (setsid)
// cannot be killed with it and keeps the output pipes open; Run still
// returns (after draining for waitDelay) instead of waiting for it, with
// an error, and the hour-long timeout plays no part.
func TestEscapedChildDoesNotHoldRun(t *testing.T) {
	dir := t.TempDir()
	// The leader waits until the child has escaped, or the group kill
	// would catch it still in the group.
	p := script(t, "setsid sh -c 'echo $$ >"+dir+"/child; exec sleep 1000' &\nuntil [ -s "+dir+"/child ]; do sleep 0.01; done\necho out\n")
	t.Cleanup(func() { _ = syscall.Kill(waitPid(t, dir+"/child"), syscall.SIGKILL) })
	_, err := Run(context.Background(), Spec{Path: p, Timeout: time.Hour})
	if !errors.Is(err, ErrEscaped) {
		t.Fatalf("err = %v, want ErrEscaped", err)
	}
}
