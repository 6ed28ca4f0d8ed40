// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestGzipScrape checks the compressed /metrics as Prometheus asks for it
// (Accept-Encoding: gzip): the header says gzip, the body is a valid gzip
// stream for the standard library's reader (the server compresses with
// klauspost/compress), and it holds the same exposition as an uncompressed
// scrape.
func TestGzipScrape(t *testing.T) {
	e := start(t, hostArgs(t, "dgx-h100")...)
	fetch := func(encoding string) (*http.Response, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+"/metrics", nil)
		req.Header.Set("Accept-Encoding", encoding)
		// DisableCompression: the transport must not decode the body
		// for us; this test reads it as it crossed the wire.
		c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics (Accept-Encoding %s): HTTP %d", encoding, resp.StatusCode)
		}
		return resp, b
	}
	resp, compressed := fetch("gzip")
	if got := resp.Header.Get("Content-Encoding"); got != "gzip" {
		t.Fatalf("Content-Encoding %q, want gzip", got)
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		t.Fatalf("not a gzip stream: %v", err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip stream broken: %v", err)
	}
	if err := zr.Close(); err != nil {
		t.Fatalf("gzip trailer: %v", err)
	}
	if len(compressed) >= len(body) {
		t.Errorf("gzip body of %d bytes for %d bytes of text: not compressed", len(compressed), len(body))
	}
	resp, plain := fetch("identity")
	if got := resp.Header.Get("Content-Encoding"); got != "" {
		t.Fatalf("Content-Encoding %q without gzip asked", got)
	}
	if got, want := stable(string(body)), stable(string(plain)); got != want || got == "" {
		t.Errorf("gzip scrape differs from the plain one:\n%s", lineDiff(want, got))
	}
}
