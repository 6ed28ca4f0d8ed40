// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
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
