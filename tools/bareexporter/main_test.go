// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// With -body every answer is the file's bytes: plain, or gzip that the
// standard library's reader takes back to the same bytes, request after
// request through the one reused writer.
func TestStaticBody(t *testing.T) {
	body := bytes.Repeat([]byte("rdma_port_state{device=\"mlx5_0\",port=\"1\"} 4\n"), 500)
	h := &staticBody{body: body, contentType: "text/plain; version=0.0.4; charset=utf-8"}
	for i := range 3 {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		gz := i > 0
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("Content-Type"); got != h.contentType {
			t.Errorf("Content-Type %q", got)
		}
		got := rec.Body.Bytes()
		if gz {
			if rec.Header().Get("Content-Encoding") != "gzip" {
				t.Fatalf("request %d asked for gzip, got Content-Encoding %q", i, rec.Header().Get("Content-Encoding"))
			}
			if len(got) >= len(body)/4 {
				t.Errorf("request %d: %d compressed bytes of %d", i, len(got), len(body))
			}
			zr, err := gzip.NewReader(bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			if got, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, body) {
			t.Errorf("request %d (gzip %v): %d bytes back, want the %d of the body", i, gz, len(got), len(body))
		}
	}
}
