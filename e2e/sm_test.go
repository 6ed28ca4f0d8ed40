// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smSecrets are the unique secret values of the sm-opensm fixture host
// (fixtures/hosts.d/30-sm.sh) plus those the tests below add. smSecretStem
// is their common prefix: no part of any of them may appear anywhere.
var smSecrets = []string{
	"0x5ec7e7f1ab5c0de1", "0x5ec7e7f2ab5c0de2", "0x5ec7e7f3ab5c0de3", "0x5ec7e7f4ab5c0de4", "0x5ec7e7f5ab5c0de5",
	"0x5ec7e7f6ab5c0de6", "0x5ec7e7f7ab5c0de7", "0x5ec7e7f8ab5c0de8",
}

const smSecretStem = "5ec7e7f"

// copyHost copies a fixture host (symlinks kept) so a test can add files.
func smCopyHost(t *testing.T, host string) string {
	t.Helper()
	src := filepath.Join(repoRoot(t), "fixtures", "hosts", host)
	dst := filepath.Join(t.TempDir(), host)
	out, err := exec.Command("cp", "-a", src, dst).CombinedOutput()
	if err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

func smWriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func smAppendFile(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// fakeTool writes an executable that stands in for sminfo or iblinkinfo.
func smFakeTool(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	smWriteFile(t, p, "#!/bin/sh\n"+body)
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func smToolFixture(t *testing.T, name string) string {
	return filepath.Join(repoRoot(t), "fixtures", "tools", name)
}

// serve runs the binary with exactly args (no default log level) until the
// test ends, and returns its address and a function that returns what it
// has logged so far.
func smServe(t *testing.T, args ...string) (string, func() string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		addr := freeAddr(t)
		stderr := &syncBuffer{}
		cmd := exec.Command(binary(t), append([]string{"--web.listen-address=" + addr}, args...)...)
		cmd.Stderr, cmd.Stdout = stderr, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		ok := false
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !ok; {
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				ok = true
				break
			}
			select {
			case err := <-exited:
				if attempt < 3 && strings.Contains(stderr.String(), "address already in use") {
					goto retry
				}
				t.Fatalf("rdma_doctor exited: %v\n%s", err, stderr.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if !ok {
			_ = cmd.Process.Kill()
			t.Fatalf("rdma_doctor did not listen\n%s", stderr.String())
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		return addr, stderr.String
	retry:
	}
}

func smFetch(t *testing.T, addr, path, accept string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func smAssertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(strings.ToLower(s), smSecretStem) {
		i := strings.Index(strings.ToLower(s), smSecretStem)
		lo, hi := max(0, i-200), min(len(s), i+60)
		t.Errorf("%s leaks a secret: ...%s...", what, s[lo:hi])
	}
}

// leakyHost is sm-opensm with more ways to leak: malformed secret lines,
// an option whose bad value is reported, a second opensm with its key
// glued to -k and passed as --cc_key=, and a standby SM's sysconfig key.
func smLeakyHost(t *testing.T) string {
	root := smCopyHost(t, "sm-opensm")
	smAppendFile(t, filepath.Join(root, "etc/rdma/opensm.conf"),
		"m_key="+smSecrets[5]+"\nsm_key\n"+smSecrets[6]+"\nlmc many\n")
	smWriteFile(t, filepath.Join(root, "proc/3100/comm"), "opensm\n")
	smWriteFile(t, filepath.Join(root, "proc/3100/cmdline"),
		"/usr/sbin/opensm\x00-k"+smSecrets[7]+"\x00--cc_key="+smSecrets[5]+"\x00-p\x00high\x00")
	smAppendFile(t, filepath.Join(root, "etc/sysconfig/opensm"), "SM_KEY="+smSecrets[6]+"\n")
	// The log (a real opensm log) ends with an error that prints keys.
	log, err := os.ReadFile(smToolFixture(t, "opensm-master-ibsim.log"))
	if err != nil {
		t.Fatal(err)
	}
	smWriteFile(t, filepath.Join(root, "var/log/opensm.log"), string(log)+
		"Nov 30 16:40:02 000001 [918256C0] 0x01 -> osm_sminfo_rcv: ERR 2F18: SM_Key "+smSecrets[7]+" does not match, m_key="+smSecrets[5]+"\n")
	return root
}

// TestSecretsNeverLeak runs the exporter on a host whose OpenSM config and
// command lines hold unique secret values, with every log format and
// level, scrapes every exposition format and every page, runs the diagnose
// command in every format, and greps everything for the secrets.
func TestSecretsNeverLeak(t *testing.T) {
	root := smLeakyHost(t)
	// The files really hold the secrets, or this test proves nothing.
	conf, _ := os.ReadFile(filepath.Join(root, "etc/rdma/opensm.conf"))
	for _, s := range smSecrets[:4] {
		if !strings.Contains(string(conf), s) {
			t.Fatalf("fixture opensm.conf lacks %s", s)
		}
	}
	sminfo := smFakeTool(t, "sminfo", "cat "+smToolFixture(t, "sminfo-master-ibsim.txt")+"\n")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/abi_version"), "5\n")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/ibdev"), "mlx5_0\n")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/port"), "1\n")
	smWriteFile(t, filepath.Join(root, "dev/infiniband/umad0"), "")
	iblinkinfo := smFakeTool(t, "iblinkinfo", "cat "+smToolFixture(t, "iblinkinfo-l-generated-hdr-fdr-downgrade.txt")+"\n")

	for _, format := range []string{"logfmt", "json"} {
		for _, level := range []string{"debug", "info", "warn", "error"} {
			t.Run(format+"/"+level, func(t *testing.T) {
				addr, logs := smServe(t, "--path.rootfs="+root, "--log.format="+format, "--log.level="+level,
					"--collector.sm.sminfo-path="+sminfo, "--collector.fabric", "--collector.fabric.iblinkinfo-path="+iblinkinfo)
				var bodies []string
				for _, accept := range []string{"", "text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0",
					"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"} {
					code, body := smFetch(t, addr, "/metrics", accept)
					if code != 200 {
						t.Fatalf("/metrics (%s): HTTP %d", accept, code)
					}
					smAssertNoSecret(t, "/metrics "+accept, body)
					bodies = append(bodies, body)
				}
				if !strings.Contains(bodies[0], `rdma_sm_opensm_config_info{`) || !strings.Contains(bodies[0], `rdma_sm_opensm_processes 2`) {
					t.Errorf("the OpenSM series are missing, so nothing was read:\n%s", smGrep(bodies[0], "rdma_sm_"))
				}
				// The first diagnosis may still be running on a loaded
				// machine (the server listens before it is ready): wait,
				// bounded, for a report before judging the pages.
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
					if _, body := smFetch(t, addr, "/diagnose", ""); !strings.Contains(body, "no diagnosis yet") {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("/diagnose had no report after a minute")
					}
				}
				for _, page := range []string{"/", "/diagnose", "/diagnose?format=json", "/diagnose?format=html", "/diagnose?format=nhc", "/diagnose?format=text&verbose=1"} {
					_, body := smFetch(t, addr, page, "")
					smAssertNoSecret(t, page, body)
					// verbose: the log's lines are the evidence of a passing sm.local.
					if page == "/diagnose?format=text&verbose=1" && !strings.Contains(body, "ERR 2F18: SM_Key <redacted> does not match, m_key=<redacted>") {
						t.Errorf("the log's error line is not in /diagnose, so the log was not read:\n%s", body)
					}
				}
				// Give the background sminfo and iblinkinfo a moment so
				// their log lines are in too.
				smWaitFor(t, addr, "rdma_fabric_scans_total 1")
				smAssertNoSecret(t, "logs", logs())
				if level == "debug" && !strings.Contains(logs(), "level") {
					t.Errorf("no log output at debug level:\n%s", logs())
				}
			})
		}
	}

	// The diagnose command, in every format, if this build has it.
	if out, _ := runBinary(t, "diagnose", "--help"); strings.Contains(out, "--format") {
		for _, format := range []string{"text", "json", "html", "nhc"} {
			out, _ := runBinary(t, "--path.rootfs="+root, "--log.level=debug", "diagnose", "--format="+format, "--verbose")
			smAssertNoSecret(t, "diagnose --format="+format, out)
		}
	}
}

func smGrep(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// waitFor scrapes until a line with the given prefix appears (the
// background runners report after their first round).
func smWaitFor(t *testing.T, addr, prefix string) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, body = smFetch(t, addr, "/metrics", "")
		if hasSeries(body, prefix) {
			return body
		}
	}
	t.Fatalf("no %q after 60s:\n%s", prefix, smGrep(body, "rdma_sm_")+smGrep(body, "rdma_fabric_"))
	return ""
}

// TestSminfoBackground: on a host with umad, sminfo runs in the background
// (here a fake that replays the recorded ibsim answer); a scrape shows its
// result; a hung sminfo is killed and is a metric, not a broken scrape.
func TestSminfoBackground(t *testing.T) {
	root := smCopyHost(t, "sm-opensm")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/ibdev"), "mlx5_0\n")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/port"), "1\n")
	smWriteFile(t, filepath.Join(root, "dev/infiniband/umad0"), "")

	ok := smFakeTool(t, "sminfo", "cat "+smToolFixture(t, "sminfo-master-ibsim.txt")+"\n")
	e := start(t, "--path.rootfs="+root, "--collector.sm.sminfo-path="+ok)
	var code int
	body := smWaitFor(t, e.addr, `rdma_sm_sminfo_success{device="mlx5_0",port="1"} 1`)
	for _, want := range []string{
		`rdma_sm_info{device="mlx5_0",port="1",sm_guid="0x0000000000100001",sm_lid="4",state="MASTER"} 1`,
		`rdma_sm_priority{device="mlx5_0",port="1"} 14`,
		`rdma_sm_state{device="mlx5_0",port="1"} 3`,
		`rdma_sm_activity_count{device="mlx5_0",port="1"} 411`,
		`rdma_scrape_collector_success{collector="sm"} 1`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("missing %s", want)
		}
	}

	// A scrape while sminfo hangs (long timeout) answers at once: the
	// hung process is still there when the scrape has returned.
	dir := t.TempDir()
	hung := smFakeTool(t, "sminfo", "echo $$ >"+dir+"/pid\nexec sleep 1000\n")
	e = start(t, "--path.rootfs="+root, "--collector.sm.sminfo-path="+hung, "--collector.sm.sminfo-timeout=1h")
	pidOf := func() string {
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if b, err := os.ReadFile(dir + "/pid"); err == nil && len(b) > 0 {
				return strings.TrimSpace(string(b))
			}
		}
		t.Fatal("the fake sminfo never started")
		return ""
	}
	pid := pidOf()
	t.Cleanup(func() { _ = exec.Command("kill", "-9", pid).Run() })
	code, body = e.get(t, "/metrics")
	if code != 200 || !hasSeries(body, `rdma_scrape_collector_success{collector="sm"} 1`) {
		t.Fatalf("scrape during a hung sminfo: HTTP %d\n%s", code, smGrep(body, "rdma_scrape_collector_success"))
	}
	if _, err := os.Stat("/proc/" + pid); err != nil {
		t.Errorf("the hung sminfo is gone before the scrape returned: the scrape waited for it (%v)", err)
	}
	if hasSeries(body, "rdma_sm_sminfo_success") {
		t.Error("a result for a run that has not finished")
	}

	// With a short timeout the hung sminfo is killed and reaped, and that
	// is a metric, one warning and the collector's success 0 (its SM
	// series are missing), not a failed scrape.
	dir = t.TempDir()
	hung = smFakeTool(t, "sminfo", "echo $$ >"+dir+"/pid\nexec sleep 1000\n")
	e = start(t, "--path.rootfs="+root, "--collector.sm.sminfo-path="+hung, "--collector.sm.sminfo-timeout=500ms")
	body = smWaitFor(t, e.addr, `rdma_sm_sminfo_success{device="mlx5_0",port="1"} 0`)
	if !hasSeries(body, `rdma_scrape_collector_success{collector="sm"} 0`) || !hasSeries(body, `rdma_scrape_collector_errors{collector="sm"} 1`) {
		t.Errorf("a failed sminfo is not the sm collector's error:\n%s", smGrep(body, "rdma_scrape_collector_"))
	}
	pid = pidOf()
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Errorf("hung sminfo %s still exists after its timeout (alive or a zombie)", pid)
	}
	failed := func(log string) int { return strings.Count(log, "sminfo failed") }
	if n := failed(e.settledLog(0, failed)); n != 1 {
		t.Errorf("%d warnings for a failing sminfo, want 1:\n%s", n, e.stderr.String())
	}
}

