// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package perftest runs the linux-rdma perftest tools (ib_write_bw,
// ib_send_lat, ...) as subprocesses and parses what they print.
//
// The parser (Parse, Classify) turns stdout into typed results and stderr
// into typed errors for every perftest generation from the OFED-1.x era to
// 26.x (research/perftest.md §1.3-§1.10; the recorded outputs are in
// testdata/samples). The runner (Runner) starts server and client without a
// shell, from validated parameters, with a hard deadline and a kill of the
// whole process group, one probe at a time per device.
package perftest

import (
	"fmt"
	"sort"
	"strings"
)

// Test is one perftest tool, named as its binary ("ib_write_lat").
type Test string

// The tools the probe runs. Atomic tests are left out: they measure the
// HCA's atomic unit, not the link the guide's thresholds are about.
const (
	WriteBW  Test = "ib_write_bw"
	ReadBW   Test = "ib_read_bw"
	SendBW   Test = "ib_send_bw"
	WriteLat Test = "ib_write_lat"
	ReadLat  Test = "ib_read_lat"
	SendLat  Test = "ib_send_lat"
)

// Tests lists every supported test, bandwidth first.
var Tests = []Test{WriteBW, ReadBW, SendBW, WriteLat, ReadLat, SendLat}

// ParseTest validates a test name.
func ParseTest(s string) (Test, error) {
	for _, t := range Tests {
		if string(t) == s {
			return t, nil
		}
	}
	names := make([]string, len(Tests))
	for i, t := range Tests {
		names[i] = string(t)
	}
	sort.Strings(names)
	return "", fmt.Errorf("unknown perftest test %q (want one of %s)", s, strings.Join(names, ", "))
}

// Bandwidth reports whether t is a bandwidth test (its result is a
// bandwidth table); otherwise it is a latency test.
func (t Test) Bandwidth() bool { return strings.HasSuffix(string(t), "_bw") }

// Binary is the executable name.
func (t Test) Binary() string { return string(t) }

// ServerPrintsResult reports whether the server side of t prints a result
// table too. ib_read_lat's server prints only a rule and exits
// (research/perftest.md §1.5); send_bw's server prints a row without peak.
func (t Test) ServerPrintsResult() bool { return t != ReadLat }
