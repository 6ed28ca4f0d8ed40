// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/probe/nstest"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

const (
	probeLatSample = "ib_send_lat_ib_v25.10plus.txt"              // t_typical 1.27 µs
	probeBWSample  = "ib_write_bw_report_gbits_ib_v25.10plus.txt" // 392.34 Gb/s
	probeSecret    = "e2e-probe-secret-0123456789abcdef\n"
)

// probeReplay: every test replays a recorded run over the fake's TCP
// exchange (server listens on -p, client connects).
func probeReplay() map[string]perftesttest.Sides {
	return perftesttest.Replay(probeLatSample, probeBWSample)
}

// scheduledProbeConfig writes a config that schedules ib_send_lat and
// ib_write_bw in loopback on mlx5_0 port 1 every second, run from
// perftestDir (a perftesttest fake).
func scheduledProbeConfig(t *testing.T, perftestDir perftesttest.Dir) string {
	return probeWrite(t, t.TempDir(), "rdma_doctor.yml", fmt.Sprintf(`probe:
  enabled: true
  interval: 1s
  scrape_guard: 1s
  perftest_dir: %s
  tests: [ib_send_lat, ib_write_bw]
  loopback:
    - {device: mlx5_0, port: 1}
`, perftestDir))
}

func probeWrite(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func probeCmd(t *testing.T, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, binary(t), args...)
}

