// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e runs the built rdma_doctor binary against the fixture hosts and
// real peers (promtool, ibstat).
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes what the tests built once for all of them (the binaries
// and the fake perftest), which no single test's cleanup can.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range []string{binPath, raceBin} {
		if b != "" {
			_ = os.RemoveAll(filepath.Dir(b))
		}
	}
	perftesttest.RemoveBuilt()
	os.Exit(code)
}

// repoRoot is the repository root, one level above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// binary builds rdma_doctor once per test run.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rdma_doctor-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "rdma_doctor")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/rdma_doctor")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// requireTool finds a real peer program. Locally a missing tool skips the
// test with a message; in CI (CI=true) it fails, so nothing skips silently.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	if why, ok := longPeer[name]; ok {
		testenv.Long(t, why)
	}
	pkg, ok := debianPackage[name]
	if !ok {
		t.Fatalf("no install hint for %s: add it to debianPackage", name)
	}
	return testenv.RequireTool(t, name, fmt.Sprintf("%s not installed (Debian: apt-get install %s; .ci/run does)", name, pkg))
}

// longPeer are the peer programs whose tests are long (each tens of
// seconds on 2 cores, the whole e2e package minutes): under -short
// requireTool skips the test (testenv.Long).
var longPeer = map[string]string{
	"chromium":                "renders in headless Chromium",
	"ibsim":                   "runs the simulated fabric (ibsim, opensm)",
	"prometheus":              "runs the real Prometheus",
	"prometheus-alertmanager": "runs the real Alertmanager",
}

// debianPackage is the Debian package that installs each peer program the
// end-to-end tests run, for the skip message.
var debianPackage = map[string]string{
	"chromium":                "chromium",
	"cp":                      "coreutils",
	"ib_write_bw":             "perftest",
	"iblinkinfo":              "infiniband-diags",
	"ibfindnodesusing":        "infiniband-diags",
	"ibnetdiscover":           "infiniband-diags",
	"ibqueryerrors":           "infiniband-diags",
	"ibportstate":             "infiniband-diags",
	"ibroute":                 "infiniband-diags",
	"dump_fts":                "infiniband-diags",
	"ibsim":                   "ibsim-utils",
	"ibstat":                  "infiniband-diags",
	"ibstatus":                "infiniband-diags",
	"ip":                      "iproute2",
	"lspci":                   "pciutils",
	"opensm":                  "opensm",
	"perfquery":               "infiniband-diags",
	"perl":                    "perl-base",
	"prometheus":              "prometheus",
	"prometheus-alertmanager": "prometheus-alertmanager",
	"promtool":                "prometheus",
	"script":                  "bsdutils",
	"sminfo":                  "infiniband-diags",
	"strace":                  "strace",
	"unshare":                 "util-linux",
}

// hosts lists the fixture hosts.
func hosts(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "fixtures", "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatal("no fixture hosts")
	}
	return names
}

// exporter is a running rdma_doctor.
type exporter struct {
	addr   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	// exited is closed once the process has exited; exitErr is then
	// cmd.Wait's error (nil: exit code 0).
	exited  chan struct{}
	exitErr error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// settledLog returns the server's log once count(log) has reached want, or
// once it has not changed for a moment. The log arrives through a pipe that
// os/exec copies on its own goroutine, so a line the server wrote before it
// answered a scrape can still be on its way when the answer is read.
func (e *exporter) settledLog(want int, count func(log string) int) string {
	last, since := e.stderr.String(), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		log := e.stderr.String()
		if count(log) >= want && want > 0 {
			return log
		}
		if log != last {
			last, since = log, time.Now()
		} else if time.Since(since) > 500*time.Millisecond {
			return log
		}
	}
	return e.stderr.String()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// hostArgs are the flags that run the binary on a fixture host, with the
// host's own config file when it has one.
func hostArgs(t testing.TB, host string) []string {
	root := filepath.Join(repoRoot(t), "fixtures", "hosts", host)
	args := []string{"--path.rootfs=" + root}
	cfg := filepath.Join(root, "etc", "rdma_doctor", "rdma_doctor.yml")
	if _, err := os.Stat(cfg); err == nil {
		args = append(args, "--config.file="+cfg)
	}
	return args
}

// firstSample is the log message of the server's first diagnosis.
const firstSample = "first diagnosis ready"

// waitFirstDiagnosis waits until the server logged its first diagnosis:
// it listens before (a hung host read must not keep it from listening),
// and the tests want that diagnosis.
func waitFirstDiagnosis(t testing.TB, e *exporter) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(e.stderr.String(), firstSample); {
		if time.Now().After(deadline) {
			_ = e.cmd.Process.Kill()
			t.Fatalf("rdma_doctor logged no %q within 60 s\n%s", firstSample, e.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start runs the exporter with args on a free loopback port and waits until
// it answers. It is stopped when the test ends.
func start(t testing.TB, args ...string) *exporter {
	t.Helper()
	bin := binary(t)
	for attempt := 0; ; attempt++ {
		e := &exporter{addr: freeAddr(t), stderr: &syncBuffer{}, exited: make(chan struct{})}
		e.cmd = exec.Command(bin, append([]string{"--web.listen-address=" + e.addr, "--log.level=debug"}, args...)...)
		e.cmd.Stderr = e.stderr
		if err := e.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() {
			e.exitErr = e.cmd.Wait()
			close(e.exited)
			exited <- e.exitErr
		}()
		ok := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if c, err := net.DialTimeout("tcp", e.addr, 100*time.Millisecond); err == nil {
				c.Close()
				ok = true
				break
			}
			select {
			case err := <-exited:
				if attempt < 3 && strings.Contains(e.stderr.String(), "address already in use") {
					goto retry
				}
				t.Fatalf("rdma_doctor exited: %v\n%s", err, e.stderr.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if !ok {
			_ = e.cmd.Process.Kill()
			t.Fatalf("rdma_doctor did not listen on %s\n%s", e.addr, e.stderr.String())
		}
		waitFirstDiagnosis(t, e)
		t.Cleanup(func() {
			_ = e.cmd.Process.Kill()
			<-exited
		})
		return e
	retry:
	}
}

func (e *exporter) get(t testing.TB, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, e.stderr.String())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// runBinary runs the binary to completion (for start-up failures), bounded
// in time.
func runBinary(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary(t), args...).CombinedOutput()
	return string(out), err
}

// exitCode is the exit status of a finished command: 0, or the code of an
// *exec.ExitError; any other error (it did not start, a pipe broke) fails
// the test.
func exitCode(t testing.TB, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		t.Fatalf("run: %v", err)
	}
	return 0
}

// runCmd runs cmd and returns its stdout, stderr and exit status.
func runCmd(t testing.TB, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.String())
	}
	return stdout.String(), stderr.String(), exitCode(t, err)
}
