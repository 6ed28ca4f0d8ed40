// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package testenv is what tests share about the machine they run on: real
// peer programs (promtool, ibstat, sminfo, ...) and privileges that may be
// missing on a developer's machine but never in CI.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// SkipOrFail skips the test with msg on a developer's machine and fails it
// in CI (CI set), so nothing skips silently where it must run.
func SkipOrFail(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// RequireTool returns the path of a real program the test uses as a peer;
// msg says how to install it.
func RequireTool(tb testing.TB, name, msg string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipOrFail(tb, msg)
	}
	return p
}
