// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/probe/control"
)

// Issue 15, Medium 4-6: the exporter's subprocesses and its responder
// against a careless or hostile environment.

// subUmadHost is sm-opensm with one umad port, so the sm collector runs
// sminfo for mlx5_0 port 1.
func subUmadHost(t *testing.T) string {
	t.Helper()
	root := smCopyHost(t, "sm-opensm")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/ibdev"), "mlx5_0\n")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/port"), "1\n")
	smWriteFile(t, filepath.Join(root, "dev/infiniband/umad0"), "")
	return root
}

// subPids reads the pids a fake tool appended to path, one a line.
func subPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// subWaitPids waits until path lists at least n pids (generous failure
// guard, not a timing assertion).
func subWaitPids(t *testing.T, path string, n int) []int {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if pids := subPids(t, path); len(pids) >= n {
			return pids
		}
	}
	t.Fatalf("%s lists fewer than %d pids after 60s", path, n)
	return nil
}

// subAssertGone waits until none of pids runs; survivors fail the test
// and are killed.
func subAssertGone(t *testing.T, what string, pids []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for testenv.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if testenv.Alive(pid) {
			t.Errorf("%s %d survived its run", what, pid)
		}
	}
}

// TestSminfoLeavesNoOrphans: a fake sminfo that answers (exit 0) and
// leaves two children sleeping, one holding its output pipes and one not;
// after several rounds of "rdma_doctor serve", every run was a success and
// no child of any run is left.
func TestSminfoLeavesNoOrphans(t *testing.T) {
	root := subUmadHost(t)
	dir := t.TempDir()
	children := filepath.Join(dir, "children")
	// The children run as dir/orphan, so that strays (if this test fails,
	// or of a run cut short by the exporter's kill at the end) can be
	// found and killed.
	orphan := filepath.Join(dir, "orphan")
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sleep, orphan); err != nil {
		t.Fatal(err)
	}
	fake := smFakeTool(t, "sminfo", orphan+` 1000 &
echo $! >>`+children+`
`+orphan+` 1000 >/dev/null 2>&1 </dev/null &
echo $! >>`+children+`
cat `+smToolFixture(t, "sminfo-master-ibsim.txt")+"\n")
	t.Cleanup(func() { subKillStrays(t, fake, orphan) })
	e := start(t, "--path.rootfs="+root, "--collector.sm.sminfo-path="+fake, "--collector.sm.sminfo-interval=200ms")
	const rounds = 4
	pids := subWaitPids(t, children, 2*rounds)
	subAssertGone(t, "sminfo's child", pids)
	body := smWaitFor(t, e.addr, `rdma_sm_sminfo_success{device="mlx5_0",port="1"} 1`)
	if !hasSeries(body, `rdma_sm_sminfo_failures_total{device="mlx5_0",port="1"} 0`) || strings.Contains(e.stderr.String(), "sminfo failed") {
		t.Errorf("sminfo runs failed:\n%s\n%s", smGrep(body, "rdma_sm_sminfo"), e.stderr.String())
	}
}

