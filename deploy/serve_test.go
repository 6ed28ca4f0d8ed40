// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// What the install-path tests (image, package) share: a static binary built
// the way promu and make build build it, a free loopback port, and a server
// started from an installed artefact and scraped on a fixture host.

// servedHost is the fixture host the installed artefacts serve, and a
// series that only that host exports.
const (
	servedHost   = "cx6-hdr-fdr"
	servedSeries = `rdma_port_info{device="mlx5_1",link_layer="InfiniBand",netdev="ibp59s0f1",port="1",port_guid="0xb83fd20300a41f3d",speed="HDR",width="2X"} 1`
)

func fixtureHost(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "fixtures", "hosts", servedHost))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// requireRoot: the image and package tests mount, chroot and dpkg -i.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root (mount namespaces, chroot, dpkg); CI runs as root")
	}
}

// buildStatic builds cmd/rdma_doctor as make build does (CGO_ENABLED=0:
// static, so it runs in a scratch image) into dir/name.
func buildStatic(t *testing.T, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/rdma_doctor")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// freePort returns a loopback port nothing listened on a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// serve starts cmd (an rdma_doctor serve listening on addr, in its own
// process group), waits for its /metrics to answer and returns the page. The
// process group is killed at the end of the test.
func serve(t *testing.T, cmd *exec.Cmd, addr string) string {
	t.Helper()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once Wait returns, so the loop below and the
	// cleanup can both wait on it (a channel send would reach only one).
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	client := &http.Client{Timeout: 10 * time.Second}
	// Bounded: a server that does not answer within a minute has failed.
	for deadline := time.Now().Add(time.Minute); ; {
		select {
		case <-exited:
			t.Fatalf("%s exited: %v\n%s", cmd.Path, waitErr, log.String())
		default:
		}
		resp, err := client.Get("http://" + addr + "/metrics")
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				return string(b)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no /metrics on %s: %v\n%s", addr, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkServed checks a scrape is the fixture host's, read in full.
func checkServed(t *testing.T, page string) {
	t.Helper()
	for _, want := range []string{servedSeries, `rdma_scrape_collector_success{collector="infiniband"} 1`} {
		if !strings.Contains(page, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
