// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func hasSeries(body, prefix string) bool {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestBrokenHost: garbage, empty and missing files never break the scrape,
// never become zeros, and each distinct error is logged once.
func TestBrokenHost(t *testing.T) {
	e := start(t, hostArgs(t, "broken")...)
	code, body := e.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("HTTP %d", code)
	}
	for _, want := range []string{
		`rdma_scrape_collector_success{collector="infiniband"} 0`,
		`rdma_port_rate_bytes_per_second{device="mlx5_0",port="1"} 5e+10`,
		`rdma_port_state{device="mlx5_0",port="1"} 4`,
		`rdma_port_data_received_bytes_total{device="mlx5_0",port="1"}`,
		`rdma_port_link_downed_total{device="mlx5_0",port="1"}`,
		// mlx5_1's readable files are still there.
		`rdma_port_physical_state{device="mlx5_1",port="1"} 5`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	for _, absent := range []string{
		`rdma_port_rate_bytes_per_second{device="mlx5_1"`, // rate "fast"
		`rdma_port_state{device="mlx5_1"`,                 // empty state
		`rdma_port_symbol_errors_total{device="mlx5_1"`,   // "garbage"
		`rdma_port_data_received_bytes_total{device="mlx5_1"`,
		`rdma_port_link_downed_total{device="mlx5_1"`, // overflow
		`rdma_port_hw_counter_total{counter="out_of_sequence",device="mlx5_1"`,
		`rdma_port_info{device="mlx5_2"`, // no ports/ directory
	} {
		if hasSeries(body, absent) {
			t.Errorf("series for a broken file present: %s", absent)
		}
	}
	warns := func(log string) []string {
		var w []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "collector error") {
				w = append(w, l)
			}
		}
		return w
	}
	nwarns := func(log string) int { return len(warns(log)) }
	firstLog := e.settledLog(0, nwarns)
	e.get(t, "/metrics")
	e.get(t, "/metrics")
	first, after := warns(firstLog), warns(e.settledLog(0, nwarns))
	if len(first) == 0 {
		t.Fatalf("no warning logged for the broken host:\n%s", firstLog)
	}
	if len(after) != len(first) {
		t.Errorf("warnings grew from %d to %d over two more scrapes: errors must be logged once", len(first), len(after))
	}
	if strings.Contains(e.stderr.String(), "panic") {
		t.Errorf("panic in log:\n%s", e.stderr.String())
	}
}

func TestDeviceFilter(t *testing.T) {
	e := start(t, append(hostArgs(t, "dgx-h100"), "--collector.infiniband.device-exclude=mlx5_bond_0|mlx5_[4-9]")...)
	_, body := e.get(t, "/metrics")
	if !hasSeries(body, `rdma_device_info{board_id="MT_0000000838",device="mlx5_0"`) {
		t.Error("mlx5_0 missing")
	}
	for _, d := range []string{"mlx5_bond_0", "mlx5_4", "mlx5_9"} {
		if strings.Contains(body, `device="`+d+`"`) {
			t.Errorf("excluded device %s exported", d)
		}
	}
	e = start(t, append(hostArgs(t, "dgx-h100"), "--collector.infiniband.device-include=mlx5_1")...)
	_, body = e.get(t, "/metrics")
	if !strings.Contains(body, `device="mlx5_1"`) || strings.Contains(body, `device="mlx5_0"`) {
		t.Error("device-include=mlx5_1 did not select exactly mlx5_1")
	}
}

// TestBadStartup: flag values that make no sense stop start-up with exit
// code 1 and a one-line error, never a panic.
func TestBadStartup(t *testing.T) {
	dir := t.TempDir()
	badCfg := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(badCfg, []byte("expected:\n  boards:\n    - board_id: X\n      rate_gbs: 200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing rootfs", []string{"--path.rootfs=/nonexistent/root"}, "--path.rootfs"},
		{"rootfs is a file", []string{"--path.rootfs=" + notDir}, "not a directory"},
		{"bad regexp", []string{"--collector.infiniband.device-include=mlx5_(["}, "device-include"},
		{"include and exclude", []string{"--collector.infiniband.device-include=a", "--collector.infiniband.device-exclude=b"}, "mutually exclusive"},
		{"missing config", []string{"--config.file=/nonexistent.yml"}, "config file"},
		{"unknown config key", []string{"--config.file=" + badCfg}, "rate_gbs"},
		{"unknown flag", []string{"--no-such-flag"}, "unknown long flag"},
		{"config typo suggests the key", []string{"--config.file=" + badCfg}, `unknown key "rate_gbs"; valid here: board_id, rate_gbps (did you mean "rate_gbps"?)`},
		{"regexp quoted as typed", []string{"--collector.infiniband.device-include=mlx5_(["}, `--collector.infiniband.device-include="mlx5_([": not a regular expression`},
		{"listen address", []string{"--web.listen-address=bogus"}, `--web.listen-address="bogus": want [HOST]:PORT`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), append([]string{"--web.listen-address=127.0.0.1:0"}, tc.args...)...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit %v, want exit code 1; output:\n%s", err, out)
			}
			// One line, the same prefix as every command's errors, and
			// nothing logged before it: the error comes before anything starts.
			msg := strings.TrimSpace(string(out))
			if !strings.HasPrefix(msg, "rdma_doctor: error: ") || !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") > 0 || strings.Contains(msg, "goroutine") {
				t.Errorf("want one line \"rdma_doctor: error: ...\" naming %q, got:\n%s", tc.want, msg)
			}
		})
	}
}

