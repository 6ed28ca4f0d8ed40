// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// remediateCLI runs `rdma_doctor --path.rootfs=ROOT <args>` and returns
// stdout, stderr and the exit code.
func remediateCLI(t testing.TB, root string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), append([]string{"--path.rootfs=" + root, "--collector.sm.sminfo-path=/nonexistent/sminfo"}, args...)...)
	return runCmd(t, cmd)
}

// findings is check -> target -> severity from `diagnose --format=json`.
func findings(t testing.TB, root, cfg string) map[string]map[string]string {
	t.Helper()
	out, stderr, code := remediateCLI(t, root, "--config.file="+cfg, "diagnose", "--format=json")
	if code == 3 {
		t.Fatalf("diagnose could not run: %s", stderr)
	}
	var r struct {
		Findings []struct{ Check, Target, Severity string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("diagnose json: %v", err)
	}
	m := map[string]map[string]string{}
	for _, f := range r.Findings {
		if m[f.Check] == nil {
			m[f.Check] = map[string]string{}
		}
		m[f.Check][f.Target] = f.Severity
	}
	return m
}

func diffR(t testing.TB, a, b string) {
	t.Helper()
	out, err := exec.Command("diff", "-r", "--no-dereference", a, b).CombinedOutput()
	if err != nil {
		t.Fatalf("trees differ (diff -r): %v\n%s", err, out)
	}
}

// diagnose (warns) -> plan -> apply -> diagnose (those checks pass) ->
// second apply does nothing -> rollback -> tree identical to the original.
func TestRemediateEndToEnd(t *testing.T) {
	orig := filepath.Join(repoRoot(t), "fixtures/hosts/numa-remote")
	root := filepath.Join(t.TempDir(), "numa-remote")
	if out, err := exec.Command("cp", "-a", orig, root).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	// A hugepages requirement so that action has work too.
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  policies:\n    hugepages: {page_size_kib: 2048, min_pages: 1001}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := "--config.file=" + cfg
	fixed := map[string][]string{
		"mem.hugepages": {"hugepages-2048kB"},
		"cpu.governor":  {"host"},
		"irq.local":     {"mlx5_0", "mlx5_1"},
		"irq.balance":   {"host"},
		"sysctl.net":    {"net.core.rmem_max", "net.core.wmem_max", "net.core.netdev_max_backlog"},
	}
	before := findings(t, root, cfg)
	for check, targets := range fixed {
		for _, tg := range targets {
			if before[check][tg] != "warn" && before[check][tg] != "fail" {
				t.Fatalf("before: %s %s is %q, want a failing check to fix", check, tg, before[check][tg])
			}
		}
	}

	out, _, code := remediateCLI(t, root, c, "remediate", "plan", "--format=json")
	if code != 0 {
		t.Fatalf("plan exit %d", code)
	}
	var plan struct {
		Actions []struct {
			Action  string
			Changes []json.RawMessage
		}
		Manual []struct{ Topic string }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	for _, a := range plan.Actions {
		switch a.Action {
		case "memlock", "ipoib-mode", "ipoib-ipv6", "rdma-cgroup", "rdma-optional-counters":
			continue // no memlock_processes, ipoib_mode auto, ipoib_ipv6 any, no rdma cgroup limits, no optional counters: nothing to do here
		}
		if len(a.Changes) == 0 {
			t.Errorf("plan: action %s has nothing to do on numa-remote", a.Action)
		}
	}
	if len(plan.Manual) == 0 {
		t.Error("plan lists no manual steps (refusals)")
	}
	diffR(t, orig, root) // plan changes nothing

	if _, stderr, code := remediateCLI(t, root, c, "remediate", "apply"); code != 2 || !strings.Contains(stderr, "--yes") {
		t.Fatalf("apply without --yes and no terminal: exit %d, %s", code, stderr)
	}
	diffR(t, orig, root)
	if out, stderr, code := remediateCLI(t, root, c, "remediate", "apply", "--yes"); code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, stderr)
	}

	after := findings(t, root, cfg)
	for check, targets := range fixed {
		for _, tg := range targets {
			if after[check][tg] != "pass" {
				t.Errorf("after apply: %s %s is %q, want pass", check, tg, after[check][tg])
			}
		}
	}
	if out, _, code := remediateCLI(t, root, c, "remediate", "apply", "--yes"); code != 0 || !strings.Contains(out, "nothing to apply") {
		t.Errorf("second apply: exit %d\n%s", code, out)
	}

	if out, stderr, code := remediateCLI(t, root, c, "remediate", "rollback"); code != 0 {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	diffR(t, orig, root)
	if out, _, code := remediateCLI(t, root, c, "remediate", "rollback"); code != 0 || !strings.Contains(out, "nothing to roll back") {
		t.Errorf("second rollback: exit %d\n%s", code, out)
	}
	diffR(t, orig, root)
}

func TestRemediateCLIRefusals(t *testing.T) {
	root := filepath.Join(repoRoot(t), "fixtures/hosts/numa-remote")
	if _, stderr, code := remediateCLI(t, root, "remediate", "plan", "--only=sysctl,reboot"); code != 2 || !strings.Contains(stderr, `unknown remediate action "reboot"`) {
		t.Errorf("unknown id: exit %d, %s", code, stderr)
	}
	// A truncated journal: rollback names it and fails.
	dir := filepath.Join(t.TempDir(), "h")
	if out, err := exec.Command("cp", "-a", root, dir).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	if out, err := exec.Command("sh", "-c", "mkdir -p "+dir+"/var/lib/rdma_doctor && printf '{\"version\": 1, \"entr' > "+dir+"/var/lib/rdma_doctor/remediate-journal.json").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if _, stderr, code := remediateCLI(t, dir, "remediate", "rollback"); code != 1 || !strings.Contains(stderr, "truncated") {
		t.Errorf("truncated journal: exit %d, %s", code, stderr)
	}
	if _, stderr, code := remediateCLI(t, dir, "remediate", "apply", "--yes"); code != 1 || !strings.Contains(stderr, "remediate-journal.json") {
		t.Errorf("apply over a truncated journal: exit %d, %s", code, stderr)
	}
}

// On the real host (--path.rootfs=/) apply and rollback refuse to run as
// non-root before reading or writing anything. As root the test runs the
// binary as nobody (a copy in a directory nobody can enter), so a broken
// refusal still could not change the machine's settings.
func TestRemediateRefusesNonRootOnRealHost(t *testing.T) {
	bin := binary(t)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// t.TempDir's parent is private to root: a directory of its own.
		dir, err := os.MkdirTemp("", "rdma_doctor-nobody")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "rdma_doctor")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	for _, mode := range []string{"apply", "rollback"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, "--path.rootfs=/", "remediate", mode, "--yes")
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "needs root") {
			t.Errorf("%s as non-root on /: %v\n%s", mode, err, out)
		}
	}
}

