// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/docsection"
)

func TestParseBench(t *testing.T) {
	in := `goos: linux
cpu: Test CPU
BenchmarkScrape/dgx-h100-2         	     109	   2152692 ns/op	   2097771 cpu-ns/op	  242494 B/op	    3923 allocs/op
BenchmarkGrowth/devices=1/rawfloor-2       	      80	   3622154 ns/op	       122.0 files/op
BenchmarkRead-2   	     200	   5856000 ns/op
PASS
`
	got, cpu, err := parseBench(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if cpu != "Test CPU" {
		t.Errorf("cpu %q", cpu)
	}
	for _, tc := range []struct {
		name, unit string
		want       float64
	}{
		{"Scrape/dgx-h100", "ns/op", 2152692},
		{"Scrape/dgx-h100", "allocs/op", 3923},
		{"Growth/devices=1/rawfloor", "files/op", 122},
		{"Read", "ns/op", 5856000},
	} {
		if v := got[tc.name][tc.unit]; v != tc.want {
			t.Errorf("%s %s = %v, want %v", tc.name, tc.unit, v, tc.want)
		}
	}
	if _, _, err := parseBench(strings.NewReader("BenchmarkX-2 1 abc ns/op\n")); err == nil {
		t.Error("a malformed value was accepted")
	}
}

func TestWriteLoad(t *testing.T) {
	load, err := parseLoad(strings.NewReader("requests=20000 concurrency=32 p50=70ms rss_warm_kb=43417 rss_end_kb=47923\n"))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	write(&sb, map[string]result{}, "cpu", load, nil)
	if !strings.Contains(sb.String(), "| 20000 | 32 |") || !strings.Contains(sb.String(), "42.4 MiB") || !strings.Contains(sb.String(), "10000, are /metrics") {
		t.Errorf("load table:\n%s", sb.String())
	}
}

func TestWritePortwatch(t *testing.T) {
	for _, tc := range []struct {
		cpu  string
		want []string
	}{
		// 22.4 µs of CPU a round is 0.002 % of a core at 1 s.
		{"22435", []string{"| round (dgx-h100, 9 ports) |", "| 22µs |", "| 0.002 % | within the goal |"}},
		// 6 ms a round would be 0.6 %: over the 0.5 % goal.
		{"6000000", []string{"| 0.600 % | **over the goal** |"}},
	} {
		bench, _, err := parseBench(strings.NewReader("BenchmarkPortwatchRound/dgx-h100-2 53410 23834 ns/op " + tc.cpu + " cpu-ns/op 983 B/op 30 allocs/op\n"))
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		write(&sb, bench, "cpu", nil, nil)
		for _, w := range tc.want {
			if !strings.Contains(sb.String(), w) {
				t.Errorf("cpu-ns/op %s: no %q in\n%s", tc.cpu, w, sb.String())
			}
		}
	}
	var sb strings.Builder
	write(&sb, map[string]result{}, "cpu", nil, nil)
	_, section, _ := strings.Cut(sb.String(), "## Port state sampler")
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, "Not measured in this run.") || strings.Contains(section, "| round") {
		t.Errorf("without the benchmark the section is:\n%s", section)
	}
}

// make bench rewrites docs/performance.md but carries over the fabric
// section that make bench-fabric wrote (tools/fabricbench).
func TestRunKeepsFabricSection(t *testing.T) {
	dir := t.TempDir()
	bench := filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(bench, []byte("cpu: test CPU\nBenchmarkPortwatchRound/dgx-h100-2 53410 23834 ns/op 983 B/op 30 allocs/op\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "performance.md")
	fabric := docsection.FabricBegin + "\n## Fabric\n\nmeasured\n" + docsection.FabricEnd + "\n"
	if err := os.WriteFile(out, []byte("# Performance\n\nold text\n\n"+fabric), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(bench, "", "", "", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), fabric) || strings.Contains(string(b), "old text") {
		t.Errorf("rewritten page keeps %v the fabric section, %v the old text:\n%s", strings.Contains(string(b), fabric), strings.Contains(string(b), "old text"), b)
	}
}
