// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package fabrictest replays the infiniband-diags tools' recorded answers
// on a simulated fabric (internal/fabric/testdata/ibqueryerrors, README
// there) as executables, for tests of the fabric collector and of the
// binary that need its tools but not a live simulator.
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
// flags.
type Tools struct {
	IBLinkInfo, IBNetDiscover, IBQueryErrors string
}

// Install writes the replaying tools into a temporary directory: the
// recorded scan, the recorded fabric cache, and ibqueryerrors' recorded
// answers (errors run, exit 1 as the real one; data counters run).
func Install(t testing.TB) Tools {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Tools{
		IBLinkInfo: write("iblinkinfo", "cat "+Recording("ibsim16-iblinkinfo.stdout")+"\n"),
		IBNetDiscover: write("ibnetdiscover", `prev=; for a; do [ "$prev" = --cache ] && cp `+Recording("ibsim16.cache")+` "$a"; prev=$a; done
cat `+Recording("ibsim16-ibnetdiscover.stdout")+"\n"),
		IBQueryErrors: write("ibqueryerrors", `case " $* " in
*" --counters "*) cat `+Recording("ibsim16-counters.stdout")+` ;;
*) cat `+Recording("ibsim16-errors.stdout")+`; exit 1 ;;
esac
`),
	}
}
