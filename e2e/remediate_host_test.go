// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// asRootOnHost runs `rdma_doctor --path.rootfs=/ remediate <args>` as root
// on the real paths of a private user and mount namespace whose /sys and
// /proc are bind mounts of the fixture copy root, and /etc and /var/lib of
// the directories etc and varlib: the root-only code path runs for real
// while the machine's own settings are out of its reach.
func asRootOnHost(t *testing.T, root, etc, varlib string, args ...string) (string, int) {
	t.Helper()
	requireTool(t, "unshare")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// set -e: a failed bind mount stops before the binary could reach a
	// real path.
	script := `set -e
mount --bind "$2" /etc
mount --bind "$3" /var/lib
mount --bind "$1/sys" /sys
mount --bind "$1/proc" /proc
shift 4
exec "$BIN" --path.rootfs=/ --collector.sm.sminfo-path=/nonexistent/sminfo remediate "$@"`
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"-r", "-m", "sh", "-c", script, "sh", root, etc, varlib, "--"}, args...)...)
	cmd.Env = append(os.Environ(), "BIN="+binary(t))
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if strings.Contains(string(out), "mount:") || strings.Contains(string(out), "unshare:") {
			testenv.SkipOrFail(t, "no private user and mount namespace here: "+string(out))
		}
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("unshare: %v\n%s", err, out)
	}
	return string(out), 0
}

// Apply and rollback as root on --path.rootfs=/ (the real host's paths),
// inside a private mount namespace: the fixture copy behind them changes
// and comes back byte-identical, and the machine's own sysctl and CPU
// governor are untouched.
func TestRemediateAsRootInMountNamespace(t *testing.T) {
	orig := filepath.Join(repoRoot(t), "fixtures/hosts/numa-remote")
	tmp := t.TempDir()
	root, etc, varlib := filepath.Join(tmp, "numa-remote"), filepath.Join(tmp, "etc"), filepath.Join(tmp, "varlib")
	if out, err := exec.Command("cp", "-a", orig, root).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	for _, d := range []string{etc, varlib} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	real := func() string { // what an escaped write would change on this machine
		var s []string
		for _, p := range []string{"/proc/sys/net/core/rmem_max", "/proc/sys/net/core/wmem_max", "/proc/sys/net/core/netdev_max_backlog",
			"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "/etc/sysctl.d/90-rdma-doctor.conf", "/var/lib/rdma_doctor/remediate-journal.json"} {
			b, err := os.ReadFile(p)
			s = append(s, fmt.Sprintf("%s=%q/%v", p, b, errors.Is(err, os.ErrNotExist)))
		}
		return strings.Join(s, " ")
	}
	hostBefore := real()

	out, code := asRootOnHost(t, root, etc, varlib, "apply", "--yes")
	if code != 0 || !strings.Contains(out, "change(s) applied") {
		t.Fatalf("apply as root: exit %d\n%s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/net/core/rmem_max")); err != nil || string(b) != "4194304\n" {
		t.Errorf("fixture rmem_max after apply: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(etc, "sysctl.d/90-rdma-doctor.conf")); err != nil {
		t.Errorf("drop-in not written below the namespace's /etc: %v", err)
	}
	if _, err := os.Stat(filepath.Join(varlib, "rdma_doctor/remediate-journal.json")); err != nil {
		t.Errorf("journal not below the namespace's /var/lib: %v", err)
	}
	if got := real(); got != hostBefore {
		t.Fatalf("the machine's own settings changed: %q -> %q", hostBefore, got)
	}

	out, code = asRootOnHost(t, root, etc, varlib, "rollback")
	if code != 0 || !strings.Contains(out, "journal removed") {
		t.Fatalf("rollback as root: exit %d\n%s", code, out)
	}
	diffR(t, orig, root)
	for _, d := range []string{etc, varlib} {
		if ents, err := os.ReadDir(d); err != nil || len(ents) != 0 {
			t.Errorf("%s after rollback: %v, %v; want empty", d, ents, err)
		}
	}
}

// openPTY opens a pseudo-terminal pair with /dev/ptmx.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		testenv.SkipOrFail(t, "no pseudo-terminals here: "+err.Error())
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		testenv.SkipOrFail(t, "cannot open the pty's terminal: "+err.Error())
	}
	return m, s
}

// onTerminal runs `remediate apply` (no --yes) with its stdin and stdout
// on a pseudo-terminal, answers the question with answer, and returns what
// the terminal showed and the exit code.
func onTerminal(t *testing.T, root, answer string) (string, int) {
	t.Helper()
	master, tty := openPTY(t)
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "--path.rootfs="+root, "--collector.sm.sminfo-path=/nonexistent/sminfo", "remediate", "apply")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		tty.Close()
		t.Fatal(err)
	}
	tty.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	done := make(chan struct{})
	go func() { // until EIO: the last holder of the terminal exited
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	shown := func() string { mu.Lock(); defer mu.Unlock(); return screen.String() }
	for !strings.Contains(shown(), "[y/N] ") {
		if ctx.Err() != nil {
			t.Fatalf("no question on the terminal:\n%s", shown())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := master.Write([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	<-done
	return shown(), exitCode(t, err)
}

// The confirmation on a terminal: "y" applies; "n", an empty line or an
// end of input (^D) applies nothing and exits 2.
func TestRemediateConfirmOnTerminal(t *testing.T) {
	orig := filepath.Join(repoRoot(t), "fixtures/hosts/numa-remote")
	root := filepath.Join(t.TempDir(), "numa-remote")
	if out, err := exec.Command("cp", "-a", orig, root).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	for _, answer := range []string{"n\n", "\n", "\x04"} {
		out, code := onTerminal(t, root, answer)
		if code != 2 || !strings.Contains(out, "not applied") {
			t.Errorf("answer %q: exit %d\n%s", answer, code, out)
		}
		diffR(t, orig, root)
	}
	out, code := onTerminal(t, root, "y\n")
	if code != 0 || !strings.Contains(out, "change(s) applied") {
		t.Fatalf("answer y: exit %d\n%s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")); err != nil || string(b) != "performance\n" {
		t.Errorf("governor after y: %q, %v", b, err)
	}
	if out, stderr, code := remediateCLI(t, root, "remediate", "rollback"); code != 0 {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	diffR(t, orig, root)
}
