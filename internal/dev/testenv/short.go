// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package testenv

import "testing"

// Long skips a long test under -short (make short, the loop to run while
// editing: CONTRIBUTING.md), saying what it runs and where it runs in
// full. make test and make e2e run without -short, so in CI nothing is
// skipped here.
func Long(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(LongSkip + ": " + what)
	}
}

// LongSkip starts the message of a test Long skipped: the targets that
// run it.
const LongSkip = "-short: long, run by make e2e and make test"
