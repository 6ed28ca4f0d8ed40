// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// renderChildEnv makes the test binary, run again, the child of
// TestFabricRenderPeak: it renders a fabric of that many copies of the
// recorded one and prints what it measured.
const renderChildEnv = "RDMA_DOCTOR_RENDER_COPIES"

// statusBytes is field (VmRSS, VmHWM) of /proc/self/status, in bytes.
func statusBytes(t testing.TB, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == field+":" && f[2] == "kB" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// renderFigures are what a child measured: the fabric's switch ports,
// the resident set with the scan and sweep in memory before the render,
// the peak of the render (VmHWM, reset before it), and the live heap the
// rendered Blocks keep.
type renderFigures struct {
	ports              int
	before, peak, kept int64
}

func runRenderChild(t *testing.T, copies int) renderFigures {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFabricRenderChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), renderChildEnv+"="+strconv.Itoa(copies))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child rendering %d copies: %v\n%s", copies, err, out)
	}
	var fig renderFigures
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		if _, err := fmt.Sscanf(strings.TrimSpace(sc.Text()), "render: %d %d %d %d", &fig.ports, &fig.before, &fig.peak, &fig.kept); err == nil {
			return fig
		}
	}
	t.Fatalf("the child printed no figures:\n%s", out)
	return fig
}

// TestFabricRenderChild is the child of TestFabricRenderPeak. Run on its
// own it measures the recorded fabric once (one copy, 48 switch ports),
// so the measuring the parent relies on is checked in every run.
func TestFabricRenderChild(t *testing.T) {
	copies, err := strconv.Atoi(os.Getenv(renderChildEnv))
	child := err == nil
	if !child {
		copies = 1
	}
	f, sw, opts := copiedFabric(t, copies)
	runtime.GC()
	debug.FreeOSMemory()
	before := statusBytes(t, "VmRSS")
	heapBefore := liveHeap()
	// Writing 5 to clear_refs resets the peak resident set (VmHWM) to
	// the current one (proc(5)): the peak below is the render's.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	blocks := collector.FabricBlocks(f, sw, opts)
	peak := statusBytes(t, "VmHWM")
	runtime.GC()
	kept := int64(liveHeap()) - int64(heapBefore)
	runtime.KeepAlive(blocks)
	runtime.KeepAlive(f)
	runtime.KeepAlive(sw)
	if !child {
		if ports := countSwitchPorts(sw); ports != 48 || before <= 0 || peak < before/2 {
			t.Errorf("the recorded fabric measured %d switch ports, RSS %d before, peak %d, %d bytes kept: want 48 ports and a peak no lower than half the RSS before (VmHWM reset to it)", ports, before, peak, kept)
		}
		return
	}
	fmt.Printf("render: %d %d %d %d\n", countSwitchPorts(sw), before, peak, kept)
}

// TestFabricRenderPeak renders the per-port and per-link series of
// fabrics of about 10,000 and 48,000 switch ports (copies of the
// recorded ibsim fabric) in a child process each and reads its peak
// resident set (VmHWM), so that docs/subnet-manager.md's supported size
// and the Helm chart's fabric limits come from a measured figure.
func TestFabricRenderPeak(t *testing.T) {
	testenv.Long(t, "48,000 switch ports")
	for _, copies := range []int{fabricCopies, 1000} {
		fig := runRenderChild(t, copies)
		t.Logf("%d switch ports: RSS %.1f MB with the scan and sweep, render peak %.1f MB (VmHWM), Blocks keep %.1f MB of heap; %.0f bytes a switch port at the peak",
			fig.ports, float64(fig.before)/1e6, float64(fig.peak)/1e6, float64(fig.kept)/1e6, float64(fig.peak)/float64(fig.ports))
	}
}