// The rdma cgroup action through the binary, with dgx-h100's own
// configuration (its /slurm must cap every device at 64 contexts):
// diagnose warns -> apply -> diagnose passes -> rollback -> identical tree.
func TestRemediateEndToEndRDMACgroup(t *testing.T) {
	orig := filepath.Join(repoRoot(t), "fixtures/hosts/dgx-h100")
	root := filepath.Join(t.TempDir(), "dgx-h100")
	if out, err := exec.Command("cp", "-a", orig, root).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	cfg := filepath.Join(root, "etc/rdma_doctor/rdma_doctor.yml")
	c := "--config.file=" + cfg
	devs := []string{"mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_bond_0"}
	before := findings(t, root, cfg)
	for _, d := range devs {
		if before["cgroup.rdma"]["/slurm "+d] != "warn" {
			t.Fatalf("before: cgroup.rdma /slurm %s is %q, want warn", d, before["cgroup.rdma"]["/slurm "+d])
		}
	}
	out, stderr, code := remediateCLI(t, root, c, "remediate", "plan", "--only=rdma-cgroup")
	if code != 0 || strings.Count(out, "hca_handle=max hca_object=max -> ") != len(devs) {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, stderr, code := remediateCLI(t, root, c, "remediate", "apply", "--only=rdma-cgroup", "--yes"); code != 0 || !strings.Contains(out, "9 change(s) applied") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, stderr)
	}
	after := findings(t, root, cfg)
	for _, d := range devs {
		if after["cgroup.rdma"]["/slurm "+d] != "pass" {
			t.Errorf("after apply: cgroup.rdma /slurm %s is %q, want pass", d, after["cgroup.rdma"]["/slurm "+d])
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "sys/fs/cgroup/slurm/rdma.max"))
	if err != nil || strings.Count(string(b), "hca_handle=64 hca_object=max\n") != len(devs) {
		t.Errorf("rdma.max after apply: %q, %v", b, err)
	}
	if out, stderr, code := remediateCLI(t, root, c, "remediate", "rollback"); code != 0 || !strings.Contains(out, "restored rdma-cgroup    sys:fs/cgroup/slurm/rdma.max (mlx5_0)") {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	diffR(t, orig, root)

	// A device unregistered between apply and rollback took its limit
	// with it: rollback says so and restores the rest.
	if _, stderr, code := remediateCLI(t, root, c, "remediate", "apply", "--only=rdma-cgroup", "--yes"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, stderr)
	}
	file := filepath.Join(root, "sys/fs/cgroup/slurm/rdma.max")
	b, err = os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), "mlx5_9 hca_handle=64 hca_object=max\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = remediateCLI(t, root, c, "remediate", "rollback")
	if code != 0 || !strings.Contains(out, "gone     rdma-cgroup    sys:fs/cgroup/slurm/rdma.max (mlx5_9)") || !strings.Contains(out, "8 path(s) restored, 1 gone since the apply") {
		t.Errorf("rollback with a device gone: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "var")); err == nil {
		t.Error("journal state left after the rollback")
	}
}

