// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

type behaviour = perftesttest.Behaviour
type sides = perftesttest.Sides

// fakeDir is a directory of fake perftest binaries with one script.
type fakeDir struct{ perftesttest.Dir }

func installFake(t *testing.T, script map[Test]sides) fakeDir {
	t.Helper()
	m := map[string]sides{}
	for k, v := range script {
		m[string(k)] = v
	}
	return fakeDir{perftesttest.Install(t, m)}
}

func (d fakeDir) calls(t *testing.T) []perftesttest.Call { return d.Calls(t) }

func (d fakeDir) runner() *Runner {
	return &Runner{Dir: string(d.Dir), Proc: hostfs.Dir("/proc"), Locks: &DeviceLocks{}, Setup: 2 * time.Second, ListenWait: 500 * time.Millisecond, ServerGrace: 2 * time.Second}
}

// children lists the processes whose parent is this test process.
func children(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(me) {
			out = append(out, pid)
		}
	}
	return out
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// waitGone polls (without asserting on time) until pid is gone.
func waitGone(pid int) bool { return perftesttest.WaitGone(pid) }

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// inheritedFromOutside lists the targets of this process's descriptors
// that lack O_CLOEXEC: the test's own parent left them open, and every exec
// passes them on; the runner did not create them.
func inheritedFromOutside(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
				if flags&syscall.O_CLOEXEC == 0 {
					target, _ := os.Readlink("/proc/self/fd/" + e.Name())
					out[e.Name()+"->"+target] = true
				}
			}
		}
	}
	return out
}
