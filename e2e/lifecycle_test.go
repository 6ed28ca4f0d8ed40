// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

// TestSIGTERMJoinsEveryWorker runs the built server with every kind of
// background worker on (sminfo, the fabric scan, sweep and route read
// through the fabrictest tools, the port sampler, the kernel log reader
// on a recorded message, the diagnose sampler, the probe scheduler in
// loopback through the fake perftest, and a responder), takes the
// workers it registered from rdma_background_worker_healthy, sends
// SIGTERM, and wants each of them to log its stop, then the line that
// all have, and exit code 0 (issue 39: before, only sminfo and the
// fabric's loops were joined; the others were left running at exit).
func TestSIGTERMJoinsEveryWorker(t *testing.T) {
	root := smCopyHost(t, "cx6-hdr-fdr")
	pci := pciFunction(t, root, "mlx5_0")
	// A real message (internal/read/kmsg's testdata/recorded.txt) on mlx5_0's
	// function, as TestKernelLogEvents has it.
	smWriteFile(t, filepath.Join(root, "dev", "kmsg"),
		fmt.Sprintf("6,100,18865848172,-;mlx5_core %s enp1s0f0np0: Link down\n SUBSYSTEM=pci\n DEVICE=+pci:%s\n", pci, pci))
	tools := fabrictest.Install(t)
	fake := perftesttest.Install(t, probeReplay())
	dir := t.TempDir()
	secret := probeWrite(t, dir, "probe.secret", probeSecret)
	cfg := probeWrite(t, dir, "rdma_doctor.yml", fmt.Sprintf(`diagnose:
  interval: 1s
probe:
  enabled: true
  interval: 1s
  scrape_guard: 1s
  perftest_dir: %s
  secret_file: %s
  tests: [ib_send_lat]
  loopback:
    - {device: mlx5_0, port: 1}
  responder:
    enabled: true
    listen: [%q]
    allowed_tests: [ib_send_lat]
    allowed_clients: [127.0.0.0/8]
    devices: [{device: mlx5_0, port: 1}]
`, fake, secret, freeAddr(t)))
	e := start(t, "--path.rootfs="+root, "--config.file="+cfg, "--collector.kmsg.interval=50ms",
		"--collector.sm.sminfo-path="+tools.SMInfo,
		"--collector.fabric", "--collector.fabric.iblinkinfo-path="+tools.IBLinkInfo,
		"--collector.fabric.ibqueryerrors-path="+tools.IBQueryErrors, "--collector.fabric.ibnetdiscover-path="+tools.IBNetDiscover,
		"--collector.fabric.sminfo-path="+tools.SMInfo,
		"--collector.fabric.routes", "--collector.fabric.dump-fts-path=/nonexistent/dump_fts")
	// A probe recorded: the scheduler's loop is under way, not waiting
	// for its first run. Watched in the log: scrapes would hold the
	// probe back (probe.scrape_guard).
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(e.stderr.String(), `msg="probe recorded"`); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no probe recorded in 60 s\n%s", e.stderr.String()) // the bound of a wait
		}
	}
	_, body := e.get(t, "/metrics")
	var workers []string
	for _, m := range regexp.MustCompile(`(?m)^rdma_background_worker_healthy\{[^}]*worker="([a-z0-9_]+)"`).FindAllStringSubmatch(body, -1) {
		workers = append(workers, m[1])
	}
	slices.Sort(workers)
	want := []string{"diagnose", "fabric_routes", "fabric_scan", "fabric_sweep", "kmsg", "portwatch", "probe_responder", "probe_scheduler", "sminfo"}
	if !slices.Equal(workers, want) {
		t.Fatalf("workers registered %v, want %v\n%s", workers, want, smGrep(body, "rdma_background_"))
	}
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("SIGTERM did not end the server in 60 s\n%s", e.stderr.String()) // the bound of a wait
	}
	log := e.stderr.String()
	if e.exitErr != nil {
		t.Errorf("exit after SIGTERM: %v, want code 0\n%s", e.exitErr, log)
	}
	all := strings.Index(log, `msg="all background workers stopped" workers=9`)
	if all < 0 {
		t.Fatalf("no line saying all 9 workers stopped\n%s", log)
	}
	for _, w := range workers {
		line := regexp.MustCompile(`(?m)^.*msg="background worker stopped" worker=` + w + `$`)
		at := line.FindStringIndex(log)
		if at == nil {
			t.Errorf("worker %s logged no stop\n%s", w, log)
			continue
		}
		if at[0] > all {
			t.Errorf("worker %s logged its stop after the all-stopped line", w)
		}
	}
	if strings.Contains(log, "did not stop in time") {
		t.Errorf("a worker outlived the bounded wait\n%s", log)
	}
}
