// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command testsummary reads `go test -json` on standard input and prints
// what `go test` prints without -v (a line per package, the output of
// failing tests), then ends with the list of skipped tests and why, so a
// test that could not run on this machine is seen rather than hidden behind
// an "ok". It exits 1 when a test, a package or a build failed.
//
//	go test -json ./... | go run ./tools/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail (Go 1.24+)
}

// skipped is a test that was skipped and the reason it logged.
type skipped struct {
	pkg, test, reason string
}

type summary struct {
	out     io.Writer
	failed  bool
	buf     map[string][]string // per package/test: output lines until the test ends
	skipped []skipped
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, buf: map[string][]string{}}
}

// line handles one input line; a line that is not a JSON event (a build
// error printed by the go command, say) is passed through.
func (s *summary) line(l string) {
	var e event
	if !strings.HasPrefix(l, "{") || json.Unmarshal([]byte(l), &e) != nil {
		fmt.Fprintln(s.out, l)
		return
	}
	key := e.Package + " " + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
	case "build-fail":
		s.failed = true
	case "output":
		if e.Test == "" {
			// Package lines: "ok", "FAIL", "?", panics. The bare "PASS" of a
			// passing package is noise without -v.
			if e.Output != "PASS\n" {
				fmt.Fprint(s.out, e.Output)
			}
			return
		}
		s.buf[key] = append(s.buf[key], e.Output)
	case "fail":
		s.failed = true
		if e.Test != "" {
			for _, o := range s.buf[key] {
				if !isProgress(o) {
					fmt.Fprint(s.out, o)
				}
			}
		}
		delete(s.buf, key)
	case "skip":
		if e.Test != "" {
			s.skipped = append(s.skipped, skipped{e.Package, e.Test, reason(s.buf[key])})
		}
		delete(s.buf, key)
	case "pass":
		delete(s.buf, key)
	}
}

// isProgress tells the lines test2json adds in verbose mode from the test's
// own output.
func isProgress(o string) bool {
	t := strings.TrimSpace(o)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// reason is what a skipped test logged, without test2json's own lines.
func reason(lines []string) string {
	var r []string
	for _, o := range lines {
		t := strings.TrimSpace(o)
		if t == "" || isProgress(o) || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		r = append(r, t)
	}
	if len(r) == 0 {
		return "(no reason given)"
	}
	return strings.Join(r, " ")
}

// report ends the output with the skipped tests, sorted, one per line.
func (s *summary) report() {
	sort.Slice(s.skipped, func(i, j int) bool {
		a, b := s.skipped[i], s.skipped[j]
		if a.pkg != b.pkg {
			return a.pkg < b.pkg
		}
		return a.test < b.test
	})
	if len(s.skipped) == 0 {
		fmt.Fprintln(s.out, "\nskipped: none")
		return
	}
	fmt.Fprintf(s.out, "\nskipped: %d test(s)\n", len(s.skipped))
	for _, k := range s.skipped {
		fmt.Fprintf(s.out, "  %s %s: %s\n", strings.TrimPrefix(k.pkg, "github.com/rdma-doctor/rdma_doctor/"), k.test, k.reason)
	}
}

func run(in io.Reader, out io.Writer) (failed bool, err error) {
	s := newSummary(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		s.line(sc.Text())
	}
	s.report()
	return s.failed, sc.Err()
}

func main() {
	failed, err := run(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary: reading go test -json:", err)
		os.Exit(1)
	}
	if failed {
		fmt.Println("FAIL: see the failing tests above")
		os.Exit(1)
	}
}
