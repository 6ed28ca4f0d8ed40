// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrorKind classifies a failed run. perftest exits 1 for nearly every
// failure (7 for ib_read_bw without a device), so the kind comes from the
// message, not the status (research/perftest.md §1.9). An ErrorKind is an
// error itself, so errors.Is(err, perftest.RetryExceeded) works.
type ErrorKind string

// Error kinds. The strings are stable: they are the reason label of
// rdma_probe_failures_total and the "error" field of JSON output.
const (
	// NotInstalled: the perftest binary is not on the host.
	NotInstalled ErrorKind = "not_installed"
	// NoDevice: "Did not detect devices": no RDMA device or no driver.
	NoDevice ErrorKind = "no_device"
	// DeviceNotFound: "IB device mlx5_9 not found".
	DeviceNotFound ErrorKind = "device_not_found"
	// PortDown: "Port number 1 state is Down" (or any state but Active).
	PortDown ErrorKind = "port_down"
	// ConnectFailed: "Couldn't connect to HOST:PORT": nothing listens
	// there (connection refused) or the host is unreachable.
	ConnectFailed ErrorKind = "connect_failed"
	// PortInUse: the server could not listen on its TCP port.
	PortInUse ErrorKind = "port_in_use"
	// ExchangeFailed: the peer vanished while the two sides exchanged QP
	// data or reports.
	ExchangeFailed ErrorKind = "exchange_failed"
	// RetryExceeded: completion status 12, transport retry counter
	// exceeded: the path broke during traffic (cable, switch, far end).
	RetryExceeded ErrorKind = "retry_exceeded"
	// CompletionError: any other failed work completion.
	CompletionError ErrorKind = "completion_error"
	// Timeout: the run did not finish before its deadline and was killed,
	// or a send test's receiver got nothing for 120 s.
	Timeout ErrorKind = "timeout"
	// VersionMismatch: the peer runs a perftest this one refuses.
	VersionMismatch ErrorKind = "version_mismatch"
	// Usage: perftest rejected its options or printed its help.
	Usage ErrorKind = "usage"
	// BelowLimit: the -w/-y verifier limit was not met.
	BelowLimit ErrorKind = "below_limit"
	// NoReport: "Can't produce a report": no trustworthy CPU clock rate.
	NoReport ErrorKind = "no_report"
	// Crashed: the process died of a signal nobody sent it.
	Crashed ErrorKind = "crashed"
	// BadOutput: exit status 0 but no result table that parses.
	BadOutput ErrorKind = "bad_output"
	// Failed: a non-zero exit with no message this package knows.
	Failed ErrorKind = "failed"
	// Busy: another probe holds the device.
	Busy ErrorKind = "busy"
)

func (k ErrorKind) Error() string { return string(k) }

// Error is a failed perftest run.
type Error struct {
	Kind ErrorKind
	// Side is "server" or "client" when the runner knows it.
	Side string
	// Detail is the line that identified the kind, or a summary.
	Detail string
	// ExitCode is the exit status; -1 when killed by a signal.
	ExitCode int
	// Status is the work completion status of a completion error (12 is
	// retry exceeded), -1 otherwise.
	Status int
	// Stderr is the end of the process's stderr, for the operator.
	Stderr string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("perftest")
	if e.Side != "" {
		b.WriteString(" " + e.Side)
	}
	b.WriteString(": " + string(e.Kind))
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if e.ExitCode > 0 {
		fmt.Fprintf(&b, " (exit status %d)", e.ExitCode)
	}
	return b.String()
}

// Is makes errors.Is(err, kind) match an *Error of that kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(ErrorKind)
	return ok && k == e.Kind
}

// rules map stderr lines to kinds, in priority order: a completion error
// is followed by teardown noise, a port-down by "Couldn't get context".
var rules = []struct {
	re   *regexp.Regexp
	kind ErrorKind
}{
	{regexp.MustCompile(`Failed status`), CompletionError}, // refined below
	{regexp.MustCompile(`Completion with error`), CompletionError},
	{regexp.MustCompile(`not compatible with versions older than`), VersionMismatch},
	{regexp.MustCompile(`Did not detect devices`), NoDevice},
	{regexp.MustCompile(`IB device \S+ not found`), DeviceNotFound},
	{regexp.MustCompile(`Port number \d+ state is (?:Down|Init|Armed|Nop|Active_defer|\S+)`), PortDown},
	{regexp.MustCompile(`Couldn't connect to \S+`), ConnectFailed},
	{regexp.MustCompile(`Couldn't listen to port`), PortInUse},
	{regexp.MustCompile(`Did not get Message for \d+ Seconds`), Timeout},
	{regexp.MustCompile(`Unable to read (?:from|to) socket|Failed to exchange (?:data|Page Size|Cache Line)|Couldn't read remote address`), ExchangeFailed},
	{regexp.MustCompile(`BW result is below|MsgRate result is below`), BelowLimit},
	{regexp.MustCompile(`Can't produce a report`), NoReport},
	{regexp.MustCompile(`Parser function exited with Error|Invalid Command|unrecognized option|invalid option|please check that|Output verbosity level`), Usage},
}

