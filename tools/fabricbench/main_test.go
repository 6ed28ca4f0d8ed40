// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
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

// The windows' CPU is split into a sweep's and a route read's: windows
// with and without a read tell them apart; without both kinds they cannot
// be, and that is said, never guessed.
func TestSplitWindows(t *testing.T) {
	sweep, read, ok, _ := splitWindows([]window{
		{Sweeps: 1, Reads: 1, CPUS: 1.5}, {Sweeps: 1, CPUS: 1.0},
		{Sweeps: 1, Reads: 1, CPUS: 1.7}, {Sweeps: 1, CPUS: 1.2},
	})
	if !ok || math.Abs(sweep-1.1) > 1e-9 || math.Abs(read-0.5) > 1e-9 {
		t.Errorf("split = %v, %v, %v; want sweep 1.1, read 0.5", sweep, read, ok)
	}
	if sweep, _, ok, note := splitWindows([]window{{Sweeps: 1, Reads: 1, CPUS: 2}, {Sweeps: 1, Reads: 1, CPUS: 4}}); ok || sweep != 3 || note == "" {
		t.Errorf("every window with a read: split = %v, %v (%q); want not ok, the mean 3 and a note", sweep, ok, note)
	}
	if _, _, ok, note := splitWindows([]window{{Sweeps: 1, CPUS: 2}}); ok || note == "" {
		t.Errorf("no read: ok %v (%q); want not ok and a note", ok, note)
	}
}

// The amortised figure uses the binary's own defaults, as --help prints
// them (kingpin's format).
func TestParseFlagDefaults(t *testing.T) {
	help := "  --collector.fabric.counters-interval=1m  \n                                 Interval between counter sweeps\n" +
		"  --collector.fabric.routes-max-age=15m  \n                                 Read the forwarding tables again\n"
	iv, age, err := parseFlagDefaults(help)
	if err != nil || iv != 60 || age != 900 {
		t.Errorf("parseFlagDefaults = %v, %v, %v; want 60, 900", iv, age, err)
	}
	if _, _, err := parseFlagDefaults("  --collector.fabric.counters-interval=1m\n"); err == nil {
		t.Error("no routes-max-age in --help: want an error, not a default")
	}
}

func TestSumValues(t *testing.T) {
	body := []byte("# HELP x\nrdma_fabric_routes_read_failures_total{reason=\"timeout\"} 2\n" +
		"rdma_fabric_routes_read_failures_total{reason=\"mad_failed\"} 1\nrdma_fabric_routes_read_failures_totalx 7\n")
	if got := sumValues(body, "rdma_fabric_routes_read_failures_total"); got != 3 {
		t.Errorf("sumValues = %v, want 3", got)
	}
}

// With the route read measured, the sweep goal is judged with the read
// counted in: amortised as it runs (a read every 15m of 1m sweeps: 2 s +
// 1 s / 15 against 10 s, under 0.25x), and in the interval of a fabric
// change (2 s + 1 s: over, though the sweep alone is under).
func TestSectionJudgesSweepWithRoutes(t *testing.T) {
	var b strings.Builder
	section(&b, &results{Sizes: []*sizeResult{{Hosts: 4000, SwitchPorts: 8000,
		RdmaDoctor: rdmaResult{SweepCPUS: 2, RouteReadCPUS: 1, RouteReadWallS: 1.5, RouteReads: 3, ScrapeMedianS: 0.01, ScrapeCPUS: 0.01,
			HWM: 1 << 20, RSS: 1 << 20, DefaultIntervalS: 60, DefaultMaxAgeS: 900},
		Treydock: &treydockResult{CPUS: 10, Scrapes: 1}}}})
	out := b.String()
	for _, want := range []string{
		"(the sweep and one whole read) | 3.00 s / 10.00 s = 0.300x | **not met** |",
		"a read every 15m0s of 1m0s sweeps): at most 0.25x the CPU of one treydock scrape | 2.07 s / 10.00 s = 0.207x | **met** |",
		"| 1.00 s, 1.50 s (3 reads) | 2.07 s, 3.00 s |",
		"| 0.300 | 0.207 |",
		"every `--collector.fabric.routes-max-age` (default 15m0s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
}
