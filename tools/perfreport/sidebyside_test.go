// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSideBySide(t *testing.T) {
	rep := func(rd, ne, floor float64) string {
		return `{"rdma_doctor":{"median_ns":` + ftoa(rd) + `,"p90_ns":1,"cpu_ns":` + ftoa(rd) + `},` +
			`"node_exporter":{"median_ns":` + ftoa(ne) + `,"p90_ns":1,"cpu_ns":` + ftoa(ne) + `},` +
			`"floor":{"median_ns":` + ftoa(floor) + `,"p90_ns":1,"cpu_ns":1}}`
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
		run("dgx-h100", 9, "infiniband", false, rep(2, 10, 1), rep(3, 10, 1)),
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
		"| infiniband only, wall | 0.30× | ≤ 0.20× | no |",
		"| slow sysfs, infiniband only, wall | 0.10× | ≤ 0.25× | yes |",
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
