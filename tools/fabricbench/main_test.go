// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"strings"
	"testing"
)

func TestLiveProcFiles(t *testing.T) {
	pid := os.Getpid()
	if _, err := cpu(pid); err != nil {
		t.Fatal(err)
	}
	rss, hwm, err := memory(pid)
	if err != nil || rss == 0 || hwm < rss {
		t.Errorf("memory = %d, %d, %v: want 0 < RSS <= HWM", rss, hwm, err)
	}
	if c, err := hasChildren(pid); err != nil || c {
		t.Errorf("hasChildren(self) = %v, %v; the test runs no child", c, err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(c.v); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

// The goals table judges each goal on the 4000-host figures, and the
// ratio against treydock from the two exporters' own figures.
func TestSectionJudgesGoals(t *testing.T) {
	size := func(hosts, ports int, sweep, scrape float64, hwm uint64, td float64) *sizeResult {
		return &sizeResult{Hosts: hosts, SwitchPorts: ports,
			RdmaDoctor: rdmaResult{SweepCPUS: sweep, ScrapeCPUS: scrape, ScrapeMedianS: 0.040, HWM: hwm, RSS: hwm},
			Treydock:   &treydockResult{CPUS: td, Scrapes: 1}}
	}
	var b strings.Builder
	section(&b, &results{Sizes: []*sizeResult{
		size(1000, 2000, 1, 0.010, 50<<20, 2),
		size(4000, 8000, 5, 0.041, 250<<20, 10),
	}})
	out := b.String()
	for _, want := range []string{
		"| 5.00 s / 10.00 s = 0.500x | **not met** |",
		"| 40.0 ms | **met** |",
		"peak 250 MiB | **not met** |",
		// 4x the ports: sweep 1.25x per port, scrape 1.03x: linear; memory
		// 5x <= 4 x 1.5.
		"(1.25x)", "**met** |\n\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, "<!-- fabricbench:begin") || !strings.HasSuffix(out, "<!-- fabricbench:end -->\n") {
		t.Errorf("section not between its markers:\n%s", out)
	}
}
