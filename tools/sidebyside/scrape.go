// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"time"
)

// acceptHeader is what Prometheus 3 sends by default (scrape_protocols
// OpenMetricsText1.0.0, OpenMetricsText0.0.1, PrometheusText1.0.0,
// PrometheusText0.0.4): the exporter's format negotiation and encoder are
// part of what a scrape costs.
const acceptHeader = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5," +
	"application/openmetrics-text;version=0.0.1;q=0.4," +
	"text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3," +
	"text/plain;version=0.0.4;q=0.2,*/*;q=0.1"

// target is one exporter's /metrics, scraped with one keep-alive
// connection as Prometheus does.
type target struct {
	name   string
	url    string
	pid    int
	client *http.Client
}

func newTarget(name, url string, pid int) *target {
	// An explicit Accept-Encoding turns off the transport's transparent
	// gzip: the body is read compressed, as it crosses the wire.
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	return &target{name: name, url: url, pid: pid, client: &http.Client{Transport: tr}}
}

func (t *target) request(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", t.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("scrape %s: %s", t.name, resp.Status)
	}
	return resp, nil
}

// scrape is one timed scrape: from sending the request to the last byte
// of the compressed body.
func (t *target) scrape() (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := t.request(ctx)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, fmt.Errorf("scrape %s: body: %w", t.name, err)
	}
	return time.Since(start), nil
}

// plain is one untimed scrape without compression: the body and its
// Content-Type.
func (t *target) plain() ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("scrape %s: %w", t.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" {
		return nil, "", fmt.Errorf("scrape %s without gzip: %s, Content-Encoding %q", t.name, resp.Status, resp.Header.Get("Content-Encoding"))
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("scrape %s: body: %w", t.name, err)
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// exposition is what one untimed scrape returned.
type exposition struct {
	contentType string
	gzipped     bool
	samples     int
	failed      []string // collectors that reported failure
}

// failedCollector matches a collector success gauge at 0, in either
// exporter's naming.
var failedCollector = regexp.MustCompile(`^(?:rdma_scrape_collector_success|node_scrape_collector_success)\{collector="([^"]+)"\} 0$`)

// inspect scrapes once and reads the body: whether the exporter answered
// gzip, how many samples it sent and which collectors failed. A benchmark
// of an exporter that fails measures the wrong thing.
func (t *target) inspect() (exposition, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := t.request(ctx)
	if err != nil {
		return exposition{}, err
	}
	defer resp.Body.Close()
	e := exposition{contentType: resp.Header.Get("Content-Type"), gzipped: resp.Header.Get("Content-Encoding") == "gzip"}
	var body io.Reader = resp.Body
	if e.gzipped {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return e, fmt.Errorf("%s: gzip: %w", t.name, err)
		}
		body = zr
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		e.samples++
		if m := failedCollector.FindStringSubmatch(line); m != nil {
			e.failed = append(e.failed, m[1])
		}
	}
	return e, sc.Err()
}

// quantile is the q-quantile (nearest rank) of d, which it sorts.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(q*float64(len(d))+0.5) - 1
	return d[max(0, min(i, len(d)-1))]
}
