// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// The counter of mlx5_0 on dgx-h100 that the hang tests wedge, as the
// FUSE server sees it (the class link resolved).
const wedged = "sys/devices/pci0000:19/0000:19:01.0/0000:1a:00.0/infiniband/mlx5_0/ports/1/counters/symbol_error"

// slowfsMount serves a fixture host through tools/slowfs with reads of
// wedged blocked until released (SIGUSR1), as a sysfs read stuck in a
// wedged driver would be. It returns the mount and the server process.
func slowfsMount(t *testing.T, host string) (string, *exec.Cmd) {
	t.Helper()
	return slowfsMountTree(t, filepath.Join(repoRoot(t), "fixtures", "hosts", host), wedged)
}

// slowfsMountTree serves the host tree at tree through tools/slowfs with
// reads of the paths matching block (path.Match patterns relative to the
// tree) blocked until released, as slowfsMount does.
func slowfsMountTree(t *testing.T, tree string, block ...string) (string, *exec.Cmd) {
	t.Helper()
	testenv.Long(t, "waits out reads hung in a FUSE tree (tools/slowfs)")
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "the hang test mounts a FUSE tree: run as root (CI does)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.SkipOrFail(t, "the hang test needs /dev/fuse: "+err.Error())
	}
	bin := filepath.Join(t.TempDir(), "slowfs")
	if out, err := exec.Command("go", "build", "-o", bin, "../tools/slowfs").CombinedOutput(); err != nil {
		t.Fatalf("building slowfs: %v\n%s", err, out)
	}
	mnt := t.TempDir()
	args := []string{"-tree", tree, "-mount", mnt, "-counter-delay", "0", "-hw-refresh-delay", "0", "-other-delay", "0"}
	for _, b := range block {
		args = append(args, "-block", b)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGUSR1) // release what still waits
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(mnt, "sys", "class", "infiniband")); err == nil {
			return mnt, cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("slowfs did not mount within 30 s")
		}
	}
}

// threads is the number of threads of a process.
func threads(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads: line")
	return 0
}