// TestRealSminfoOnFixture runs the real Debian sminfo as the exporter's
// subprocess for a fixture port: no umad here, so it fails, and that is a
// metric and one log line with its own message.
func TestRealSminfoOnFixture(t *testing.T) {
	real := requireTool(t, "sminfo")
	if _, err := os.Stat("/sys/class/infiniband_mad/abi_version"); err == nil {
		t.Skip("this machine has ib_umad")
	}
	root := smCopyHost(t, "sm-opensm")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/ibdev"), "mlx5_0\n")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/port"), "1\n")
	smWriteFile(t, filepath.Join(root, "dev/infiniband/umad0"), "")
	e := start(t, "--path.rootfs="+root, "--collector.sm.sminfo-path="+real)
	smWaitFor(t, e.addr, `rdma_sm_sminfo_failures_total{device="mlx5_0",port="1"} 1`)
	opened := func(log string) int { return strings.Count(log, "Failed to open 'mlx5_0' port '1'") }
	if opened(e.settledLog(1, opened)) == 0 {
		t.Errorf("the log does not carry sminfo's message:\n%s", e.stderr.String())
	}
}

// TestFabricFindsDowngrade: the fabric collector (off by default) finds the
// FDR-trained and the 2X links of the generated HDR fabric.
func TestFabricFindsDowngrade(t *testing.T) {
	e := start(t, hostArgs(t, "sm-opensm")...)
	_, body := e.get(t, "/metrics")
	if hasSeries(body, "rdma_fabric_") {
		t.Error("the fabric collector is on by default")
	}
	fake := smFakeTool(t, "iblinkinfo", `[ "$1" = --line ] || { echo "want --line, got $*" >&2; exit 2; }
cat `+smToolFixture(t, "iblinkinfo-l-generated-hdr-fdr-downgrade.txt")+"\n")
	e = start(t, append(hostArgs(t, "sm-opensm"), "--collector.fabric", "--collector.fabric.iblinkinfo-path="+fake)...)
	body = smWaitFor(t, e.addr, "rdma_fabric_scans_total 1")
	for _, want := range []string{
		"rdma_fabric_scan_success 1",
		"rdma_fabric_links 8",
		"rdma_fabric_links_degraded 2",
		`rdma_fabric_link_degraded{guid="0x1070fd0300a1b400",node="MF0;leaf2:MQM8700/U1",port="1",remote_guid="0xb83fd20300a41f60",remote_node="gpu03 mlx5_0",remote_port="1"} 1`,
		`rdma_fabric_link_rate_bytes_per_second{guid="0x1070fd0300a1b400",node="MF0;leaf2:MQM8700/U1",port="1",remote_guid="0xb83fd20300a41f60",remote_node="gpu03 mlx5_0",remote_port="1"} 7e+09`,
		`rdma_fabric_link_degraded{guid="0x1070fd0300a1b300",node="MF0;leaf1:MQM8700/U1",port="1",remote_guid="0xb83fd20300a41f40",remote_node="gpu01 mlx5_0",remote_port="1"} 0`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	if t.Failed() {
		fmt.Println(smGrep(body, "rdma_fabric_"))
	}
}