// TestSminfoEscapesLeaveNoOrphans: a fake sminfo that answers (exit 0)
// after two children of it left its process group (setsid), one holding
// its output and one not. The group kill cannot reach them; the server,
// their subreaper, kills them when the run ends: after several rounds
// every run was a success (the one holding the output did not make the
// run wait for it and fail) and no process of any run is left in /proc,
// not even as a zombie.
func TestSminfoEscapesLeaveNoOrphans(t *testing.T) {
	root := subUmadHost(t)
	dir := t.TempDir()
	children := filepath.Join(dir, "children")
	orphan := filepath.Join(dir, "orphan")
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sleep, orphan); err != nil {
		t.Fatal(err)
	}
	// Each child writes its pid from inside its new session, and sminfo
	// waits for both: only then have they escaped.
	fake := smFakeTool(t, "sminfo", `a=$(mktemp -p `+dir+`) b=$(mktemp -p `+dir+`)
setsid sh -c 'echo $$ >'$a'; exec `+orphan+` 1000' &
setsid sh -c 'echo $$ >'$b'; exec `+orphan+` 1000' >/dev/null 2>&1 </dev/null &
until [ -s $a ] && [ -s $b ]; do sleep 0.01; done
cat $a $b >>`+children+`
cat `+smToolFixture(t, "sminfo-master-ibsim.txt")+"\n")
	t.Cleanup(func() { subKillStrays(t, fake, orphan) })
	e := start(t, "--path.rootfs="+root, "--collector.sm.sminfo-path="+fake, "--collector.sm.sminfo-interval=200ms")
	const rounds = 4
	pids := subWaitPids(t, children, 2*rounds)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left []int
		for _, pid := range pids {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("escaped children %v of sminfo are still in /proc (of %v)\n%s", left, pids, e.stderr.String())
		}
	}
	body := smWaitFor(t, e.addr, `rdma_sm_sminfo_success{device="mlx5_0",port="1"} 1`)
	if !hasSeries(body, `rdma_sm_sminfo_failures_total{device="mlx5_0",port="1"} 0`) || strings.Contains(e.stderr.String(), "sminfo failed") {
		t.Errorf("sminfo runs failed:\n%s\n%s", smGrep(body, "rdma_sm_sminfo"), e.stderr.String())
	}
}

