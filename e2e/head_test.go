// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHeadMetrics (issue 15, Low): HEAD /metrics answers the GET's status
// and headers with no body, over HTTP/1.1 and over HTTP/2 (TLS with h2
// from the web config), for the text format (plain and gzip) and
// protobuf, and logs no error: a HEAD has no body, so a write to it fails
// over HTTP/2, and logging each failed write would be an ERROR line
// per write (about 110 per scrape).
func TestHeadMetrics(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	cfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n", certFile, keyFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, append(hostArgs(t, "dgx-h100"), "--web.config.file="+cfg)...)
	tlsConf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	var h1, h2 http.Protocols
	h1.SetHTTP1(true)
	h2.SetHTTP2(true)
	clients := []struct {
		proto  string
		client *http.Client
	}{
		{"HTTP/1.1", &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf, Protocols: &h1}}},
		{"HTTP/2.0", &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf, Protocols: &h2}}},
	}
	accepts := []struct{ format, accept string }{
		{"text", "text/plain;version=0.0.4"},
		{"protobuf", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"},
	}
	before := e.stderr.String()
	for _, c := range clients {
		proto, client := c.proto, c.client
		for _, a := range accepts {
			format, accept := a.format, a.accept
			for _, gzip := range []bool{false, true} {
				name := fmt.Sprintf("%s %s gzip=%v", proto, format, gzip)
				get := do(t, client, http.MethodGet, e.addr, accept, gzip)
				head := do(t, client, http.MethodHead, e.addr, accept, gzip)
				if head.proto != proto {
					t.Fatalf("%s: answered over %s", name, head.proto)
				}
				if get.status != http.StatusOK || len(get.body) == 0 {
					t.Errorf("%s: GET is HTTP %d with %d bytes", name, get.status, len(get.body))
				}
				if head.status != http.StatusOK || head.body != "" {
					t.Errorf("%s: HEAD is HTTP %d with a %d-byte body", name, head.status, len(head.body))
				}
				for _, h := range []string{"Content-Type", "Content-Encoding"} {
					if head.header.Get(h) != get.header.Get(h) {
						t.Errorf("%s: HEAD's %s is %q, GET's %q", name, h, head.header.Get(h), get.header.Get(h))
					}
				}
			}
		}
	}
	errors := func(log string) int { return strings.Count(log[len(before):], "level=ERROR") }
	if log := e.settledLog(0, errors); errors(log) > 0 {
		t.Errorf("%d ERROR lines for the HEAD requests:\n%.2000s", errors(log), log[len(before):])
	}
}

type answer struct {
	status int
	proto  string
	header http.Header
	body   string
}

func do(t *testing.T, client *http.Client, method, addr, accept string, gzip bool) answer {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	if gzip {
		// Set by hand, the transport leaves the body compressed.
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s /metrics (Accept %s, gzip %v): %v", method, accept, gzip, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s /metrics: %v", method, err)
	}
	return answer{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, body: string(b)}
}
