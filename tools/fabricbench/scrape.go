// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// acceptHeader is what Prometheus 3 sends by default: the exporter's
// format negotiation and encoder are part of what a scrape costs.
const acceptHeader = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5," +
	"application/openmetrics-text;version=0.0.1;q=0.4," +
	"text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3," +
	"text/plain;version=0.0.4;q=0.2,*/*;q=0.1"

// target is an exporter's /metrics, scraped over one keep-alive
// connection with gzip, as Prometheus does.
type target struct {
	url    string
	client *http.Client
}

func newTarget(addr string) *target {
	// An explicit Accept-Encoding turns off the transport's transparent
	// gzip: the body is read compressed, as it crosses the wire.
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	return &target{url: "http://" + addr + "/metrics", client: &http.Client{Transport: tr}}
}

// scrape is one scrape: its wall time (request to the last byte of the
// compressed body) and the body, uncompressed after the timing.
func (t *target) scrape(timeout time.Duration) (time.Duration, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", strconv.Itoa(int(timeout.Seconds())))
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	wall := time.Since(start)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: body: %w", t.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("%s: %s", t.url, resp.Status)
	}
	body := raw
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return 0, nil, fmt.Errorf("%s: gzip: %w", t.url, err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			return 0, nil, fmt.Errorf("%s: gzip: %w", t.url, err)
		}
	}
	return wall, body, nil
}

// samples counts the sample lines of an exposition (neither comments nor
// blank lines).
func samples(body []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if l := sc.Bytes(); len(l) > 0 && l[0] != '#' {
			n++
		}
	}
	return n
}

// value is the value of the unlabelled series name; ok is false when it
// is absent or not a number.
func value(body []byte, name string) (float64, bool) {
	for l := range strings.SplitSeq(string(body), "\n") {
		rest, found := strings.CutPrefix(l, name+" ")
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil
	}
	return 0, false
}

// freeAddr is a loopback address with a port free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitListen waits until addr accepts connections or exited is closed.
func waitListen(addr string, exited <-chan struct{}, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			return fmt.Errorf("exited before listening on %s", addr)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("not listening on %s after %v", addr, timeout)
}

// sumValues sums every series of the metric name, whatever its labels.
func sumValues(body []byte, name string) float64 {
	sum := 0.0
	for l := range strings.SplitSeq(string(body), "\n") {
		rest, found := strings.CutPrefix(l, name)
		if !found || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			if v, err := strconv.ParseFloat(rest[i+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}
