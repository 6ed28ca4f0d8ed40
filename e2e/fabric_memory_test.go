// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// memoryFabricHosts is the fat tree of TestFabricScrapeMemoryOnIbsim:
// 189 36-port leaves and 18 spines, 10,206 switch ports.
const memoryFabricHosts = 3400

// memoryLimit is --web.max-requests-memory's default and the Helm
// chart's memory limit: the binary's peak resident set must stay within
// it on a fabric of 10,000 switch ports.
const memoryLimit = 256 << 20

// TestFabricScrapeMemoryOnIbsim (issue 35, done-when): the binary on a
// simulated fat tree of 10,206 switch ports (ibsim, the real opensm and
// infiniband-diags) is scraped by 20 concurrent clients of each format
// (text, protobuf, each plain and gzip, protobuf text and compact text),
// then by a Prometheus scrape while 15 clients that asked for text and
// one that asked for protobuf text read nothing. Every client is answered
// 200 whole (a debugging-format client reads 2 MiB and hangs up: those
// run one at a time and make their 70 MB answers at text-marshalling
// speed) or refused 503, the Prometheus scrape 200, and the process's
// peak resident set (VmHWM), the fabric's scan, sweeps and renders
// included, stays within memoryLimit.
func TestFabricScrapeMemoryOnIbsim(t *testing.T) {
	testenv.Long(t, "a fabric of 10,206 switch ports")
	for _, tool := range []string{"ibsim", "opensm", "iblinkinfo", "ibnetdiscover", "ibqueryerrors", "sminfo"} {
		requireTool(t, tool)
	}
	if _, err := ibsimtest.Umad2sim(); err != nil {
		testenv.SkipOrFail(t, err.Error()+"; .ci/run installs it")
	}
	shape := ibsimtest.FatTreeShape(memoryFabricHosts)
	dir := t.TempDir()
	netFile := filepath.Join(dir, "fattree.net")
	if err := os.WriteFile(netFile, []byte(shape.NetFile()), 0o644); err != nil {
		t.Fatal(err)
	}
	sim, err := ibsimtest.Start(dir, netFile, 5*time.Minute, shape.SimArgs()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)

	addr := freeAddr(t)
	logs := &syncBuffer{}
	args := append(hostArgs(t, "sm-opensm"), "--web.listen-address="+addr,
		"--collector.disable-defaults", "--collector.fabric",
		"--collector.fabric.interval=10m", "--collector.fabric.timeout=3m",
		"--collector.fabric.counters-interval=30s", "--collector.fabric.counters-timeout=3m")
	cmd := exec.Command(binary(t), args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = sim.Env, logs, logs
	procDir := t.TempDir()
	p, err := ibsimtest.StartProc(cmd, procDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopExporter(t, p, procDir) })

	// The first sweep read every switch port (a state to reach; the
	// test's deadline bounds the wait).
	base := "http://" + addr + "/metrics"
	swept := regexp.MustCompile(`(?m)^rdma_fabric_counter_sweep_ports (\d+)$`)
	for {
		if _, body, err := fetch(base, "text/plain", ""); err == nil &&
			strings.Contains(body, "\nrdma_fabric_counter_sweep_success 1\n") && strings.Contains(body, "\nrdma_fabric_counter_sweep_ports_unknown 0\n") {
			if m := swept.FindStringSubmatch(body); m != nil {
				if n, _ := strconv.Atoi(m[1]); n >= 10000 {
					t.Logf("%d switch ports swept (the shape has %d)", n, shape.SwitchPorts())
					break
				}
			}
		}
		select {
		case <-p.Exited():
			t.Fatalf("rdma_doctor exited:\n%s", ibsimtest.Tail(logs.String(), 3000))
		case <-time.After(time.Second):
		}
		if d, ok := t.Deadline(); ok && time.Until(d) < time.Minute {
			t.Fatalf("no complete sweep of 10,000 switch ports:\n%s", ibsimtest.Tail(logs.String(), 3000))
		}
	}

	const protobuf = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
	const protoText = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text"
	for _, f := range []struct {
		name, accept, encoding string
		debugging              bool
	}{
		{"text", "text/plain;version=0.0.4", "", false},
		{"text gzip", "text/plain;version=0.0.4", "gzip", false},
		{"protobuf", protobuf, "", false},
		{"protobuf gzip", protobuf, "gzip", false},
		{"protobuf text", protoText, "gzip", true},
		{"protobuf compact", strings.Replace(protoText, "encoding=text", "encoding=compact-text", 1), "gzip", true},
	} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, n, err := scrapeClient(base, f.accept, f.encoding, f.debugging)
				mu.Lock()
				defer mu.Unlock()
				codes[code]++
				if err != nil || code != http.StatusOK && code != http.StatusServiceUnavailable || code == http.StatusOK && n < 1<<20 {
					t.Errorf("%s: HTTP %d, %d bytes: %v", f.name, code, n, err)
				}
			}()
		}
		wg.Wait()
		t.Logf("%s: 20 concurrent clients: %d answered 200, %d refused 503", f.name, codes[http.StatusOK], codes[http.StatusServiceUnavailable])
		if codes[http.StatusOK] == 0 {
			t.Errorf("%s: no client answered", f.name)
		}
	}

	// 15 text clients and one in protobuf text that never read, then a
	// Prometheus scrape.
	for range 15 {
		silentClient(t, addr, "text/plain;version=0.0.4")
	}
	silentClient(t, addr, protoText)
	code, n, err := scrapeClient(base, protobuf, "gzip", false)
	if err != nil || code != http.StatusOK {
		t.Errorf("a Prometheus scrape beside 16 non-readers: HTTP %d, %d bytes: %v", code, n, err)
	}

	peak := subPeakRSS(t, p.Pid())
	t.Logf("peak resident set (VmHWM) %.1f MiB, limit %d MiB", float64(peak)/(1<<20), memoryLimit>>20)
	if peak > memoryLimit {
		t.Errorf("peak resident set %d bytes, more than %d", peak, int64(memoryLimit))
	}
}

// fetch GETs url with accept and accept-encoding, its body read whole
// and not decompressed.
func fetch(url, accept, encoding string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", encoding)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// scrapeClient asks for /metrics in a format and reads the answer (gzip
// decompressed), whole or, with prefix, its first 2 MiB; it returns the
// status and the bytes read.
func scrapeClient(url, accept, encoding string, prefix bool) (int, int64, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", encoding)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
		return resp.StatusCode, 0, nil
	}
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return resp.StatusCode, 0, err
		}
		body = zr
	}
	if prefix {
		n, err := io.CopyN(io.Discard, body, 2<<20)
		return resp.StatusCode, n, err
	}
	n, err := io.Copy(io.Discard, body)
	return resp.StatusCode, n, err
}

// silentClient asks for /metrics with accept on a connection with a small
// receive buffer and never reads; the connection is closed at the end of
// the test.
func silentClient(t *testing.T, addr, accept string) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: %s\r\n\r\n", accept); err != nil {
		t.Fatal(err)
	}
}