// rdma-optional-counters on a copy of roce-cx6dx, configured to enable
// the mlx5 congestion counters: the plan writes the udev rule for every
// port and says the runtime part is skipped (a copied tree is not the
// running kernel's, so RDMA netlink is not asked); apply and rollback
// leave the tree as it was; without the key the action has nothing to do.
func TestRemediateEndToEndOptionalCounters(t *testing.T) {
	orig := filepath.Join(repoRoot(t), "fixtures/hosts/roce-cx6dx")
	root := filepath.Join(t.TempDir(), "roce-cx6dx")
	if out, err := exec.Command("cp", "-a", orig, root).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("tuning:\n  optional_counters: [cc_rx_ce_pkts, cc_rx_cnp_pkts, cc_tx_cnp_pkts]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := "--config.file=" + cfg
	rule := "[root:etc/udev/rules.d/90-rdma-doctor-optional-counters.rules]"
	out, stderr, code := remediateCLI(t, root, c, "remediate", "plan", "--only=rdma-optional-counters")
	for _, want := range []string{
		"rdma-optional-counters (answers no check: the config asks for it)\n",
		"  /etc/udev/rules.d/90-rdma-doctor-optional-counters.rules (absent) -> (5 lines)   " + rule + "\n",
		"  note: runtime part skipped: this tree is not the running kernel's /sys (a fixture or a copy)",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("plan: exit %d, want %q in\n%s\n%s", code, want, out, stderr)
		}
	}
	if strings.Contains(out, "[rdma:") {
		t.Errorf("plan on a copied tree has a runtime change:\n%s", out)
	}
	if out, stderr, code := remediateCLI(t, root, c, "remediate", "apply", "--only=rdma-optional-counters", "--yes"); code != 0 || !strings.Contains(out, "1 change(s) applied") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, stderr)
	}
	b, err := os.ReadFile(filepath.Join(root, "etc/udev/rules.d/90-rdma-doctor-optional-counters.rules"))
	if err != nil || !strings.Contains(string(b), `KERNEL=="mlx5_1", RUN+="/usr/sbin/rdma statistic set link %k/1 optional-counters cc_rx_ce_pkts,cc_rx_cnp_pkts,cc_tx_cnp_pkts"`) {
		t.Errorf("rule after apply: %q, %v", b, err)
	}
	if out, _, code := remediateCLI(t, root, c, "remediate", "plan", "--only=rdma-optional-counters"); code != 0 || !strings.Contains(out, "nothing to do: the udev rule already sets") {
		t.Errorf("second plan: exit %d\n%s", code, out)
	}
	if out, stderr, code := remediateCLI(t, root, c, "remediate", "rollback"); code != 0 || !strings.Contains(out, "removed  rdma-optional-counters root:etc/udev/rules.d/90-rdma-doctor-optional-counters.rules") {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	diffR(t, orig, root)
	out, _, code = remediateCLI(t, root, "remediate", "plan", "--only=rdma-optional-counters")
	if code != 0 || !strings.Contains(out, "note: nothing to do: tuning.optional_counters names no counter") {
		t.Errorf("plan without the key: exit %d\n%s", code, out)
	}
}
