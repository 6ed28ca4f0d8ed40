// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command fakeperftest stands in for the perftest tools in tests. Installed
// (copied) under the names ib_write_bw, ib_send_lat, ..., it reads what to
// do from fake.json next to itself: replay a recorded stdout/stderr and exit
// status, hang, crash, print garbage, or play the real protocol's first
// step (the server listens on -p and accepts one client; the client
// connects to HOST:-p). It appends every call (argv, side, the file
// descriptors it inherited, the environment) to calls.jsonl in the same
// directory, so tests can check exactly what the runner executed.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Behaviour is one side's script.
type Behaviour struct {
	// Stdout and Stderr are printed as given; StdoutFile and StderrFile
	// name files (relative to the fake's directory) to print instead.
	Stdout, Stderr         string
	StdoutFile, StderrFile string
	Exit                   int
	// Mode: "" (print and exit), "hang" (print, then sleep forever),
	// "hang-child" (start a child that sleeps forever in the same process
	// group, write its pid to child.pid, then sleep), "crash" (SIGSEGV
	// itself after printing), "garbage" (print Bytes of noise).
	Mode  string
	Bytes int
	// Protocol: the server listens on -p and accepts one connection
	// before printing; the client connects to HOST:-p first and fails like
	// perftest when nothing listens.
	Protocol bool
	// DelayMS sleeps before printing.
	DelayMS int
}

// Script maps a binary name to its server and client behaviour, what its
// --help prints, and whether it was "built with CUDA".
type Script map[string]struct {
	Server, Client Behaviour
	// HelpFile is printed for --help (exit 1, as perftest does).
	HelpFile string
	// CUDA: the binary accepts --use_cuda=N and --use_cuda_bus_id=ADDR.
	// Without it they are unrecognized options, as in a build without
	// CUDA (getopt_long's message, then exit 1).
	CUDA bool
}

// Call is one line of calls.jsonl.
type Call struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
	Side string   `json:"side"`
	FDs  []string `json:"fds"`
	Env  []string `json:"env"`
	Pid  int      `json:"pid"`
	Pgid int      `json:"pgid"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--fake-sleeper" {
		time.Sleep(time.Hour)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		fail(err)
	}
	dir, name := filepath.Dir(exe), filepath.Base(os.Args[0])
	var script Script
	b, err := os.ReadFile(filepath.Join(dir, "fake.json"))
	if err != nil {
		fail(err)
	}
	if err := json.Unmarshal(b, &script); err != nil {
		fail(err)
	}
	host, port := parseArgs(os.Args[1:])
	side := "server"
	if host != "" {
		side = "client"
	}
	record(dir, Call{Name: name, Args: os.Args[1:], Side: side, FDs: fds(), Env: os.Environ(), Pid: os.Getpid(), Pgid: pgid()})

	sc, ok := script[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "fakeperftest: no script for %s\n", name)
		os.Exit(2)
	}
	for _, a := range os.Args[1:] {
		if a == "--help" || a == "-h" {
			if sc.HelpFile != "" {
				os.Stdout.WriteString(readFile(dir, sc.HelpFile))
			}
			os.Exit(1)
		}
		if !sc.CUDA && (strings.HasPrefix(a, "--use_cuda=") || strings.HasPrefix(a, "--use_cuda_bus_id=")) {
			fmt.Fprintf(os.Stderr, "%s: unrecognized option '%s'\n", name, a)
			os.Exit(1)
		}
	}
	bh := sc.Server
	if side == "client" {
		bh = sc.Client
	}
	if bh.Protocol {
		if side == "server" {
			l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
			if err != nil {
				fmt.Fprintf(os.Stderr, "Couldn't listen to port %d\n", port)
				os.Exit(1)
			}
			c, err := l.Accept()
			if err != nil {
				os.Exit(1)
			}
			// Wait for the client to finish, as perftest's report
			// exchange does.
			buf := make([]byte, 1)
			_, _ = c.Read(buf)
			c.Close()
			l.Close()
		} else {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 5*time.Second)
			if err != nil {
				fmt.Fprintf(os.Stderr, "Couldn't connect to %s:%d\nUnable to open file descriptor for socket connection\n Unable to init the socket connection\n", host, port)
				os.Exit(1)
			}
			defer c.Close()
		}
	}
	if bh.DelayMS > 0 {
		time.Sleep(time.Duration(bh.DelayMS) * time.Millisecond)
	}
	out, errOut := bh.Stdout, bh.Stderr
	if bh.StdoutFile != "" {
		out = readFile(dir, bh.StdoutFile)
	}
	if bh.StderrFile != "" {
		errOut = readFile(dir, bh.StderrFile)
	}
	os.Stdout.WriteString(out)
	os.Stderr.WriteString(errOut)
	switch bh.Mode {
	case "hang":
		time.Sleep(time.Hour)
	case "hang-child":
		cmd := exec.Command(exe, "--fake-sleeper")
		if err := cmd.Start(); err != nil {
			fail(err)
		}
		_ = os.WriteFile(filepath.Join(dir, "child.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
		time.Sleep(time.Hour)
	case "crash":
		// Die of the signal, as a C program does, instead of the Go
		// runtime's exit status 2.
		debug.SetTraceback("crash")
		_ = syscall.Kill(os.Getpid(), syscall.SIGSEGV)
		time.Sleep(time.Hour)
	case "garbage":
		noise := make([]byte, 4096)
		for i := range noise {
			noise[i] = byte(i*7 + 3)
		}
		for n := 0; n < bh.Bytes; n += len(noise) {
			os.Stdout.Write(noise)
		}
	}
	os.Exit(bh.Exit)
}

// parseArgs finds the host (the one positional argument) and -p.
func parseArgs(args []string) (host string, port int) {
	port = 18515
	withValue := map[string]bool{"-d": true, "-i": true, "-x": true, "-s": true, "-n": true, "-D": true, "-p": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case withValue[a] && i+1 < len(args):
			if a == "-p" {
				port, _ = strconv.Atoi(args[i+1])
			}
			i++
		case len(a) > 0 && a[0] == '-':
		default:
			host = a
		}
	}
	return host, port
}

func fds() []string {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"->"+target)
	}
	return out
}

func pgid() int {
	g, _ := syscall.Getpgid(0)
	return g
}

func record(dir string, c Call) {
	b, _ := json.Marshal(c)
	f, err := os.OpenFile(filepath.Join(dir, "calls.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	_, _ = f.Write(append(b, '\n'))
}

func readFile(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		fail(err)
	}
	return string(b)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fakeperftest:", err)
	os.Exit(99)
}
