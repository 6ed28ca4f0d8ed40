// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), append([]string{"--web.listen-address=127.0.0.1:0"}, tc.args...)...)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit %v, want exit code 1; output:\n%s", err, out)
			}
			msg := strings.TrimSpace(string(out))
			if !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") > 0 || strings.Contains(msg, "goroutine") {
				t.Errorf("want one line naming %q, got:\n%s", tc.want, msg)
			}
		})
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
}

func TestLandingPage(t *testing.T) {
	e := start(t, hostArgs(t, "dgx-h100")...)
	code, body := e.get(t, "/")
	if code != 200 || !strings.Contains(body, `href="/metrics"`) {
		t.Errorf("landing page: HTTP %d, no /metrics link:\n%s", code, body)
	}
}
