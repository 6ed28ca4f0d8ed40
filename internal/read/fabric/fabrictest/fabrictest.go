// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package fabrictest replays the infiniband-diags tools' recorded answers
// on a simulated fabric (internal/read/fabric/testdata/ibqueryerrors, README
// there) as executables, for tests of the fabric sweep, the fabric
// collector and the binary that need its tools but not a live simulator.
package fabrictest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The recorded fabric's switch GUIDs as its scan prints them.
const (
	Spine1 = "0x0000000000200000"
	Leaf1  = "0x0000000000200002"
	Leaf2  = "0x0000000000200003"
	Leaf3  = "0x0000000000200004"
	Leaf4  = "0x0000000000200005"
	// SwitchPorts is the recorded fabric's switch ports (six 8-port
	// switches).
	SwitchPorts = 48
)

// Recording is the path of a file in the recordings' directory.
func Recording(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "ibqueryerrors", name)
}

// Tools are replaying executables, paths for the --collector.fabric.*-path
// flags. Dir is where they log: every run's arguments, a run a line, in
// Dir/args, and every cache ibqueryerrors was handed, kept as
// Dir/loaded-N.
type Tools struct {
	IBLinkInfo, IBNetDiscover, IBQueryErrors, SMInfo string
	Dir                                              string
}

// Answers replace the recorded answer of an ibqueryerrors run: shell, run
// with the recordings at hand (Recording). Empty: the recorded answer.
type Answers struct {
	// Errors answers the errors run (without --counters); recorded: the
	// errors found, exit 1 as the real one.
	Errors string
	// Counters answers the --counters run; recorded: exit 0.
	Counters string
	// Cache is the recorded fabric cache ibnetdiscover --cache writes
	// (a path; empty: ibsim16.cache).
	Cache string
	// SMInfo answers sminfo, with $N the run's number (1, 2, ...);
	// recorded: a master SM (SMInfo, recorded on ibsim).
	SMInfo string
}

// SMInfo is the path of a recorded sminfo answer (fixtures/tools, README
// there): "master" (sminfo-master-ibsim.txt) and "failover"
// (sminfo-master-after-failover-ibsim.txt, another SM master).
func SMInfo(name string) string {
	_, file, _, _ := runtime.Caller(0)
	f := map[string]string{"master": "sminfo-master-ibsim.txt", "failover": "sminfo-master-after-failover-ibsim.txt"}[name]
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "fixtures", "tools", f)
}

// Install writes the replaying tools into a temporary directory: the
// recorded scan, the recorded fabric cache, and ibqueryerrors' recorded
// answers.
func Install(t testing.TB) Tools { return InstallWith(t, Answers{}) }

// InstallWith is Install with some of ibqueryerrors' answers replaced.
// Every tool prints umad2sim's attach notice on standard error, as the
// real ones did on the simulator.
func InstallWith(t testing.TB, a Answers) Tools {
	t.Helper()
	dir := t.TempDir()
	if a.Errors == "" {
		a.Errors = `cat ` + Recording("ibsim16-errors.stdout") + `; exit 1`
	}
	if a.Counters == "" {
		a.Counters = `cat ` + Recording("ibsim16-counters.stdout")
	}
	if a.Cache == "" {
		a.Cache = Recording("ibsim16.cache")
	}
	if a.SMInfo == "" {
		a.SMInfo = `cat ` + SMInfo("master")
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	attach := `cat ` + Recording("ibsim16-errors.stderr") + " >&2\n"
	return Tools{
		Dir:        dir,
		IBLinkInfo: write("iblinkinfo", attach+"cat "+Recording("ibsim16-iblinkinfo.stdout")+"\n"),
		IBNetDiscover: write("ibnetdiscover", `echo "ibnetdiscover $*" >>`+dir+`/args
`+attach+`prev=; for a; do [ "$prev" = --cache ] && cp `+a.Cache+` "$a"; prev=$a; done
cat `+Recording("ibsim16-ibnetdiscover.stdout")+"\n"),
		SMInfo: write("sminfo", `N=$(($(cat `+dir+`/sminfo-runs 2>/dev/null || echo 0) + 1)); echo $N >`+dir+`/sminfo-runs
`+attach+a.SMInfo+"\n"),
		IBQueryErrors: write("ibqueryerrors", `echo "ibqueryerrors $*" >>`+dir+`/args
prev=; counters=; for a; do [ "$prev" = --load-cache ] && cp "$a" `+dir+`/loaded-$(wc -l <`+dir+`/args); [ "$a" = --counters ] && counters=1; prev=$a; done
`+attach+`if [ -n "$counters" ]; then
`+a.Counters+`
else
`+a.Errors+`
fi
`),
	}
}
