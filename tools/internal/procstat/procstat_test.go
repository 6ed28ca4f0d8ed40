// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package procstat

import (
	"os"
	"strings"
	"testing"
)

// A /proc/PID/stat line recorded on the development VM (a long-running
// server that has reaped children: cutime 168177, cstime 145086 ticks),
// its command name given a space and parentheses as comm allows.
const recordedStat = "1 (process (api) x) S 0 0 0 0 -1 4194560 60283 50156879 0 7776 920 2309 168177 145086 10 -10 18 0 20 51372032 3100 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

func TestStatCPUCountsReapedChildren(t *testing.T) {
	got, err := ParseStat([]byte(recordedStat))
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(920+2309+168177+145086) / ClockTicks; got.WithChildren() != want {
		t.Errorf("WithChildren = %v, want %v (utime+stime+cutime+cstime)", got.WithChildren(), want)
	}
	if want := float64(920+2309) / ClockTicks; got.Self() != want {
		t.Errorf("Self = %v, want %v (utime+stime)", got.Self(), want)
	}
	for _, bad := range []string{"1 no name S 0", "1 (x) S 0 0 0", strings.Replace(recordedStat, "168177", "-1", 1)} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q): no error", bad)
		}
	}
}

// A command name with spaces and a ')' of its own; short or garbled lines.
func TestParseStatOddNames(t *testing.T) {
	got, err := ParseStat([]byte("77 (a b) c) R 1 77 77 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1 1 1 1"))
	if err != nil || got.Utime+got.Stime != 11 {
		t.Errorf("odd comm: %+v, %v; want 11 ticks", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 7 0 0"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStatusBytes(t *testing.T) {
	got, err := StatusBytes([]byte("Name:\tnode_exporter\nVmPeak:\t 1262348 kB\nVmRSS:\t   17284 kB\nRssAnon:\t 9000 kB\n"), "VmRSS")
	if err != nil || got != 17284*1024 {
		t.Errorf("%d, %v", got, err)
	}
	if _, err := StatusBytes([]byte("VmRSS:\t1 kB\n"), "RssAnon"); err == nil {
		t.Error("a missing RssAnon accepted")
	}
	for _, bad := range []string{"Name: x\n", "VmRSS: 12 MB\n", "VmRSS: lots kB\n"} {
		if _, err := StatusBytes([]byte(bad), "VmRSS"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestOwnStat reads this process's own file: the real kernel format.
func TestOwnStat(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseStat(b); err != nil {
		t.Error(err)
	}
}
