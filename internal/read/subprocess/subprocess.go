// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package subprocess runs the diagnostic programs rdma_doctor depends on
// (sminfo, iblinkinfo) the one safe way: no shell, a hard timeout, output
// capped, the whole process group killed whenever the program ends (on
// success too: a child it forked must not outlive it), what left the
// group killed by the Reaper where there is one, and always reaped, so a
// hung MAD query can neither hold a scrape nor leave a process behind.
package subprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec is one run of a program.
type Spec struct {
	// Path is the executable: a path, or a name looked up in $PATH.
	Path string
	Args []string
	// Timeout bounds the run; 0 means only the context bounds it.
	Timeout time.Duration
	// Stdout, when set, consumes standard output while the program runs, so
	// a large output is parsed in one pass instead of being held in memory.
	// It must read until EOF or return an error; on error the process group
	// is killed.
	Stdout func(io.Reader) error
	// MaxOutput bounds standard output (default DefaultMaxOutput), whether
	// it is kept (Stdout nil) or streamed to Stdout: past it the process
	// group is killed at once and Run returns ErrOutputTooLarge, so a
	// runaway program costs neither memory nor the time to its timeout.
	MaxOutput int
	// MaxStderr bounds standard error the same way (default
	// DefaultMaxStderr). Only its first StderrKeep bytes are kept.
	MaxStderr int
	// StderrKeep is how much of standard error Result.Stderr keeps
	// (default 4 KiB, a tool's error message): more for a tool that
	// reports one line per failed query (ibqueryerrors).
	StderrKeep int
	// Env replaces the environment when non-nil.
	Env []string
	// Reaper, when set, starts the program, and when it exits kills what
	// it left outside its process group (setsid, setpgid): see Reaper.
	Reaper *Reaper
}

// Default output limits. sminfo prints a few hundred bytes and its
// failures a few lines, so 1 MiB is far past anything a working tool
// writes; a caller that expects more (iblinkinfo) sets its own.
const (
	DefaultMaxOutput = 1 << 20
	DefaultMaxStderr = 1 << 20
)

// Result is what a finished run produced.
type Result struct {
	// Stdout is the standard output when Spec.Stdout was nil.
	Stdout []byte
	// Stderr is the head of standard error (at most Spec.StderrKeep).
	Stderr   []byte
	Duration time.Duration
}

// ErrTimeout is returned (wrapped) when the program ran past its timeout and
// was killed.
var ErrTimeout = errors.New("timed out")

// ErrOutputTooLarge is returned (wrapped) when the program wrote more than
// MaxOutput to standard output or MaxStderr to standard error.
var ErrOutputTooLarge = errors.New("output larger than limit")

// ErrEscaped is returned (wrapped) when a process the program started
// left its process group, so the group kill missed it, and kept the output
// open after the program exited.
var ErrEscaped = errors.New("a child escaped the process group")

// ErrNotFound is exec.ErrNotFound, returned (wrapped) when the program is
// not in $PATH, and ExitError is exec.ExitError, a program that ran and
// exited non-zero: callers classify Run's errors with them without
// importing os/exec, which stays in this package (golangci's depguard).
var ErrNotFound = exec.ErrNotFound

// ExitError is exec.ExitError; see ErrNotFound.
type ExitError = exec.ExitError

const stderrKeep = 4 << 10

// waitDelay bounds how long output pipes are drained after the group was
// killed: only a process that left the group (setsid) can still hold them.
const waitDelay = 2 * time.Second

