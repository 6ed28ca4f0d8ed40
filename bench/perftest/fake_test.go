// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
)

// The fake perftest (internal/fakeperftest) is built once per test binary.
var (
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

func buildFake(t testing.TB) string {
	t.Helper()
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakeperftest-")
		if err != nil {
			fakeErr = err
			return
		}
		fakeBin = filepath.Join(dir, "fakeperftest")
		cmd := exec.Command("go", "build", "-o", fakeBin, "./internal/fakeperftest")
		if out, err := cmd.CombinedOutput(); err != nil {
			fakeErr = fmt.Errorf("go build fakeperftest: %v\n%s", err, out)
		}
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakeBin
}

type behaviour struct {
	Stdout, Stderr         string `json:",omitempty"`
	StdoutFile, StderrFile string `json:",omitempty"`
	Exit                   int    `json:",omitempty"`
	Mode                   string `json:",omitempty"`
	Bytes                  int    `json:",omitempty"`
	Protocol               bool   `json:",omitempty"`
	DelayMS                int    `json:",omitempty"`
}

type sides struct{ Server, Client behaviour }

// fakeDir is a directory of fake perftest binaries with one script.
type fakeDir string

// installFake links the fake under every test's name into a new directory
// with script as fake.json and the recorded samples next to it.
func installFake(t *testing.T, script map[Test]sides) fakeDir {
	t.Helper()
	bin := buildFake(t)
	dir := t.TempDir()
	for _, test := range Tests {
		dst := filepath.Join(dir, test.Binary())
		if err := os.Link(bin, dst); err != nil {
			b, rerr := os.ReadFile(bin)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if err := os.WriteFile(dst, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := map[string]sides{}
	for k, v := range script {
		m[string(k)] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fake.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", "samples", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return fakeDir(dir)
}

type call struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
	Side string   `json:"side"`
	FDs  []string `json:"fds"`
	Env  []string `json:"env"`
	Pid  int      `json:"pid"`
	Pgid int      `json:"pgid"`
}

func (d fakeDir) calls(t *testing.T) []call {
	t.Helper()
	f, err := os.Open(filepath.Join(string(d), "calls.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func (d fakeDir) runner() *Runner {
	return &Runner{Dir: string(d), Proc: hostfs.Dir("/proc"), Locks: &DeviceLocks{}, Setup: 2 * time.Second, ListenWait: 500 * time.Millisecond, ServerGrace: 2 * time.Second}
}

// gone reports whether pid has exited: no such process, or a zombie
// waiting for a parent that is not us (a grandchild reparented to a PID 1
// that does not reap).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	state := s[i+2]
	return state == 'Z' || state == 'X'
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
func waitGone(pid int) bool {
	for i := 0; i < 500; i++ {
		if gone(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

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