// TestHungReadCostsOneFile: with one counter's read stuck forever, the
// server listens, every scrape answers with every other series (the
// wedged counter absent, counted as stuck), the threads stay flat over
// 150 scrapes instead of growing by one per scrape, and SIGTERM still
// ends the process.
func TestHungReadCostsOneFile(t *testing.T) {
	mnt, _ := slowfsMount(t, "dgx-h100")
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, "--path.rootfs="+mnt, "--config.file="+cfg, "--scrape.timeout=2s", "--collector.sm.sminfo-path=/nonexistent/sminfo")

	var first int
	for i := 1; i <= 150; i++ {
		code, body := e.get(t, "/metrics")
		if code != 200 {
			t.Fatalf("scrape %d: HTTP %d", i, code)
		}
		if i == 1 {
			continue // the first may wait out the stuck read's device
		}
		for _, want := range []string{
			`rdma_port_symbol_errors_total{device="mlx5_1",port="1"}`,
			`rdma_port_link_downed_total{device="mlx5_0",port="1"}`,
			`rdma_device_numa_node{device="mlx5_0"}`,
		} {
			if !strings.Contains(body, want) {
				t.Fatalf("scrape %d lost %s\n%s", i, want, e.stderr.String())
			}
		}
		if strings.Contains(body, `rdma_port_symbol_errors_total{device="mlx5_0",port="1"}`) {
			t.Fatalf("scrape %d: the wedged counter has a value", i)
		}
		if i == 30 {
			first = threads(t, e.cmd.Process.Pid)
		}
		if i == 150 {
			if !strings.Contains(body, "rdma_host_reads_stuck 1") {
				t.Errorf("rdma_host_reads_stuck is not 1 after 150 scrapes")
			}
			// A thread per scrape would be 120 more; the runtime may
			// start a few for its own work on a loaded machine.
			if n := threads(t, e.cmd.Process.Pid); n > first+20 {
				t.Errorf("threads %d after 30 scrapes, %d after 150: a thread per scrape leaks", first, n)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		for {
			if err := e.cmd.Process.Signal(syscall.Signal(0)); err != nil {
				close(exited)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("SIGTERM did not end the server while a read was stuck\n%s", e.stderr.String())
	}
}

// hungSeries are series of other files than the wedged one, which every
// scrape must keep, on mlx5_0 itself and on another device.
var hungSeries = []string{
	`rdma_port_symbol_errors_total{device="mlx5_1",port="1"}`,
	`rdma_port_link_downed_total{device="mlx5_0",port="1"}`,
	`rdma_device_numa_node{device="mlx5_0"}`,
}

// TestHungReadLoad: TestLoad's requests (2,000; 20,000 in make bench) at
// concurrency 16 with one counter's read wedged forever, /metrics and
// /diagnose alternating: every one answers 200, every /metrics keeps
// every other series, leaves the wedged one out and counts it stuck, and
// the server's threads stay flat (a thread per scrape would be 1,000
// more).
func TestHungReadLoad(t *testing.T) {
	mnt, _ := slowfsMount(t, "dgx-h100")
	e := start(t, "--path.rootfs="+mnt, "--scrape.timeout=2s", "--collector.sm.sminfo-path=/nonexistent/sminfo")
	const conc = 16
	client := loadClient(conc)
	defer client.CloseIdleConnections()
	base := "http://" + e.addr
	check := func(path string, body []byte) error {
		if path != "/metrics" {
			return nil
		}
		for _, want := range hungSeries {
			if !bytes.Contains(body, []byte(want)) {
				return fmt.Errorf("lost %s", want)
			}
		}
		if bytes.Contains(body, []byte(`rdma_port_symbol_errors_total{device="mlx5_0",port="1"}`)) {
			return fmt.Errorf("the wedged counter has a value")
		}
		if !bytes.Contains(body, []byte("rdma_host_reads_stuck 1\n")) {
			return fmt.Errorf("rdma_host_reads_stuck is not 1")
		}
		return nil
	}
	// The first scrape may wait out the stuck read's device.
	if _, errs := hammer(client, base, []string{"/metrics"}, 1, 1); len(errs) > 0 {
		t.Fatalf("first scrape: %v\n%s", errs, e.stderr.String())
	}
	if _, errs := hammerCheck(client, base, []string{"/metrics", "/diagnose"}, 100, conc, check); len(errs) > 0 {
		t.Fatalf("warm-up: %d errors:\n%s\n%s", len(errs), strings.Join(errs, "\n"), e.stderr.String())
	}
	warm := threads(t, e.cmd.Process.Pid)
	requests := loadRequests(t)
	begin := time.Now()
	_, errs := hammerCheck(client, base, []string{"/metrics", "/diagnose"}, requests, conc, check)
	if len(errs) > 0 {
		t.Fatalf("%d errors (first 20):\n%s", len(errs), strings.Join(errs, "\n"))
	}
	n := threads(t, e.cmd.Process.Pid)
	t.Logf("%d requests in %s with a read stuck; threads %d after the warm-up, %d after", requests, time.Since(begin).Round(time.Millisecond), warm, n)
	// Concurrent scrapes may wake a few more threads than the warm-up
	// did; a leak is one per scrape.
	if n > warm+conc+20 {
		t.Errorf("threads %d after the warm-up, %d after %d requests: a thread per scrape leaks", warm, n, requests)
	}
}

// TestHungReadDiagnoseCLI: "rdma_doctor diagnose" on a host with a read
// wedged forever ends at its sample timeout (30 s) instead of hanging,
// judges the other devices and exits with their verdict (its config's
// memlock policy fails), not 3 (could not run).
func TestHungReadDiagnoseCLI(t *testing.T) {
	mnt, _ := slowfsMount(t, "dgx-h100")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "--path.rootfs="+mnt, "--collector.sm.sminfo-path=/nonexistent/sminfo", "diagnose", "--format=text", "--verbose")
	begin := time.Now()
	out, stderr, code := runCmd(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("diagnose still ran after 2 minutes with a read stuck\n%s", stderr)
	}
	t.Logf("diagnose ended after %s, exit %d", time.Since(begin).Round(time.Millisecond), code)
	// 2: the host's own config (read by default) fails mem.memlock.
	if code != 2 || !strings.Contains(out, "ctr.downed mlx5_1/1") || !strings.Contains(out, "PASS irq.local mlx5_0") {
		t.Errorf("exit %d, want 2 (the fixture's memlock failure) with mlx5_1 and mlx5_0 judged\n%s\n%s", code, out, stderr)
	}
}
