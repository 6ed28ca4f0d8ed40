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

func readPage(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseTables(t *testing.T) {
	page := readPage(t, "performance-43e71f0-c5db476.md")
	tables := parseTables(page)

	sbs, ok := findTable(tables, "host", "config", "wall ratio", "slow-sysfs CPU ratio")
	if !ok {
		t.Fatal("no side-by-side table")
	}
	if len(sbs.header) != 10 || len(sbs.rows) != 12 {
		t.Errorf("side-by-side table: %d columns, %d rows; want 10, 12", len(sbs.header), len(sbs.rows))
	}
	r := sbs.row("host", "dgx-h100", "config", "infiniband")
	if got := cell(r, sbs.col("CPU ratio", 0)); got != "0.27–0.28×" {
		t.Errorf("dgx-h100 infiniband CPU ratio %q, want 0.27–0.28×", got)
	}
	if got := cell(sbs.row("host", "generated-0", "config", "default"), sbs.col("floor ratio", 0)); got != "–" {
		t.Errorf("generated-0 floor ratio %q, want –", got)
	}
	if sbs.row("host", "dgx-h100", "config", "nonesuch") != nil {
		t.Error("row matched a config the table lacks")
	}

	// The fabric table has two columns of each of two names; the second
	// is treydock's.
	fab, ok := findTable(tables, "hosts (switches, switch ports)", "RSS, peak")
	if !ok {
		t.Fatal("no fabric table")
	}
	first := fab.col("RSS, peak", 0)
	second := fab.col("RSS, peak", first+1)
	if first != 6 || second != 9 {
		t.Errorf("RSS, peak columns at %d and %d, want 6 and 9", first, second)
	}
	big := fab.row("hosts (switches, switch ports)", "4000 (241, 12042)")
	if cell(big, first) != "259 MiB, 291 MiB" || cell(big, second) != "111 MiB, 137 MiB" {
		t.Errorf("4000-host RSS cells %q, %q", cell(big, first), cell(big, second))
	}

	// A table ends at the first line that does not start with "|".
	mem, ok := findTable(tables, "exporter", "VmRSS")
	if !ok || len(mem.rows) != 4 {
		t.Fatalf("memory table: found %v, %d rows; want 4", ok, len(mem.rows))
	}
	if _, ok := findTable(tables, "host", "no such column"); ok {
		t.Error("findTable matched a column no table has")
	}
}

func TestCells(t *testing.T) {
	// fabricbench's row when treydock was skipped: empty trailing cells.
	got := cells("| 200 (14, 504) | skipped | | | |")
	want := []string{"200 (14, 504)", "skipped", "", "", ""}
	if strings.Join(got, "/") != strings.Join(want, "/") {
		t.Errorf("cells = %q, want %q", got, want)
	}
	if c := cell(got, 2); c != "–" {
		t.Errorf("empty cell reads %q, want –", c)
	}
	if c := cell(got, 9); c != "–" {
		t.Errorf("missing cell reads %q, want –", c)
	}
}

func TestReadmeSection(t *testing.T) {
	sec, err := readmeSection(readPage(t, "performance-43e71f0-c5db476.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sec, docsection.ReadmePerfBegin+"\n") || !strings.HasSuffix(sec, docsection.ReadmePerfEnd+"\n") {
		t.Errorf("section not between its markers:\n%s", sec)
	}
	for _, want := range []string{
		"| dgx-h100 (9 devices), `make bench` at 43e71f0-dirty, 2026-12-02 | wall | CPU | floors (CPU) | CPU against yuuki/rdma_exporter |\n",
		"| default collectors (the live-kernel ones ask nothing of a fixture tree) | 0.28–0.29× | 0.34–0.36× | 0.16–0.18× | 0.27–0.28× |\n",
		"| infiniband collector alone | 0.23–0.26× | 0.27–0.28× | 0.15–0.16× | 0.21–0.22× |\n",
		// Slow sysfs: the slow-sysfs columns, and yuuki's slow default row.
		"| through a FUSE sysfs with firmware-like delays (default collectors) | 0.20–0.21× | 0.25–0.26× | – | 0.27–0.28× |\n",
		"Of rdma_doctor's 2.55ms CPU per infiniband-only scrape of dgx-h100, 820µs is the reads (pread floor), 700µs the HTTP answer (HTTP floor) and 1.03ms its own work above them.",
		"rdma_doctor-default 23.6 MiB (8.9 MiB), node_exporter 22.4 MiB (7.5 MiB)",
		"Issue 13's goals: 4 of 8 met.",
		"| fabric, `make bench-fabric` at c5db476, 2026-12-03 |",
		// The largest fabric, not the first row.
		"| 4000 hosts (241 switches, 12042 switch ports) | 2.351× (14.84 s / 6.31 s) | 207.7 ms | 291 MiB | 137 MiB |\n",
		"Issue 28's fabric goals (at 4000 hosts): 1 of 4 met.",
		"| load: 20000 requests at concurrency 32 (`/metrics`, `/diagnose`) | p50 9.952ms, p99 58.091ms, RSS 30.1 MiB → 29.2 MiB |\n",
		"14.015ms / 16.617ms CPU (the checks alone 614µs); `/diagnose` text 164µs, JSON 916µs, HTML 2.209ms",
		"20.856ms, 4107 allocs (one per IRQ); streamed from the file as a scrape reads it, 439 KiB allocated",
		"28µs CPU; every second, 0.003 % of a core",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("section lacks %q:\n%s", want, sec)
		}
	}
}

// A page with the route read (issue 38): the summary's ratio is the
// sweep's with the read amortised, from its own column, and its numerator
// the amortised interval's CPU, not the sweep's alone.
func TestReadmeSectionRoutes(t *testing.T) {
	sec, err := readmeSection(readPage(t, "performance-6c5b75a-6ef06a1.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| fabric, `make bench-fabric` at 6ef06a1, 2026-12-07 | rdma_doctor sweep CPU, route read amortised / treydock scrape CPU |",
		"| 4000 hosts (241 switches, 12042 switch ports) | 0.213× (604.7 ms / 2.85 s) | 6.6 ms | 235 MiB | 137 MiB |\n",
		"Issue 28's fabric goals (at 4000 hosts): 3 of 5 met.",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("section lacks %q:\n%s", want, sec)
		}
	}
}

// An older page: yuuki/rdma_exporter skipped, no fabric section.
func TestReadmeSectionOlderPage(t *testing.T) {
	sec, err := readmeSection(readPage(t, "performance-9a1aa89.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"`make bench` at 9a1aa89, 2026-12-01 |",
		// Page lines 169 and 213. No yuuki table: its column is absent, not a number.
		"| infiniband collector alone | 0.26–0.28× | 0.27–0.28× | 0.16× | – |\n",
		"docs/performance.md holds no fabric run (`make bench-fabric`).",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("section lacks %q:\n%s", want, sec)
		}
	}
	if strings.Contains(sec, "| fabric,") {
		t.Errorf("a fabric row without a fabric section:\n%s", sec)
	}
}

// A figure without the run it came from is refused, not summarised.
func TestReadmeSectionNoProvenance(t *testing.T) {
	page := readPage(t, "performance-43e71f0-c5db476.md")
	for name, cut := range map[string]string{
		"side by side": "tools/sidebyside, 2026-12-02T00:58:02Z.",
		"fabric":       "Measured at commit c5db476 on 2026-12-03 (",
	} {
		if !strings.Contains(page, cut) {
			t.Fatalf("%s: the page lacks %q", name, cut)
		}
		if _, err := readmeSection(strings.Replace(page, cut, "", 1)); err == nil {
			t.Errorf("%s: no error without its date and commit line", name)
		}
	}
}

func TestUpdateReadme(t *testing.T) {
	dir := t.TempDir()
	perf := filepath.Join(dir, "performance.md")
	if err := os.WriteFile(perf, []byte(readPage(t, "performance-43e71f0-c5db476.md")), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "README.md")
	before, after := "# x\n\nhand text before\n\n", "\nhand text after\n"
	stale := docsection.ReadmePerfBegin + "\n| stale | row |\n" + docsection.ReadmePerfEnd + "\n"
	if err := os.WriteFile(readme, []byte(before+stale+after), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second run changes nothing
		if err := updateReadme(readme, perf); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		sec, _ := readmeSection(readPage(t, "performance-43e71f0-c5db476.md"))
		if want := before + sec + after; string(got) != want {
			t.Fatalf("README after update:\n%s\nwant:\n%s", got, want)
		}
	}

	// Without markers the generator does not choose where the summary goes.
	if err := os.WriteFile(readme, []byte(before+after), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateReadme(readme, perf); err == nil {
		t.Error("no error for a README without the markers")
	}
}

// TestPerfSummaryFresh: docs/architecture.md's generated performance
// summary is what docs/performance.md holds now. When it fails, run
// `go run ./tools/perfreport -readme docs/architecture.md` (make
// bench-summary).
func TestPerfSummaryFresh(t *testing.T) {
	perf, err := os.ReadFile("../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := readmeSection(string(perf))
	if err != nil {
		t.Fatalf("docs/performance.md: %v", err)
	}
	got, err := docsection.Extract(string(readme), docsection.ReadmePerfBegin, docsection.ReadmePerfEnd)
	if err != nil {
		t.Fatal(err)
	}
	if got == "" {
		t.Fatal("docs/architecture.md has no generated performance summary (perfreport markers)")
	}
	if got != want {
		t.Errorf("docs/architecture.md's performance summary differs from docs/performance.md: run make bench-summary\ndocs/architecture.md:\n%s\nfrom docs/performance.md:\n%s", got, want)
	}
}