// TestProbeCLI: one run in loopback through the fake perftest (table and
// JSON), bad input refused before anything starts, and a failing run's
// typed error and exit status.
func TestProbeCLI(t *testing.T) {
	testenv.Long(t, "the probe command against a replayed perftest, every exit code (10 s)")
	fake := perftesttest.Install(t, probeReplay())
	dir := t.TempDir()
	cfg := probeWrite(t, dir, "rdma_doctor.yml", fmt.Sprintf("probe:\n  perftest_dir: %s\n  loopback:\n    - {device: mlx5_0, port: 1}\n", fake))
	base := []string{"--config.file=" + cfg, "--path.rootfs=" + filepath.Join(repoRoot(t), "fixtures", "hosts", "dgx-h100"), "probe"}

	out, errOut, code := runCmd(t, probeCmd(t, append(base, "--test=ib_send_lat")...))
	if code != 0 || !strings.Contains(out, "typical 1.27 µs") || !strings.Contains(out, "p99.9 5.19 µs") || !strings.Contains(out, "loopback (loopback, mlx5_0/1 -> mlx5_0/1)") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
	// The bandwidth ratio uses the fixture host's port rate (mlx5_0 is
	// 400 Gb/s NDR there).
	out, errOut, code = runCmd(t, probeCmd(t, append(base, "--test=ib_write_bw", "--format=json")...))
	var res struct {
		Success   bool    `json:"success"`
		PortRate  float64 `json:"port_rate_bytes_per_second"`
		Bandwidth struct {
			Average float64 `json:"average_bytes_per_second"`
		} `json:"bandwidth"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.Success || res.Bandwidth.Average != 392.34e9/8 || res.PortRate != 50e9 {
		t.Errorf("exit %d, %v: %+v\n%s\n%s", code, err, res, out, errOut)
	}
	n := len(fake.Calls(t))

	for _, args := range [][]string{
		{"--test=ib_fast_bw"},
		{"--peer=bad host"},
		{"--peer=-x"},
		{"--size=99999999"},
		{"--test=ib_send_lat", "--duration=10s"},
		{"--device=-d"},
		{"--test=ib_write_bw", "--duration=2s"},
		{"--compare=loopback"},
		{"--compare=node9"}, // no secret
	} {
		out, errOut, code := runCmd(t, probeCmd(t, append(base, args...)...))
		if code != 2 || !strings.HasPrefix(errOut, "rdma_doctor: error: probe") {
			t.Errorf("%v: exit %d, want 2 with a message\n%s%s", args, code, out, errOut)
		}
	}
	if got := len(fake.Calls(t)); got != n {
		t.Errorf("bad input started %d perftest processes", got-n)
	}
}

// TestProbeCLIRealPerftest: the real Debian perftest on a host without RDMA
// devices ends in a typed no_device error and exit status 1.
func TestProbeCLIRealPerftest(t *testing.T) {
	requireTool(t, "ib_write_bw")
	if entries, _ := os.ReadDir("/sys/class/infiniband"); len(entries) > 0 {
		t.Skip("this host has RDMA devices")
	}
	for _, test := range []string{"ib_write_bw", "ib_read_bw", "ib_send_lat"} {
		out, errOut, code := runCmd(t, probeCmd(t, "probe", "--test="+test, "--device=mlx5_0", "--format=json"))
		if code != 1 || !strings.Contains(out, `"error_kind": "no_device"`) {
			t.Errorf("%s: exit %d\n%s\n%s", test, code, out, errOut)
		}
	}
}

// TestProbeScheduled: the server runs the configured rotation and exports
// it: a good test with its values, a failing one with success 0 and its
// reason; the exposition passes promtool.
func TestProbeScheduled(t *testing.T) {
	testenv.Long(t, "the probe scheduler's rounds in a served binary, scraped by promtool (12 s)")
	promtool := requireTool(t, "promtool")
	script := probeReplay()
	script["ib_write_bw"] = perftesttest.Sides{
		Server: perftesttest.Behaviour{Protocol: true},
		Client: perftesttest.Behaviour{StderrFile: "error_completion_retry_exceeded_softiwarp_issue27.txt", Exit: 1, Protocol: true},
	}
	fake := perftesttest.Install(t, script)
	cfg := scheduledProbeConfig(t, fake)
	e := start(t, "--config.file="+cfg, "--path.rootfs="+filepath.Join(repoRoot(t), "fixtures", "hosts", "dgx-h100"))
	// Poll /probe (JSON; it does not count as a scrape) until both tests
	// ran.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, body := e.get(t, "/probe")
		var doc struct {
			Entries []struct {
				Test string `json:"test"`
			} `json:"entries"`
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("/probe: %v\n%s", err, body)
		}
		if len(doc.Entries) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler ran %d of 2 tests in 60 s\n%s\n%s", len(doc.Entries), body, e.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, body := e.get(t, "/metrics")
	for _, want := range []string{
		`rdma_probe_success{device="mlx5_0",memory="host",peer="loopback",port="1",test="ib_send_lat"} 1`,
		`rdma_probe_latency_seconds{device="mlx5_0",memory="host",peer="loopback",port="1",stat="typical",test="ib_send_lat"} 1.27e-06`,
		`rdma_probe_latency_seconds{device="mlx5_0",memory="host",peer="loopback",port="1",stat="p999",test="ib_send_lat"} 5.19e-06`,
		`rdma_probe_success{device="mlx5_0",memory="host",peer="loopback",port="1",test="ib_write_bw"} 0`,
		`rdma_probe_failures_total{device="mlx5_0",memory="host",peer="loopback",port="1",reason="retry_exceeded",test="ib_write_bw"}`,
		`rdma_probe_duration_seconds{device="mlx5_0",memory="host",peer="loopback",port="1",test="ib_send_lat"}`,
		`rdma_probe_last_run_timestamp_seconds{device="mlx5_0",memory="host",peer="loopback",port="1",test="ib_write_bw"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `rdma_probe_bandwidth_bytes_per_second{`) {
		t.Error("a test that never succeeded exports bandwidth values")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		if probs := lintProblems(string(out)); len(probs) > 0 {
			t.Errorf("promtool check metrics:\n%s", strings.Join(probs, "\n"))
		}
	}
}

// TestProbeCompareInNamespaces runs a responder and a prober, both the real
// binary, in two private network namespaces joined by two veth pairs: one
// stands for IPoIB, the other for Ethernet, with 500 µs added each way
// (tc netem, or a delaying relay where the kernel has no netem) and its
// rate limited to 100 Mbit/s (tc tbf). The RDMA row comes from the fake
// perftest over the first pair (the responder starts the server). Then
// "rdma_doctor probe --compare" must print the three rows, the Ethernet
// row at least 500 µs, the IPoIB row faster, and the Ethernet bandwidth
// within 80-105 % of 100 Mbit/s.
func TestProbeCompareInNamespaces(t *testing.T) {
	testenv.Long(t, "probes over a delayed link between network namespaces")
	p := nstest.New(t)
	bin := binary(t)
	p.Link("vib0", "10.199.1.1/30", "vib1", "10.199.1.2/30")
	p.Link("veth0", "10.199.2.1/30", "veth1", "10.199.2.2/30")
	const delay = 500 * time.Microsecond
	ethAddr := "10.199.2.2:9874"
	// A's egress (the stream's direction) is also limited to 100 Mbit/s:
	// by netem's rate where netem exists, else by tbf.
	errA, errB := p.A.Netem("veth0", delay, 100e6), p.B.Netem("veth1", delay, 0)
	relay := errors.Is(errA, nstest.ErrNoNetem) || errors.Is(errB, nstest.ErrNoNetem)
	if !relay && (errA != nil || errB != nil) {
		t.Fatal(errA, errB)
	}
	shaped := true
	if relay {
		if err := p.A.Shape("veth0", 100e6); errors.Is(err, nstest.ErrNoTBF) {
			shaped = false
			t.Log(err, "- the bandwidth checks are left out")
		} else if err != nil {
			t.Fatal(err)
		}
	}

	fake := perftesttest.Install(t, probeReplay())
	dir := t.TempDir()
	secret := probeWrite(t, dir, "probe.secret", probeSecret)
	respCfg := probeWrite(t, dir, "responder.yml", fmt.Sprintf(`probe:
  perftest_dir: %s
  secret_file: %s
  responder:
    enabled: true
    listen: ["10.199.1.2:9874", "10.199.2.2:9874"]
    allowed_tests: [ib_send_lat, ib_write_bw, tcp_lat, tcp_bw]
    allowed_clients: [10.199.0.0/16]
    devices: [{device: mlx5_0, port: 1}]
    perftest_ports: 19000-19010
`, fake, secret))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := p.B.Command(ctx, bin, "--config.file="+respCfg, "--web.listen-address=10.199.1.2:9873", "--log.level=debug")
	var respLog bytes.Buffer
	resp.Stdout, resp.Stderr = &respLog, &respLog
	if err := resp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = resp.Wait()
		if t.Failed() {
			t.Logf("responder log:\n%s", respLog.String())
		}
	})
	// Ready when the HTTP port answers from A.
	for i := 0; ; i++ {
		c, err := p.A.Dial("tcp", "10.199.1.2:9873")
		if err == nil {
			c.Close()
			break
		}
		if i > 200 {
			t.Fatalf("responder did not start: %v\n%s", err, respLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if relay {
		rl, err := p.B.Listen("tcp", "10.199.2.2:9875")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rl.Close() })
		go nstest.DelayRelay(rl, func() (net.Conn, error) { return p.B.Dial("tcp", "10.199.2.2:9874") }, delay)
		ethAddr = "10.199.2.2:9875"
		t.Logf("this kernel has no netem: the Ethernet path goes through a relay adding %v each way", delay)
	}

	proberCfg := probeWrite(t, dir, "prober.yml", fmt.Sprintf(`probe:
  perftest_dir: %s
  secret_file: %s
  peers:
    - name: node2
      address: 10.199.1.2:9874
      device: mlx5_0
      ipoib_address: 10.199.1.2:9874
      ethernet_address: %s
`, fake, secret, ethAddr))
	args := []string{"--config.file=" + proberCfg, "probe", "--compare=node2", "--compare.tcp-iterations=1000", "--compare.tcp-duration=2s"}
	out, errOut, code := runCmd(t, p.A.Command(ctx, bin, append(args, "--format=json")...))
	if code != 0 {
		t.Fatalf("compare: exit %d\n%s\n%s", code, out, errOut)
	}
	var c struct {
		Transports []struct {
			Transport string   `json:"transport"`
			Latency   float64  `json:"latency_seconds"`
			BW        float64  `json:"bandwidth_bytes_per_second"`
			SendCPU   float64  `json:"sender_cpu_percent"`
			Errors    []string `json:"errors"`
		} `json:"transports"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil || len(c.Transports) != 3 {
		t.Fatalf("%v\n%s", err, out)
	}
	rdma, ipoib, eth := c.Transports[0], c.Transports[1], c.Transports[2]
	if rdma.Transport != "RDMA" || rdma.Latency != 1.27e-6 || rdma.BW != 392.34e9/8 {
		t.Errorf("RDMA row (fake perftest through the responder): %+v", rdma)
	}
	if ipoib.Transport != "IPoIB" || eth.Transport != "Ethernet" {
		t.Fatalf("rows %+v", c.Transports)
	}
	t.Logf("IPoIB path %.1f µs, %.1f Mbit/s; Ethernet path %.1f µs, %.1f Mbit/s", ipoib.Latency*1e6, ipoib.BW*8/1e6, eth.Latency*1e6, eth.BW*8/1e6)
	if eth.Latency < delay.Seconds() || eth.Latency > 2.5*delay.Seconds() {
		t.Errorf("Ethernet latency %.1f µs with %v added each way (tolerance: %v to 2.5 × that)", eth.Latency*1e6, delay, delay)
	}
	if ipoib.Latency <= 0 || ipoib.Latency >= eth.Latency {
		t.Errorf("IPoIB latency %.1f µs not below Ethernet's %.1f µs", ipoib.Latency*1e6, eth.Latency*1e6)
	}
	if shaped {
		if bits := eth.BW * 8; bits < 80e6 || bits > 105e6 {
			t.Errorf("Ethernet bandwidth %.1f Mbit/s on a 100 Mbit/s link", bits/1e6)
		}
		if ipoib.BW <= eth.BW {
			t.Errorf("IPoIB bandwidth %.1f Mbit/s not above the shaped Ethernet's", ipoib.BW*8/1e6)
		}
	}
	if ipoib.SendCPU <= 0 || eth.SendCPU <= 0 {
		t.Errorf("no CPU measured: %+v", c.Transports)
	}

	// The human table, as an operator sees it.
	out, errOut, code = runCmd(t, p.A.Command(ctx, bin, args...))
	if code != 0 || !strings.Contains(out, "TRANSPORT") || !strings.Contains(out, "IPoIB") || !strings.Contains(out, "Ethernet") || !strings.Contains(out, "392.34 Gb/s") {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("\n%s", out)

	// A test the responder does not allow: refused, typed, exit 1.
	out, errOut, code = runCmd(t, p.A.Command(ctx, bin, "--config.file="+proberCfg, "probe", "--peer=node2", "--test=ib_read_lat"))
	if code != 1 || !strings.Contains(out, "forbidden") {
		t.Errorf("disallowed test: exit %d\n%s\n%s", code, out, errOut)
	}
}
