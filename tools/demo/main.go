// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command demo (make demo) runs the built rdma_doctor on several fixture
// hosts, and on the simulated fabric when ibsim is installed, scraped by
// the real Prometheus with the shipped rules, and prints where to look:
// every dashboard query has data to show there. Ctrl-C stops it all.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/demo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	binary := flag.String("binary", "./rdma_doctor", "the built rdma_doctor (make build)")
	prometheus := flag.String("prometheus", "prometheus", "the prometheus binary (Debian: apt-get install prometheus)")
	listen := flag.String("web.listen-address", "127.0.0.1:9090", "Prometheus's listen address")
	hosts := flag.String("hosts", strings.Join(demo.Hosts, ","), "fixture hosts (fixtures/hosts) to serve, comma-separated")
	fabric := flag.Bool("fabric", true, "also run the simulated fabric (ibsim, opensm) when installed")
	interval := flag.Duration("scrape-interval", 5*time.Second, "Prometheus's scrape and rule evaluation interval")
	flag.Parse()

	// Signals are caught from here to the end of run, so a second Ctrl-C
	// while the processes stop does not leave them running.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	promBin, err := exec.LookPath(*prometheus)
	if err != nil {
		return fmt.Errorf("%w (Debian: apt-get install prometheus)", err)
	}
	if _, err := os.Stat(*binary); err != nil {
		return fmt.Errorf("%w (make build)", err)
	}
	dir, err := os.MkdirTemp("", "rdma_doctor-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	d, err := demo.Start(demo.Options{
		Binary: *binary, Prometheus: promBin, Root: root, Dir: dir,
		Hosts: strings.Split(*hosts, ","), Fabric: *fabric,
		ScrapeInterval: *interval, PrometheusAddr: *listen,
	})
	if err != nil {
		return err
	}
	defer d.Close()

	fmt.Printf("Prometheus: %s (job %q, the shipped rules; recording rules fill after two scrapes, rate5m panels within a minute)\n", d.URL, demo.Job)
	for _, t := range d.Targets {
		fmt.Printf("  rdma_doctor %-32s http://%s/metrics  (log %s)\n", t.Name, t.Addr, t.Log)
	}
	if d.FabricErr != nil {
		fmt.Printf("  no fabric: %v\n", d.FabricErr)
	}
	fmt.Println("Point Grafana's Prometheus data source at the URL and import dashboards/*.json, or query it directly. Ctrl-C stops everything.")
	<-ctx.Done()
	fmt.Println("stopping")
	return nil
}