// Run runs spec to completion. A non-zero exit status is an error that
// carries the last line of standard error, which is where the
// infiniband-diags tools say what went wrong.
func Run(ctx context.Context, spec Spec) (Result, error) {
	var res Result
	path, err := exec.LookPath(spec.Path)
	if err != nil {
		return res, fmt.Errorf("%s: %w", spec.Path, err)
	}
	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	g := &group{}
	begin := time.Now()
	cmd, rd, stderr, err := start(path, spec, g)
	if err != nil {
		return res, fmt.Errorf("%s: %w", spec.Path, err)
	}
	defer rd.Close()
	gone := g.watch(ctx, rd, cmd.Process.Pid, spec.Reaper)

	stdout := &capReader{r: rd, limit: limitOr(spec.MaxOutput, DefaultMaxOutput), over: g.kill}
	consumeErr := consume(spec.Stdout, stdout, &res)
	if consumeErr != nil {
		// Stop the program now rather than letting it block on a full
		// pipe until the timeout.
		g.kill()
	}
	// A consumer that stopped early must not leave the program blocked
	// on a full pipe; the cap still holds while draining.
	_, _ = io.Copy(io.Discard, stdout)
	<-gone
	g.reaping()
	waitErr := cmd.Wait()
	spec.Reaper.forget(cmd.Process.Pid)
	res.Duration = time.Since(begin)
	res.Stderr = stderr.Bytes()
	return res, runError(ctx, spec, stdout, stderr, consumeErr, waitErr, res)
}

// start starts the program in a process group of its own, with standard
// output on a pipe whose read end it returns, and standard error capped.
func start(path string, spec Spec, g *group) (*exec.Cmd, *os.File, *capWriter, error) {
	// A pipe of our own rather than exec's StdoutPipe, which Wait closes:
	// here the consumer reads to the end even while the program is being
	// reaped.
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Stdout = wr
	// Its own process group, so the kill reaches anything it forked.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = waitDelay
	stderr := &capWriter{keep: limitOr(spec.StderrKeep, stderrKeep), limit: limitOr(spec.MaxStderr, DefaultMaxStderr), over: g.kill}
	cmd.Stderr = stderr
	err = spec.Reaper.Start(cmd)
	wr.Close() // the child holds its own copy; ours would keep EOF away
	if err != nil {
		rd.Close()
		return nil, nil, nil, err
	}
	g.started(cmd.Process.Pid)
	return cmd, rd, stderr, nil
}

// consume reads standard output: into res.Stdout, or through the
// caller's consumer.
func consume(f func(io.Reader) error, r *capReader, res *Result) error {
	if f != nil {
		return f(r)
	}
	b, err := io.ReadAll(r)
	res.Stdout = b
	return err
}

// runError is the error of a finished run, most telling cause first: a
// timeout or cancellation explains everything after it, an exceeded limit
// explains the consumer's error and the kill.
func runError(ctx context.Context, spec Spec, stdout *capReader, stderr *capWriter, consumeErr, waitErr error, res Result) error {
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: %w after %s, process group killed", spec.Path, ErrTimeout, spec.Timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", spec.Path, ctx.Err())
	case stdout.exceeded():
		return fmt.Errorf("%s: %w: more than %d bytes on standard output, process group killed", spec.Path, ErrOutputTooLarge, stdout.limit)
	case stderr.exceeded():
		return fmt.Errorf("%s: %w: more than %d bytes on standard error, process group killed", spec.Path, ErrOutputTooLarge, stderr.limit)
	case errors.Is(consumeErr, os.ErrDeadlineExceeded) || errors.Is(waitErr, exec.ErrWaitDelay):
		return fmt.Errorf("%s: %w: its output was still held open %s after it exited, by a process that left its process group", spec.Path, ErrEscaped, waitDelay)
	case consumeErr != nil:
		return fmt.Errorf("%s: %w", spec.Path, consumeErr)
	case waitErr != nil:
		if msg := failureLine(res.Stdout, res.Stderr); msg != "" {
			return fmt.Errorf("%s: %w: %s", spec.Path, waitErr, msg)
		}
		return fmt.Errorf("%s: %w", spec.Path, waitErr)
	}
	return nil
}

func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// group is a started program's process group. Its id is the leader's pid,
// which stays reserved for the group only until the leader is reaped: kill
// is a no-op from then on, so it can never hit an unrelated process that
// was given the same number.
type group struct {
	mu  sync.Mutex
	pid int
	// early is a kill asked for before the pid was known: standard error
	// is copied from inside cmd.Start, so its limit can pass first.
	early  bool
	reaped bool
}

