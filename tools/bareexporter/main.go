// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command bareexporter is the least an exporter can be, in two forms that
// tools/sidebyside measures beside rdma_doctor and node_exporter.
//
// By default it is the smallest exporter built on client_golang:
// promhttp.Handler over the default registry (the Go and process
// collectors), nothing of its own. Its memory is what any client_golang
// exporter (yuuki/rdma_exporter is one) is resident with at least, on the
// machine and kernel at hand.
//
// With -body it serves that file's bytes as /metrics instead, compressed
// per request as rdma_doctor compresses (klauspost/compress gzip at
// BestSpeed, one reused writer) when the request asks for gzip: the cost of
// answering a scrape with a given exposition over net/http, without
// reading anything or making the text. Given rdma_doctor's own exposition,
// it is the floor under rdma_doctor's fixed cost per scrape.
//
//	go run ./tools/bareexporter -listen 127.0.0.1:9999 [-body exposition.txt -content-type '...']
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve /metrics on")
	body := flag.String("body", "", "serve this file's bytes as /metrics (gzip-compressed per request when asked) instead of client_golang's default registry")
	contentType := flag.String("content-type", "text/plain; version=0.0.4; charset=utf-8", "Content-Type of the -body answers")
	flag.Parse()
	handler := promhttp.Handler()
	if *body != "" {
		b, err := os.ReadFile(*body)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bareexporter:", err)
			os.Exit(2)
		}
		handler = &staticBody{body: b, contentType: *contentType}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "bareexporter:", err)
		os.Exit(1)
	}
}

// staticBody answers every request with body.
type staticBody struct {
	body        []byte
	contentType string
	mu          sync.Mutex // guards gz: the harness scrapes one at a time
	gz          *gzip.Writer
}

func (s *staticBody) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", s.contentType)
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		_, _ = w.Write(s.body)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gz == nil {
		s.gz, _ = gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
	} else {
		s.gz.Reset(w)
	}
	_, _ = s.gz.Write(s.body)
	_ = s.gz.Close()
}
