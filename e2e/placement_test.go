// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlacementRemoteNUMA: the binary on the remote-NUMA host reports the
// mis-pinned IRQs, the single-CPU device, irqbalance and the PCIe link that
// trained below its maximum; --collector.irq.per-irq adds one series per
// IRQ, and the flag is off by default.
func TestPlacementRemoteNUMA(t *testing.T) {
	e := start(t, hostArgs(t, "numa-remote")...)
	_, body := e.get(t, "/metrics")
	for _, want := range []string{
		`rdma_device_irqs{device="mlx5_0"} 16`,
		`rdma_device_irqs_off_node{device="mlx5_0"} 16`,
		`rdma_device_irq_cpus{device="mlx5_0"} 16`,
		`rdma_device_irqs_off_node{device="mlx5_1"} 16`,
		`rdma_device_irq_cpus{device="mlx5_1"} 1`,
		`rdma_host_irqbalance_running 1`,
		`rdma_device_numa_node{device="mlx5_1"} 1`,
		`rdma_device_pci_info{device="mlx5_1",local_cpulist="16-31,48-61",pci_address="0000:c8:00.0"} 1`,
		`rdma_device_pcie_link_degraded{device="mlx5_1"} 1`,
		`rdma_scrape_collector_success{collector="irq"} 1`,
		`rdma_scrape_collector_success{collector="pci"} 1`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	if hasSeries(body, "rdma_device_irq_info") {
		t.Error("per-IRQ series without --collector.irq.per-irq")
	}

	e = start(t, append(hostArgs(t, "numa-remote"), "--collector.irq.per-irq")...)
	_, body = e.get(t, "/metrics")
	if n := strings.Count(body, "\nrdma_device_irq_info{"); n != 34 {
		t.Errorf("%d rdma_device_irq_info series with --collector.irq.per-irq, want 34 (2 × 17 vectors)", n)
	}
	if !hasSeries(body, `rdma_device_irq_off_node{device="mlx5_1",irq="216"} 1`) {
		t.Error("no per-IRQ off-node series for mlx5_1's last comp vector")
	}

	e = start(t, append(hostArgs(t, "numa-remote"), "--no-collector.irq", "--no-collector.pci")...)
	_, body = e.get(t, "/metrics")
	if hasSeries(body, "rdma_device_irqs") || hasSeries(body, "rdma_device_numa_node") {
		t.Error("--no-collector.irq/pci left their series")
	}
}

// TestPlacementBrokenHost: the torn /proc/interrupts line, the garbage
// numa_node and affinity take out only their own series, and the errors are
// logged once however often the host is scraped.
func TestPlacementBrokenHost(t *testing.T) {
	e := start(t, hostArgs(t, "broken")...)
	_, body := e.get(t, "/metrics")
	for _, want := range []string{
		`rdma_device_irqs{device="mlx5_0"} 16`,
		`rdma_device_irqs_off_node{device="mlx5_0"} 0`,
		`rdma_device_irqs{device="mlx5_2"} 16`,
		`rdma_device_numa_node{device="mlx5_0"} 0`,
		`rdma_scrape_collector_success{collector="irq"} 0`,
		`rdma_scrape_collector_success{collector="pci"} 0`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	for _, absent := range []string{
		`rdma_device_irqs{device="mlx5_1"}`,
		`rdma_device_irqs_off_node{device="mlx5_2"}`,
		`rdma_device_numa_node{device="mlx5_2"}`,
		`rdma_device_pcie_link_degraded{device="mlx5_3"}`,
	} {
		if hasSeries(body, absent) {
			t.Errorf("series for a broken input present: %s", absent)
		}
	}
	count := func(log string) int {
		n := 0
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "level=WARN") && (strings.Contains(l, "collector=irq") || strings.Contains(l, "collector=pci")) {
				n++
			}
		}
		return n
	}
	first := count(e.settledLog(3, count))
	if first != 3 {
		t.Errorf("%d irq/pci warnings after one scrape, want 3 (torn lines, garbage affinity, garbage numa_node):\n%s", first, e.stderr.String())
	}
	e.get(t, "/metrics")
	e.get(t, "/metrics")
	// Wait for the log to settle: a repeated warning would be on its way.
	if n := count(e.settledLog(0, count)); n != first {
		t.Errorf("irq/pci warnings grew from %d to %d over two more scrapes", first, n)
	}
}

// TestPlacementLargeInterrupts: the binary on the remote-NUMA host with
// 30,000 more IRQs (NVMe-style queues of another function) in its
// /proc/interrupts, 23 MB and past the 16 MiB a file may be read whole,
// still reports every IRQ series, with success: the file is streamed.
func TestPlacementLargeInterrupts(t *testing.T) {
	root := smCopyHost(t, "numa-remote")
	p := filepath.Join(root, "proc", "interrupts")
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := bytes.Cut(orig, []byte("\n"))
	ncpu := bytes.Count(header, []byte("CPU"))
	var filler bytes.Buffer
	for i := range 30000 {
		fmt.Fprintf(&filler, "%6d:", 100000+i)
		for c := range ncpu {
			fmt.Fprintf(&filler, " %10d", (i*7+c)%1000)
		}
		fmt.Fprintf(&filler, "  IR-PCI-MSIX-0000:01:00.0 %5d-edge      nvme0q%d\n", i, i)
	}
	// before the architecture lines, where the kernel prints numbered ones
	arch := bytes.Index(orig, []byte("\n NMI:"))
	if arch < 0 {
		t.Fatal("fixture has no NMI line")
	}
	big := append(append(append([]byte{}, orig[:arch+1]...), filler.Bytes()...), orig[arch+1:]...)
	if len(big) <= 16<<20 {
		t.Fatalf("%d bytes: the test needs a file past 16 MiB", len(big))
	}
	if err := os.WriteFile(p, big, 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, "--path.rootfs="+root)
	_, body := e.get(t, "/metrics")
	for _, want := range []string{
		`rdma_device_irqs{device="mlx5_0"} 16`,
		`rdma_device_irqs_off_node{device="mlx5_0"} 16`,
		`rdma_device_irq_cpus{device="mlx5_1"} 1`,
		`rdma_scrape_collector_success{collector="irq"} 1`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("%d-byte /proc/interrupts: missing %s", len(big), want)
		}
	}
}
