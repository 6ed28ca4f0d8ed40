// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package procstat reads the benchmarks' figures of a process from the
// text of /proc/PID/stat and /proc/PID/status: one parser for the
// side-by-side run, the fabric bench and the wake-up count.
package procstat

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of the times in /proc/PID/stat: 100 on
// every Linux architecture Go supports (the kernel fixes the user-visible
// value; sysconf(_SC_CLK_TCK) reports the same).
const ClockTicks = 100

// Times are a process's CPU times in clock ticks: its own (utime, stime)
// and those of the children it has reaped (cutime, cstime: a server's tool
// children, once waited for).
type Times struct {
	Utime, Stime, Cutime, Cstime uint64
}

// Self is the process's own CPU in seconds.
func (t Times) Self() float64 { return float64(t.Utime+t.Stime) / ClockTicks }

// WithChildren is the process's and its reaped children's CPU in seconds.
func (t Times) WithChildren() float64 {
	return float64(t.Utime+t.Stime+t.Cutime+t.Cstime) / ClockTicks
}

// ParseStat reads the times from the text of /proc/PID/stat. The command
// name (field 2) is in parentheses and may hold spaces and parentheses
// itself, so the fields are counted from the last ')'.
func ParseStat(stat []byte) (Times, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return Times{}, fmt.Errorf("stat %q: no command name", head(stat))
	}
	// After "pid (comm) " come state (field 3) ... utime (14), stime
	// (15), cutime (16), cstime (17).
	f := strings.Fields(string(stat[end+1:]))
	const first, last = 14 - 3, 17 - 3
	if len(f) <= last {
		return Times{}, fmt.Errorf("stat %q: %d fields after the name, want at least %d", head(stat), len(f), last+1)
	}
	var v [4]uint64
	for i, s := range f[first : last+1] {
		// cutime and cstime are signed in the kernel's format (long).
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return Times{}, fmt.Errorf("stat %q: time field %q", head(stat), s)
		}
		v[i] = uint64(n)
	}
	return Times{Utime: v[0], Stime: v[1], Cutime: v[2], Cstime: v[3]}, nil
}

// Switches are a thread's context switches from /proc/PID/task/TID/status:
// voluntary (it slept: a wake-up when it runs again) and nonvoluntary
// (preempted).
type Switches struct {
	Voluntary, Nonvoluntary uint64
}

// ParseSwitches reads voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches from the text of a status file.
func ParseSwitches(status []byte) (Switches, error) {
	var c Switches
	var seen int
	for line := range strings.SplitSeq(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case "voluntary_ctxt_switches":
			dst = &c.Voluntary
		case "nonvoluntary_ctxt_switches":
			dst = &c.Nonvoluntary
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return c, fmt.Errorf("%s: %w", k, err)
		}
		*dst = n
		seen++
	}
	if seen != 2 {
		return c, fmt.Errorf("status has no voluntary_ctxt_switches and nonvoluntary_ctxt_switches lines")
	}
	return c, nil
}

// StatusBytes is the "<n> kB" field key (VmRSS, VmHWM, RssAnon, ...) of
// the text of /proc/PID/status, in bytes.
func StatusBytes(status []byte, key string) (uint64, error) {
	for line := range strings.SplitSeq(string(status), "\n") {
		v, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("status %s %q: want \"<n> kB\"", key, v)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("status %s: %w", key, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("status has no %s line", key)
}

func head(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}
