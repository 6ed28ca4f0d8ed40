// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKernelLogEvents puts a file in /dev/kmsg's record format below a
// copied host's root: a Link down already there when the server starts
// (ring-buffer history), then a firmware fatal error and a forged
// user-space copy of it appended while it runs. The live fatal event of
// mlx5_0's PCI function reaches /metrics as rdma_kernel_events_total,
// /diagnose fails kernel.events for mlx5_0 with the message, and the
// history is exported apart.
func TestKernelLogEvents(t *testing.T) {
	root := smCopyHost(t, "cx6-hdr-fdr")
	link, err := os.Readlink(filepath.Join(root, "sys/class/infiniband/mlx5_0"))
	if err != nil {
		t.Fatal(err)
	}
	// .../0000:3b:00.0/infiniband/mlx5_0: the PCI function is two up.
	pci := filepath.Base(filepath.Dir(filepath.Dir(link)))
	kmsg := filepath.Join(root, "dev", "kmsg")
	// A real message (testdata/recorded.txt) on mlx5_0's function.
	smWriteFile(t, kmsg, fmt.Sprintf("6,100,18865848172,-;mlx5_core %s enp1s0f0np0: Link down\n SUBSYSTEM=pci\n DEVICE=+pci:%s\n", pci, pci))
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, "--path.rootfs="+root, "--config.file="+cfg, "--collector.kmsg.interval=50ms")
	body := smWaitFor(t, e.addr, `rdma_kernel_events_history{device="mlx5_0",event="link_down",severity="info"} 1`)
	for _, want := range []string{
		`rdma_kernel_log_reading{reason=""} 1`,
		`rdma_kernel_events_total{device="mlx5_0",event="link_down",severity="info"} 0`,
		`rdma_kernel_events_total{device="mlx5_0",event="fw_fatal_error",severity="fatal"} 0`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	f, err := os.OpenFile(kmsg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "3,101,900000000,-;mlx5_core %s: poll_health:817:(pid 0): Fatal error 1 detected\n SUBSYSTEM=pci\n DEVICE=+pci:%s\n", pci, pci)
	fmt.Fprintf(f, "14,102,900000001,-;mlx5_core %s: poll_health:817:(pid 0): Fatal error 1 detected\n", pci)
	f.Close()
	body = smWaitFor(t, e.addr, `rdma_kernel_events_total{device="mlx5_0",event="fw_fatal_error",severity="fatal"} 1`)
	if !hasSeries(body, `rdma_kernel_log_records_total 3`) {
		t.Errorf("want 3 records read:\n%s", smGrep(body, "rdma_kernel_"))
	}
	smWaitFor(t, e.addr, `rdma_diagnose_status{check="kernel.events",target="mlx5_0"} 2`)
	if !hasSeries(body, `rdma_diagnose_status{check="kernel.events",target="mlx5_1"} 0`) {
		// The diagnose sampler may not have run since; the page decides.
		t.Log("mlx5_1 not yet judged in this scrape")
	}
	_, page := e.get(t, "/diagnose?format=json")
	if !strings.Contains(page, `"check": "kernel.events"`) || !strings.Contains(page, "Fatal error 1 detected") ||
		!strings.Contains(page, "fw_fatal_error (fatal) 1 time(s) since rdma_doctor started") {
		t.Errorf("/diagnose has no kernel.events failure with the message:\n%.3000s", page)
	}
}

// TestKernelLogUnreadable: without /dev/kmsg the reader says why, once,
// and exports no event series.
func TestKernelLogUnreadable(t *testing.T) {
	e := start(t, hostArgs(t, "cx6-hdr-fdr")...)
	_, body := e.get(t, "/metrics")
	if !hasSeries(body, `rdma_kernel_log_reading{reason="absent"} 0`) || strings.Contains(body, "rdma_kernel_events_total{") {
		t.Errorf("want the reason and no event series:\n%s", smGrep(body, "rdma_kernel_"))
	}
	if n := strings.Count(e.stderr.String(), "cannot read the kernel log"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, e.stderr.String())
	}
}