// Completion status text: "Failed status 12: wr_id 0 syndrom 0x81" before
// 26.01, "Failed status-transport retry counter exceeded (12): wr_id ..."
// since.
var statusRe = regexp.MustCompile(`Failed status(?:-([^(:]*?)\s*\((\d+)\)|\s+(\d+))`)

// ibv_wc_status 12: IBV_WC_RETRY_EXC_ERR.
const wcRetryExceeded = 12

// Classify finds the kind of failure in a run's output. It looks at stderr
// first, then stdout (a recording may merge them, and help goes to stdout).
// It returns nil when nothing is recognised.
func Classify(stdout, stderr []byte) *Error {
	for _, text := range []string{string(stderr), string(stdout)} {
		for _, r := range rules {
			loc := r.re.FindStringIndex(text)
			if loc == nil {
				continue
			}
			e := &Error{Kind: r.kind, Detail: lineAt(text, loc[0]), Status: -1}
			if r.kind == CompletionError {
				if m := statusRe.FindStringSubmatch(text); m != nil {
					s := m[2]
					if s == "" {
						s = m[3]
					}
					e.Status, _ = strconv.Atoi(s)
					e.Detail = lineAt(text, strings.Index(text, m[0]))
					if e.Status == wcRetryExceeded {
						e.Kind = RetryExceeded
					}
				}
			}
			return e
		}
	}
	if strings.HasPrefix(strings.TrimSpace(string(stdout)), "Usage:") {
		return &Error{Kind: Usage, Detail: "perftest printed its usage", Status: -1}
	}
	return nil
}

func lineAt(text string, at int) string {
	start := strings.LastIndexByte(text[:at], '\n') + 1
	end := strings.IndexByte(text[at:], '\n')
	if end < 0 {
		end = len(text) - at
	}
	return strings.TrimSpace(text[start : at+end])
}

// Exit is how a process ended.
type Exit struct {
	Code int // -1 when signalled
	// Signal is the signal that ended it, "" when it exited.
	Signal string
	// Killed is true when the runner killed it (deadline or cancel).
	Killed bool
}

// Interpret turns one process's output and exit into a report or a typed
// error. A run can have both: a result table and a "below limit" exit.
func Interpret(stdout, stderr []byte, exit Exit) (*Report, error) {
	rep, perr := Parse(stdout)
	if exit.Code == 0 && exit.Signal == "" && !exit.Killed {
		if perr == nil {
			return rep, nil
		}
		if e := Classify(stdout, stderr); e != nil {
			e.Stderr = tail(stderr)
			return nil, e
		}
		return nil, &Error{Kind: BadOutput, Detail: perr.Error(), Status: -1, Stderr: tail(stderr)}
	}
	var e *Error
	switch {
	case exit.Killed:
		e = &Error{Kind: Timeout, Detail: "killed at the deadline", Status: -1}
		// What it printed before it hung says why: a client stuck in
		// connect() or a server nobody connected to.
		if c := Classify(stdout, stderr); c != nil && c.Kind != Usage {
			e.Detail += " after: " + c.Detail
		}
	case exit.Signal != "":
		e = &Error{Kind: Crashed, Detail: "killed by signal " + exit.Signal, Status: -1}
	default:
		e = Classify(stdout, stderr)
		if e == nil {
			e = &Error{Kind: Failed, Detail: lastLine(stderr), Status: -1}
		}
	}
	e.ExitCode = exit.Code
	e.Stderr = tail(stderr)
	if perr != nil {
		rep = nil
	}
	return rep, e
}

// tail keeps the last 1 KiB of stderr for logs and JSON output.
func tail(b []byte) string {
	const max = 1024
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}
