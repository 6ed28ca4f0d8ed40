// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package perftesttest installs a fake perftest (../internal/fakeperftest)
// for tests: a directory holding it under every tool name, a script saying
// what each side does, and the recorded samples to replay.
package perftesttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tools are the names the fake is installed under.
var Tools = []string{"ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat"}

// Behaviour is one side's script (see fakeperftest's Behaviour).
type Behaviour struct {
	Stdout, Stderr         string `json:",omitempty"`
	StdoutFile, StderrFile string `json:",omitempty"`
	Exit                   int    `json:",omitempty"`
	// Mode: "", "hang", "hang-child", "crash", "garbage".
	Mode  string `json:",omitempty"`
	Bytes int    `json:",omitempty"`
	// Protocol: the server listens on -p and accepts one client, the
	// client connects to HOST:-p.
	Protocol bool `json:",omitempty"`
	DelayMS  int  `json:",omitempty"`
}

// Sides is the script of one tool.
type Sides struct {
	Server, Client Behaviour
	// HelpFile (a file of SamplesDir) is what --help prints; it exits 1.
	HelpFile string `json:",omitempty"`
	// CUDA: the tool accepts --use_cuda and --use_cuda_bus_id, as one
	// built with CUDA does; without it they are unrecognized options.
	CUDA bool `json:",omitempty"`
}

// Recorded help texts: the Debian build's full --help (no CUDA), and the
// CUDA options of an MLNX_OFED 5.5 build as NVIDIA's guide shows them
// (ib_write_bw --help | grep cuda; testdata/samples/SOURCES.md).
const (
	HelpNoCUDA = "ib_write_bw_help_debian_v4.5-0.17.txt"
	HelpCUDA   = "cudahelp_ib_write_bw_grep_cuda_mlnx_ofed5.5_nvidia_doc.txt"
)

// WithCUDA marks every tool of script as built with CUDA (help listing
// --use_cuda, the option accepted) or without (the Debian help, the option
// refused).
func WithCUDA(script map[string]Sides, cuda bool) map[string]Sides {
	for k, v := range script {
		v.CUDA, v.HelpFile = cuda, HelpNoCUDA
		if cuda {
			v.HelpFile = HelpCUDA
		}
		script[k] = v
	}
	return script
}

var (
	buildOnce sync.Once
	bin       string
	buildErr  error
)

// pkgDir is this source file's directory.
// Replay is a script in which both sides of every tool replay a recorded
// run over the fake's TCP exchange: latSample for the _lat tools, bwSample
// for the _bw ones (files of SamplesDir).
func Replay(latSample, bwSample string) map[string]Sides {
	s := map[string]Sides{}
	for _, t := range Tools {
		file := latSample
		if strings.HasSuffix(t, "_bw") {
			file = bwSample
		}
		s[t] = Sides{
			Server: Behaviour{StdoutFile: file, Protocol: true},
			Client: Behaviour{StdoutFile: file, Protocol: true},
		}
	}
	return s
}

func pkgDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// SamplesDir holds the recorded perftest outputs.
func SamplesDir() string { return filepath.Join(pkgDir(), "..", "testdata", "samples") }

// RemoveBuilt removes the fake that Build compiled, if it did. A test
// binary calls it from TestMain after m.Run: the fake is shared by all of
// its tests, so no single test's cleanup can remove it.
func RemoveBuilt() {
	if bin != "" {
		_ = os.RemoveAll(filepath.Dir(bin))
	}
}

// Build compiles the fake once per test binary.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakeperftest-")
		if err != nil {
			buildErr = err
			return
		}
		bin = filepath.Join(dir, "fakeperftest")
		cmd := exec.Command("go", "build", "-o", bin, "./internal/fakeperftest")
		cmd.Dir = filepath.Join(pkgDir(), "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build fakeperftest: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// Dir is a directory of fake perftest binaries with one script.
type Dir string

// Install links the fake under every tool name into a new directory, with
// script as fake.json and the recorded samples next to it.
func Install(t testing.TB, script map[string]Sides) Dir {
	t.Helper()
	b := Build(t)
	dir := t.TempDir()
	for _, name := range Tools {
		dst := filepath.Join(dir, name)
		if err := os.Link(b, dst); err != nil {
			data, rerr := os.ReadFile(b)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if err := os.WriteFile(dst, data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	js, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fake.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(SamplesDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(SamplesDir(), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Dir(dir)
}

// Call is one execution the fake recorded.
type Call struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
	Side string   `json:"side"`
	FDs  []string `json:"fds"`
	Env  []string `json:"env"`
	Pid  int      `json:"pid"`
	Pgid int      `json:"pgid"`
}

// Calls lists what the fake was run as, in order.
func (d Dir) Calls(t testing.TB) []Call {
	t.Helper()
	f, err := os.Open(filepath.Join(string(d), "calls.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// Gone reports whether pid has exited: no such process, or a zombie
// (a grandchild reparented to a PID 1 that does not reap).
func Gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	return s[i+2] == 'Z' || s[i+2] == 'X'
}

// WaitGone polls until pid is gone (at most 5 s; no assertion on time).
func WaitGone(pid int) bool {
	for i := 0; i < 500; i++ {
		if Gone(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