// TestIblinkinfoEndlessOutput: after one good scan, the fake iblinkinfo
// prints distinct links without end (the way 1 GB of links reached 4.4 GB
// of RSS). With an hour-long timeout only the output cap can stop it: the
// scan fails saying so, the first scan's links stay exported, the process
// is gone and the exporter's memory stayed bounded.
func TestIblinkinfoEndlessOutput(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "endless")
	pids := filepath.Join(dir, "pids")
	fake := smFakeTool(t, "iblinkinfo", `echo $$ >>`+pids+`
if [ -e `+flag+` ]; then
	exec awk 'BEGIN { for (i = 0; ; i++) printf "0x%016x \"MF0;leaf%d:MQM9790/U1\" %6d %4d[  ] ==( 4X        106.25 Gbps Active/  LinkUp)==>  0x%016x %6d %4d[  ] \"gpu%d mlx5_0\" ( )\n", 1000000 + int(i / 32), int(i / 32), 1 + int(i / 32), 1 + i % 32, 2000000000 + i, 1 + i % 49000, 1, i }'
fi
cat `+smToolFixture(t, "iblinkinfo-l-generated-hdr-fdr-downgrade.txt")+"\n")
	t.Cleanup(func() {
		for _, pid := range subPids(t, pids) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	e := start(t, append(hostArgs(t, "sm-opensm"), "--collector.fabric", "--collector.fabric.iblinkinfo-path="+fake,
		"--collector.fabric.interval=500ms", "--collector.fabric.timeout=1h")...)
	smWaitFor(t, e.addr, "rdma_fabric_scan_success 1")
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	body := smWaitFor(t, e.addr, "rdma_fabric_scan_success 0")
	if !hasSeries(body, "rdma_fabric_links 8") {
		t.Errorf("the first scan's links are gone after a failed scan:\n%s", smGrep(body, "rdma_fabric_links"))
	}
	want := "more than 67108864 bytes on standard output"
	if !strings.Contains(e.settledLog(1, func(log string) int { return strings.Count(log, want) }), want) {
		t.Errorf("the log does not say %q:\n%s", want, e.stderr.String())
	}
	ran := subPids(t, pids)
	subAssertGone(t, "endless iblinkinfo", ran[:len(ran)-1])
	peak := subPeakRSS(t, e.cmd.Process.Pid)
	t.Logf("exporter peak RSS %d MiB", peak>>20)
	if peak > 1<<30 {
		t.Errorf("the exporter's peak RSS is %d MiB for a scan capped at 64 MiB", peak>>20)
	}
}

// subKillStrays kills what a test left running: once no process runs
// script (a fake tool) any more, every process whose command line holds
// marker.
func subKillStrays(t *testing.T, script, marker string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); len(subProcs(script)) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range subProcs(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// subProcs lists the processes whose command line contains s.
func subProcs(s string) []int {
	return liveProcs(func(proc string) bool {
		b, err := os.ReadFile(proc + "/cmdline")
		return err == nil && strings.Contains(string(b), s)
	})
}

// liveProcs lists the live processes (not zombies) for which match holds;
// match gets the process's /proc directory.
func liveProcs(match func(proc string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if match("/proc/"+e.Name()) && testenv.Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// subPeakRSS is a process's peak resident set (VmHWM), in bytes.
func subPeakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// subResponder runs "rdma_doctor serve" with the responder on a free
// loopback port (TCP tests only) and returns its exporter and address.
func subResponder(t *testing.T) (*exporter, string) {
	t.Helper()
	dir := t.TempDir()
	secret := probeWrite(t, dir, "probe.secret", probeSecret)
	addr := freeAddr(t)
	cfg := probeWrite(t, dir, "rdma_doctor.yml", fmt.Sprintf(`probe:
  secret_file: %s
  responder:
    enabled: true
    listen: [%q]
    allowed_tests: [tcp_lat]
    devices: [{device: mlx5_0, port: 1}]
`, secret, addr))
	e := start(t, "--path.rootfs="+filepath.Join(repoRoot(t), "fixtures", "hosts", "sm-opensm"), "--config.file="+cfg)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the responder does not listen on %s\n%s", addr, e.stderr.String())
		}
	}
	return e, addr
}

// subIdle opens a connection from the loopback address src (all of 127/8
// is local: each stands for a client) that says nothing, and reports
// whether the responder greeted it (false: closed at once, refused).
func subIdle(t *testing.T, addr, src string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("neither greeted nor closed")
	}
	return c, err == nil && strings.Contains(line, "challenge")
}

// subClosed waits until the responder closes c (generous guard).
func subClosed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// subClient is the i-th stand-in client address.
func subClient(i int) string { return fmt.Sprintf("127.0.1.%d", 1+i) }

// TestResponderIdleConnections: more idle, unauthenticated connections
// than the responder has sessions, from a few clients, do not keep an
// authenticated probe out, and the responder closes them at its handshake
// deadline. Then, with every handshake slot held, 2,000 more connections
// from a client at its share are refused with a line or two of log, not
// one each.
func TestResponderIdleConnections(t *testing.T) {
	e, addr := subResponder(t)
	var idle []net.Conn
	for i := 0; i < 20; i++ {
		c, ok := subIdle(t, addr, subClient(i%3))
		if !ok {
			t.Fatalf("idle connection %d refused", i)
		}
		idle = append(idle, c)
	}
	cl := &control.Client{Secret: []byte(strings.TrimSpace(probeSecret))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cl.TCP(ctx, addr, control.Request{Test: "tcp_lat", Iterations: 100})
	if err != nil || res.Latency == nil || res.Latency.Samples != 100 {
		t.Fatalf("probe with 20 idle connections open: %+v, %v\n%s", res, err, e.stderr.String())
	}
	for i, c := range idle {
		if !subClosed(c) {
			t.Fatalf("idle connection %d still open past the handshake deadline", i)
		}
	}

	began := time.Now()
	for i := 0; i < control.DefaultMaxHandshakes; i++ {
		if _, ok := subIdle(t, addr, subClient(i/control.DefaultMaxHandshakesPerClient)); !ok {
			t.Fatalf("idle connection %d of %d refused", i, control.DefaultMaxHandshakes)
		}
	}
	// From a client at its share: a newcomer from an address holding
	// fewer would take the oldest slot instead of being refused.
	refused := 0
	for i := 0; i < 2000; i++ {
		c, ok := subIdle(t, addr, subClient(0))
		if !ok {
			refused++
		}
		c.Close()
	}
	if refused == 0 {
		t.Fatal("no connection refused with every handshake slot held")
	}
	t.Logf("%d of 2000 connections refused", refused)
	// One line, and at most one more per minute begun since.
	refusals := func(log string) int {
		return strings.Count(log, "too many unauthenticated connections") + strings.Count(log, "more connections refused")
	}
	lines := refusals(e.settledLog(0, refusals))
	if limit := 1 + int(time.Since(began)/time.Minute) + 1; lines < 1 || lines > limit {
		t.Errorf("%d log lines for %d refused connections, want 1 to %d", lines, refused, limit)
	}
}