// TestStartupExitCodes: a start-up error exits with the code of the command
// it stopped (serve 1, diagnose 3 "could not run", probe and remediate 2,
// their usage code) and the same one-line prefix; --config.check validates
// and exits.
func TestStartupExitCodes(t *testing.T) {
	root := filepath.Join(repoRoot(t), "fixtures", "hosts", "cx6-hdr-fdr")
	for cmdName, want := range map[string]int{"serve": 1, "diagnose": 3, "probe": 2, "remediate": 2} {
		for _, bad := range [][]string{{"--config.file=/nonexistent.yml"}, {"--bogus-flag"}} {
			out, err := exec.Command(binary(t), append([]string{cmdName, "--path.rootfs=" + root}, bad...)...).CombinedOutput()
			if code := exitCode(t, err); code != want || !strings.HasPrefix(string(out), "rdma_doctor: error: ") {
				t.Errorf("%s %v: exit %d, want %d with rdma_doctor: error: ...\n%s", cmdName, bad, code, want, out)
			}
		}
	}
	out, err := exec.Command(binary(t), "--path.rootfs="+root, "--config.check").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "etc/rdma_doctor/rdma_doctor.yml and the flags are valid") {
		t.Errorf("--config.check on a host with its own config: %v\n%s", err, out)
	}
}

// TestCLIReadsHostConfig: without --config.file, diagnose reads the host's
// own etc/rdma_doctor/rdma_doctor.yml as the server does, so the expected
// rate of cx6-hdr-fdr fails port.rate in the CLI too.
func TestCLIReadsHostConfig(t *testing.T) {
	root := filepath.Join(repoRoot(t), "fixtures", "hosts", "cx6-hdr-fdr")
	out, err := exec.Command(binary(t), "--path.rootfs="+root, "diagnose", "--check=port.rate", "--format=nhc").CombinedOutput()
	if code := exitCode(t, err); code != 2 || !strings.Contains(string(out), "FAIL port.rate") {
		t.Errorf("diagnose --check=port.rate on cx6-hdr-fdr without --config.file: exit %d, want 2 (FAIL)\n%s", code, out)
	}
}

func TestVersionAndHelp(t *testing.T) {
	out, err := exec.Command(binary(t), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "rdma_doctor, version") {
		t.Errorf("--version: %v\n%s", err, out)
	}
	out, err = exec.Command(binary(t), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--path.rootfs") || !strings.Contains(string(out), "--collector.infiniband") {
		t.Errorf("--help: %v\n%s", err, out)
	}
	// What matters first: the shared flags, then serve's (the default
	// command's) web flags, the commands, and the collector flags last.
	help := string(out)
	order := []string{"--config.file=", "--path.rootfs=", "--web.listen-address=", "\n  diagnose\n", "\n  remediate\n",
		"--[no-]collector.disable-defaults", "--[no-]collector.infiniband"}
	for i := 1; i < len(order); i++ {
		if a, b := strings.Index(help, order[i-1]), strings.Index(help, order[i]); a < 0 || b < 0 || a > b {
			t.Errorf("--help: %s should come before %s", order[i-1], order[i])
		}
	}
	// A command's help shows its own flags and points to the shared ones
	// instead of repeating them.
	out, err = exec.Command(binary(t), "diagnose", "--help").CombinedOutput()
	if sub := string(out); err != nil || !strings.Contains(sub, "--format") || strings.Contains(sub, "--collector.infiniband") ||
		strings.Contains(sub, "--path.rootfs=") || !strings.Contains(sub, "rdma_doctor --help") {
		t.Errorf("diagnose --help: %v\n%s", err, out)
	}
}

func TestLandingPage(t *testing.T) {
	e := start(t, hostArgs(t, "dgx-h100")...)
	code, body := e.get(t, "/")
	if code != 200 || !strings.Contains(body, `href="/metrics"`) {
		t.Errorf("landing page: HTTP %d, no /metrics link:\n%s", code, body)
	}
}