func (g *group) started(pid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pid = pid
	if g.early {
		_ = syscall.Kill(-g.pid, syscall.SIGKILL)
	}
}

func (g *group) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.reaped:
	case g.pid == 0:
		g.early = true
	default:
		_ = syscall.Kill(-g.pid, syscall.SIGKILL)
	}
}

// reaping marks the point after which the leader may be reaped.
func (g *group) reaping() {
	g.mu.Lock()
	g.reaped = true
	g.mu.Unlock()
}

// watch kills the group when the leader exits, whatever its status, and
// when ctx ends, and then has the reaper (if any) kill what escaped the
// group; the returned channel is closed once the leader has exited (it is
// not reaped yet). After the kill, output pipes get waitDelay to drain,
// which only a process that escaped the group and the reaper can hold up.
func (g *group) watch(ctx context.Context, stdout *os.File, pid int, r *Reaper) <-chan struct{} {
	gone := make(chan struct{})
	pipe := pipeInode(stdout)
	go func() {
		awaitExit(pid)
		g.kill()
		r.exited(pid)
		r.sweep(ending{pgid: pid, pipe: pipe})
		_ = stdout.SetReadDeadline(time.Now().Add(waitDelay))
		close(gone)
	}()
	go func() {
		select {
		case <-ctx.Done():
			g.kill()
		case <-gone:
		}
	}()
	return gone
}

// awaitExit blocks until pid has exited, leaving it a zombie (WNOWAIT):
// until Wait reaps it, its pid, and so its group id, cannot be reused.
func awaitExit(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// failureLine is the line that says what failed: the last "iberror:" line
// (infiniband-diags' fatal message, which IBEXIT prints on standard
// output), else the last line of standard error, else of standard output;
// trimmed and bounded.
func failureLine(stdout, stderr []byte) string {
	var s string
	for _, b := range [][]byte{stdout, stderr} {
		lines := strings.Split(string(b), "\n")
		for i := len(lines) - 1; i >= 0 && s == ""; i-- {
			if strings.Contains(lines[i], "iberror:") {
				s = strings.TrimSpace(lines[i])
			}
		}
	}
	if s == "" {
		s = lastLine(stderr)
	}
	if s == "" {
		s = lastLine(stdout)
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return WithoutPID(s)
}

// WithoutPID replaces the process id in libibmad's "ibwarn: [31250] ..."
// with "[pid]": the same failure then reads the same every run, and is
// logged once.
func WithoutPID(s string) string { return pidTag.ReplaceAllString(s, "[pid]") }

var pidTag = regexp.MustCompile(`\[[0-9]+\]`)

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// capReader passes at most limit bytes through; on the first byte past it
// it calls over (the group kill) and from then on fails every read.
type capReader struct {
	r     io.Reader
	limit int
	n     int
	over  func()
	mu    sync.Mutex
	past  bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.exceeded() {
		return 0, fmt.Errorf("%w (%d bytes)", ErrOutputTooLarge, c.limit)
	}
	n, err := c.r.Read(p)
	if c.n+n <= c.limit {
		c.n += n
		return n, err
	}
	keep := c.limit - c.n
	c.n = c.limit
	c.mu.Lock()
	c.past = true
	c.mu.Unlock()
	c.over()
	if keep > 0 {
		return keep, nil // the error comes with the next read
	}
	return 0, fmt.Errorf("%w (%d bytes)", ErrOutputTooLarge, c.limit)
}

func (c *capReader) exceeded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.past
}

// capWriter keeps the first keep bytes written and counts the rest; past
// limit it calls over (the group kill) once. It never fails a write, so
// the program is never killed by SIGPIPE instead.
type capWriter struct {
	keep, limit int
	over        func()
	mu          sync.Mutex
	buf         bytes.Buffer
	n           int
	past        bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if room := w.keep - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	w.n += len(p)
	first := w.n > w.limit && !w.past
	if first {
		w.past = true
	}
	w.mu.Unlock()
	if first {
		w.over()
	}
	return len(p), nil
}

func (w *capWriter) exceeded() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.past
}

func (w *capWriter) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Bytes()
}
