// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nsChildEnv marks a test binary re-run inside namespaces by InNamespaces;
// its value is the test that should do the work there.
const nsChildEnv = "RDMA_DOCTOR_NS_CHILD"

// InChild reports whether this process is the namespaced re-run of test.
func InChild(test string) bool { return os.Getenv(nsChildEnv) == test }

// InNamespaces re-runs the test binary, restricted to test, under
// `unshare -r <flags>`: a user namespace where it is root, plus the given
// namespaces (-m mount, -n network), so it can bind-mount a fixture over
// /sys or create veth pairs without touching the host. It returns the
// child's output. Locally an unusable unshare skips the test; in CI
// (CI set) it fails, so nothing skips silently there.
func InNamespaces(t *testing.T, test string, flags ...string) string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		SkipOrFail(t, "unshare (util-linux) not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"-r"}, flags...)
	args = append(args, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd := exec.CommandContext(ctx, unshare, args...)
	cmd.Env = append(os.Environ(), nsChildEnv+"="+test)
	// Own process group, killed whole on timeout: no stray children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "unshare failed") || strings.Contains(string(out), "Operation not permitted") && !strings.Contains(string(out), "--- FAIL") {
			SkipOrFail(t, "user namespaces unavailable: "+strings.TrimSpace(string(out)))
		}
		t.Fatalf("namespaced %s: %v\n%s", test, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("namespaced %s did not pass:\n%s", test, out)
	}
	return string(out)
}

// Run runs a command to completion without a shell, bounded in time, and
// fails the test when it fails.
func Run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
