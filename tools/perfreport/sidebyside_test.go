// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/sbsresult"
)

func TestSideBySide(t *testing.T) {
	rep := func(rd, ne, floor float64) string {
		return `{"rdma_doctor":{"median_ns":` + ftoa(rd) + `,"p90_ns":1,"cpu_ns":` + ftoa(rd) + `},` +
			`"node_exporter":{"median_ns":` + ftoa(ne) + `,"p90_ns":1,"cpu_ns":` + ftoa(ne) + `},` +
			`"floor":{"median_ns":` + ftoa(floor) + `,"p90_ns":1,"cpu_ns":1}}`
	}
	// withFloors adds the pread and HTTP floors: 1 ns of CPU each.
	withFloors := func(r string) string {
		return strings.TrimSuffix(r, "}") + `,"pread_floor":{"median_ns":1,"p90_ns":1,"cpu_ns":1},"http_floor":{"median_ns":2,"p90_ns":2,"cpu_ns":1}}`
	}
	run := func(host string, devices int, config string, slow bool, reps ...string) string {
		s := "false"
		if slow {
			s = "true"
		}
		return `{"host":"` + host + `","devices":` + ftoa(float64(devices)) + `,"config":"` + config + `","slow":` + s +
			`,"rss_rdma_doctor":15728640,"rss_node_exporter":20971520,"rss_scrapes":1000,"repeats":[` + strings.Join(reps, ",") + `]}`
	}
	in := `{"date":"D","command":"go run ./tools/sidebyside -o results.json","machine":{"nproc":2,"kernel":"6.1","cpu":"C","go":"go1"},
"skipped":["yuuki/rdma_exporter: not on the Go module proxy"],"runs":[` + strings.Join([]string{
		run("dgx-h100", 9, "infiniband", false, withFloors(rep(2, 10, 1)), withFloors(rep(3, 10, 1))),
		run("dgx-h100", 9, "infiniband", true, rep(1, 10, 1)),
		run("generated-1", 1, "infiniband", false, rep(1, 10, 1)),
		run("generated-64", 64, "infiniband", false, rep(5, 10, 1)),
	}, ",") + `]}`
	name := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(name, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := readSideBySide(name)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	writeSideBySide(&sb, s)
	out := sb.String()
	for _, want := range []string{
		"| dgx-h100 | 9 | infiniband | 0.20–0.30× | 0.20–0.30× | 15.0 MiB | 20.0 MiB | 2.00–3.00× | 0.10× | 0.10× |",
		"| infiniband only, wall | 0.30× | 0.30× | ≤ 0.20× | no |",
		"| infiniband only, CPU | 0.30× | 0.20× | ≤ 0.20× | no |",
		"| slow sysfs, infiniband only, wall | 0.10× | – | ≤ 0.25× | yes |",
		"infiniband, wall ratio by devices 1: 0.10×, 64: 0.50×; largest / smallest 5.00: **not flat**",
		"Skipped: yuuki/rdma_exporter",
		"    go run ./tools/sidebyside -o results.json",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	var none strings.Builder
	writeSideBySide(&none, nil)
	if !strings.Contains(none.String(), "Not measured") {
		t.Errorf("without results: %s", none.String())
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// The memory table and the fixed and per-device costs are rendered from
// the results: with no device rdma_doctor costs 200 µs and node_exporter
// 1 ms, each of 64 devices 100 µs and 1 ms more.
func TestSideBySideMemoryAndFixed(t *testing.T) {
	cpu := func(rd, ne float64) sbsRepeat {
		return sbsRepeat{RD: sbsresult.Stats{MedianNS: 1, CPUNS: int64(rd)}, NE: sbsresult.Stats{MedianNS: 1, CPUNS: int64(ne)}}
	}
	s := &sideBySide{Runs: []sbsRun{
		{Host: "generated-0", Devices: 0, Config: "infiniband", Repeats: []sbsRepeat{cpu(200e3, 1e6)}},
		{Host: "generated-1", Devices: 1, Config: "infiniband", Repeats: []sbsRepeat{cpu(300e3, 2e6)}},
		{Host: "generated-64", Devices: 64, Config: "infiniband", Repeats: []sbsRepeat{cpu(6600e3, 65e6)}},
	}, Memory: []sbsresult.Memory{{Name: "bareexporter", Host: "dgx-h100", LoadBytes: 8 << 20, RSS: 14 << 20, Anon: 7 << 20, File: 7 << 20, Scrapes: 1000, OpenFiles: 512}}}
	var sb strings.Builder
	pr := func(f string, a ...any) { fmt.Fprintf(&sb, f, a...) }
	writeSBSMemory(pr, s)
	writeSBSFixed(pr, s)
	writeSBSFlat(pr, s)
	out := sb.String()
	for _, want := range []string{
		"| bareexporter | 8.0 MiB | 14.0 MiB | 7.0 MiB | 7.0 MiB | 512 | 2.2 MiB |",
		"after 1000 interleaved scrapes",
		"- infiniband: rdma_doctor 200µs + 100µs per device, node_exporter 1ms + 1ms per device: fixed 0.20×, per device 0.10×.",
		// The host with no device is not one of the flat ratio's.
		"ratio by devices 1: 0.15×, 64: 0.10×;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// The floors table splits rdma_doctor's CPU into the pread floor, the
// HTTP floor and what lies above them; runs without floors (the slow
// sysfs) are left out of it.
func TestSideBySideFloors(t *testing.T) {
	st := func(ns float64) sbsresult.Stats { return sbsresult.Stats{MedianNS: int64(ns), CPUNS: int64(ns)} }
	withFloors := func(rd, ne, pread, http float64) sbsRepeat {
		p, h := st(pread), st(http)
		return sbsRepeat{RD: st(rd), NE: st(ne), PreadFloor: &p, HTTPFloor: &h}
	}
	s := &sideBySide{Runs: []sbsRun{
		{Host: "dgx-h100", Devices: 9, Config: "infiniband", Repeats: []sbsRepeat{withFloors(2.5e6, 10e6, 0.8e6, 0.7e6)}},
		{Host: "dgx-h100", Devices: 9, Config: "infiniband", Slow: true, Repeats: []sbsRepeat{{RD: st(9e6), NE: st(40e6)}}},
	}}
	var sb strings.Builder
	pr := func(f string, a ...any) { fmt.Fprintf(&sb, f, a...) }
	writeSBSFloors(pr, s)
	writeSBSGoals(pr, s)
	out := sb.String()
	for _, want := range []string{
		"| dgx-h100 | infiniband | 2.5ms | 800µs | 700µs | 1ms | 0.25× | 0.15× |",
		"| infiniband only, CPU | 0.25× | 0.15× | ≤ 0.20× | no |",
		"| slow sysfs, infiniband only, wall | 0.23× | – | ≤ 0.25× | yes |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Count(out, "| dgx-h100 | infiniband |") != 1 {
		t.Errorf("the slow run has no floors and no row:\n%s", out)
	}
}

// With yuuki/rdma_exporter measured, its table gives rdma_doctor's ratios
// to it, and the RSS goal compares with its RSS measured in the same run
// instead of the figure.
func TestSideBySideYuuki(t *testing.T) {
	yk := func(rd, y int64) sbsRepeat {
		return sbsRepeat{RD: sbsresult.Stats{MedianNS: rd, CPUNS: rd}, NE: sbsresult.Stats{MedianNS: 10, CPUNS: 10},
			Floor: sbsresult.Stats{MedianNS: 1}, Yuuki: &sbsresult.Stats{MedianNS: y, CPUNS: y}}
	}
	s := &sideBySide{Yuuki: "yuuki/rdma_exporter v0.7.1", RSSAfter: 1000, Runs: []sbsRun{
		{Host: "dgx-h100", Devices: 9, Config: "default", RSSRD: 20 << 20, RSSNE: 20 << 20, RSSYuuki: 15 << 20,
			RSSScrapes: 1000, SamplesYuuki: 486, Repeats: []sbsRepeat{yk(2, 10), yk(3, 10)}},
		{Host: "dgx-h100", Devices: 9, Config: "infiniband", Repeats: []sbsRepeat{{RD: sbsresult.Stats{MedianNS: 1, CPUNS: 1}, NE: sbsresult.Stats{MedianNS: 2, CPUNS: 2}}}},
	}}
	var sb strings.Builder
	writeSideBySide(&sb, s)
	out := sb.String()
	for _, want := range []string{
		"Against **yuuki/rdma_exporter v0.7.1**",
		"It answers uncompressed",
		"| dgx-h100 | 9 | default | page cache | 0.20–0.30× | 0.20–0.30× | 0s | 486 | 15.0 MiB |",
		"| RSS after 1000 scrapes | 20.0 MiB | – | ≤ yuuki/rdma_exporter's (measured here: 15.0 MiB) | no |",
		"raw floor, yuuki/rdma_exporter, pread floor",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Count(out, "| dgx-h100 | 9 | infiniband | page cache |") != 0 {
		t.Error("a run without yuuki/rdma_exporter has a row in its table")
	}
}
