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

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
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
		for alive(child) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(child) {
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
