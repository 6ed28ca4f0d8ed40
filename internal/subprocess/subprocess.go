// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package subprocess runs the diagnostic programs rdma_doctor depends on
// (sminfo, iblinkinfo) the one safe way: no shell, a hard timeout, the whole
// process group killed when it expires, and always reaped, so a hung MAD
// query can neither hold a scrape nor leave a zombie behind.
package subprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
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
	// MaxOutput bounds the standard output kept when Stdout is nil
	// (default 1 MiB); more is an error.
	MaxOutput int
	// Env replaces the environment when non-nil.
	Env []string
}

// Result is what a finished run produced.
type Result struct {
	// Stdout is the standard output when Spec.Stdout was nil.
	Stdout []byte
	// Stderr is the head of standard error (at most 4 KiB).
	Stderr   []byte
	Duration time.Duration
}

// ErrTimeout is returned (wrapped) when the program ran past its timeout and
// was killed.
var ErrTimeout = errors.New("timed out")

// ErrOutputTooLarge is returned (wrapped) when the output exceeded MaxOutput.
var ErrOutputTooLarge = errors.New("output larger than limit")

const stderrMax = 4 << 10

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
	cmd := exec.CommandContext(ctx, path, spec.Args...)
	cmd.Env = spec.Env
	// Its own process group, so the kill reaches anything it forked.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Before Wait has reaped the leader, its pid is still the group id.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// An orphan that inherited the pipes must not keep Wait waiting.
	cmd.WaitDelay = 2 * time.Second
	stderr := &headBuffer{max: stderrMax}
	cmd.Stderr = stderr

	var stdout *headBuffer
	var pipe io.ReadCloser
	if spec.Stdout == nil {
		max := spec.MaxOutput
		if max <= 0 {
			max = 1 << 20
		}
		stdout = &headBuffer{max: max}
		cmd.Stdout = stdout
	} else if pipe, err = cmd.StdoutPipe(); err != nil {
		return res, fmt.Errorf("%s: %w", spec.Path, err)
	}

	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("%s: %w", spec.Path, err)
	}
	var consumeErr error
	if pipe != nil {
		consumeErr = spec.Stdout(pipe)
		if consumeErr != nil {
			// Stop the program now rather than letting it block on a
			// full pipe until the timeout.
			_ = cmd.Cancel()
		}
		// Wait closes the pipe; drain first so a consumer that stopped
		// early cannot block the writer.
		_, _ = io.Copy(io.Discard, pipe)
	}
	waitErr := cmd.Wait()
	res.Duration = time.Since(begin)
	res.Stderr = stderr.Bytes()
	if stdout != nil {
		res.Stdout = stdout.Bytes()
	}

	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return res, fmt.Errorf("%s: %w after %s, process group killed", spec.Path, ErrTimeout, spec.Timeout)
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s: %w", spec.Path, ctx.Err())
	case consumeErr != nil:
		return res, fmt.Errorf("%s: %w", spec.Path, consumeErr)
	case waitErr != nil:
		if msg := failureLine(res.Stdout, res.Stderr); msg != "" {
			return res, fmt.Errorf("%s: %w: %s", spec.Path, waitErr, msg)
		}
		return res, fmt.Errorf("%s: %w", spec.Path, waitErr)
	case stdout != nil && stdout.over:
		return res, fmt.Errorf("%s: %w (%d bytes)", spec.Path, ErrOutputTooLarge, stdout.max)
	}
	return res, nil
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
	// "ibwarn: [31250] ..." carries the pid: without it, the same failure
	// reads the same every run, and is logged once.
	return pidTag.ReplaceAllString(s, "[pid]")
}

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

// headBuffer keeps the first max bytes written and notes whether more came.
// It never fails a write, so the program is never killed by SIGPIPE.
type headBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (h *headBuffer) Write(p []byte) (int, error) {
	room := h.max - h.buf.Len()
	if room < len(p) {
		h.over = true
		if room > 0 {
			h.buf.Write(p[:room])
		}
		return len(p), nil
	}
	h.buf.Write(p)
	return len(p), nil
}

func (h *headBuffer) Bytes() []byte { return h.buf.Bytes() }
