// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command bareexporter is the smallest exporter built on client_golang:
// promhttp.Handler over the default registry (the Go and process
// collectors), nothing of its own. tools/sidebyside measures its memory
// beside rdma_doctor's and node_exporter's: what any client_golang
// exporter (yuuki/rdma_exporter is one) is resident with at least, on the
// machine and kernel at hand.
//
//	go run ./tools/bareexporter -listen 127.0.0.1:9999
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve /metrics on")
	flag.Parse()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "bareexporter:", err)
		os.Exit(1)
	}
}
