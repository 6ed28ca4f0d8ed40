// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/docsection"
)

// The performance summary (docs/architecture.md's, written by -readme) is derived from docs/performance.md's own
// tables, never from the raw results: the page is what was measured and
// reviewed, and a summary read from it cannot disagree with it. A figure
// the page does not hold is "–" in the summary, not a guess.

// mdTable is one markdown table: its header cells and its rows' cells.
type mdTable struct {
	header []string
	rows   [][]string
}

// parseTables is every table in doc: a header line starting with "|",
// a separator line starting with "|---", then the rows up to the first
// line that does not start with "|".
func parseTables(doc string) []mdTable {
	lines := strings.Split(doc, "\n")
	var out []mdTable
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "|") || !strings.HasPrefix(lines[i+1], "|---") {
			continue
		}
		t := mdTable{header: cells(lines[i])}
		j := i + 2
		for ; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			t.rows = append(t.rows, cells(lines[j]))
		}
		out = append(out, t)
		i = j - 1
	}
	return out
}

// cells splits a table line into its trimmed cells. The generated tables
// hold no escaped "|".
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	f := strings.Split(line, "|")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// findTable is the first table whose header holds every one of cols.
func findTable(tables []mdTable, cols ...string) (mdTable, bool) {
next:
	for _, t := range tables {
		for _, c := range cols {
			if t.col(c, 0) < 0 {
				continue next
			}
		}
		return t, true
	}
	return mdTable{}, false
}

// col is the index of the first column named name at or after from, or
// -1. from tells apart two columns of one name (the fabric table's
// "RSS, peak" is rdma_doctor's, then treydock's).
func (t mdTable) col(name string, from int) int {
	for i := max(from, 0); i < len(t.header); i++ {
		if t.header[i] == name {
			return i
		}
	}
	return -1
}

// row is the first row whose cells in the named columns equal the given
// values (pairs of column name and value), or nil.
func (t mdTable) row(match ...string) []string {
next:
	for _, r := range t.rows {
		for k := 0; k+1 < len(match); k += 2 {
			i := t.col(match[k], 0)
			if i < 0 || i >= len(r) || r[i] != match[k+1] {
				continue next
			}
		}
		return r
	}
	return nil
}

// cell is row r's cell in column i, or "–" when the row, the column or
// the value is absent.
func cell(r []string, i int) string {
	if r == nil || i < 0 || i >= len(r) || r[i] == "" {
		return "–"
	}
	return r[i]
}

// before is s up to the first sep ("207.7 ms (676.6 ms), ..." -> "207.7 ms").
func before(s, sep string) string {
	v, _, _ := strings.Cut(s, sep)
	return v
}

var (
	// tools/sidebyside's line in docs/performance.md: "tools/sidebyside,
	// DATE. **rdma_doctor, version ... revision: HASH...)**".
	sbsProvenance = regexp.MustCompile(`tools/sidebyside, (\d{4}-\d\d-\d\d)\S*\. \*\*rdma_doctor[^*]*revision: ([0-9a-f]+)(-dirty)?`)
	// tools/fabricbench's: "Measured at commit HASH on DATE (".
	fabricProvenance = regexp.MustCompile(`Measured at commit (\S+) on (\S+) \(`)
	// The fabric table's first cell: "4000 (241, 12042)".
	fabricHosts = regexp.MustCompile(`^(\d+) \((\d+), (\d+)\)$`)
)

// readmeSection is docs/architecture.md's generated performance summary, both marker
// lines included, derived from perf (docs/performance.md's text).
func readmeSection(perf string) (string, error) {
	fabric, err := docsection.Extract(perf, docsection.FabricBegin, docsection.FabricEnd)
	if err != nil {
		return "", err
	}
	rest := strings.Replace(perf, fabric, "", 1)
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("%s\n", docsection.ReadmePerfBegin)
	if err := readmeSideBySide(p, rest); err != nil {
		return "", err
	}
	if err := readmeFabric(p, fabric); err != nil {
		return "", err
	}
	readmeCosts(p, rest)
	p("%s\n", docsection.ReadmePerfEnd)
	return b.String(), nil
}

func readmeSideBySide(p func(string, ...any), doc string) error {
	tables := parseTables(doc)
	sbs, ok := findTable(tables, "host", "config", "wall ratio", "CPU ratio", "slow-sysfs wall ratio", "slow-sysfs CPU ratio")
	if !ok {
		p("docs/performance.md holds no side-by-side run (`make bench` runs tools/sidebyside).\n\n")
		return nil
	}
	m := sbsProvenance.FindStringSubmatch(doc)
	if m == nil {
		return errors.New("docs/performance.md: side-by-side table without tools/sidebyside's date and revision line")
	}
	rev := m[2][:min(7, len(m[2]))] + m[3]
	yuuki, _ := findTable(tables, "host", "config", "sysfs", "CPU ratio", "yuuki CPU per scrape")
	floors, _ := findTable(tables, "host", "config", "rdma_doctor CPU", "pread floor", "HTTP floor", "above the floors", "floors' CPU ratio")
	const host = "dgx-h100"
	dev := cell(sbs.row("host", host), sbs.col("devices", 0))
	p("| %s (%s devices), `make bench` at %s, %s | wall | CPU | floors (CPU) | CPU against yuuki/rdma_exporter |\n", host, dev, rev, m[1])
	p("|---|---|---|---|---|\n")
	for _, c := range []struct{ label, config, sysfs string }{
		{"default collectors (the live-kernel ones ask nothing of a fixture tree)", "default", "page cache"},
		{"infiniband collector alone", "infiniband", "page cache"},
		{"through a FUSE sysfs with firmware-like delays (default collectors)", "default", "slow"},
	} {
		s := sbs.row("host", host, "config", c.config)
		y := yuuki.row("host", host, "config", c.config, "sysfs", c.sysfs)
		wall, cpu, fl := cell(s, sbs.col("wall ratio", 0)), cell(s, sbs.col("CPU ratio", 0)), cell(floors.row("host", host, "config", c.config), floors.col("floors' CPU ratio", 0))
		if c.sysfs == "slow" {
			// The floors were timed on the page cache only.
			wall, cpu, fl = cell(s, sbs.col("slow-sysfs wall ratio", 0)), cell(s, sbs.col("slow-sysfs CPU ratio", 0)), "–"
		}
		p("| %s | %s | %s | %s | %s |\n", c.label, wall, cpu, fl, cell(y, yuuki.col("CPU ratio", 0)))
	}
	p("\n")
	if r := floors.row("host", host, "config", "infiniband"); r != nil {
		p("Of rdma_doctor's %s CPU per infiniband-only scrape of %s, %s is the reads (pread floor), %s the HTTP answer (HTTP floor) and %s its own work above them.",
			cell(r, floors.col("rdma_doctor CPU", 0)), host, cell(r, floors.col("pread floor", 0)), cell(r, floors.col("HTTP floor", 0)), cell(r, floors.col("above the floors", 0)))
	}
	if mem, ok := findTable(tables, "exporter", "VmRSS", "RssAnon"); ok && len(mem.rows) > 0 {
		var each []string
		for _, r := range mem.rows {
			each = append(each, fmt.Sprintf("%s %s (%s)", cell(r, 0), cell(r, mem.col("VmRSS", 0)), cell(r, mem.col("RssAnon", 0))))
		}
		p(" Resident memory on %s, VmRSS (RssAnon: heap, stacks): %s.", host, strings.Join(each, ", "))
	}
	if g, ok := findTable(tables, "goal", "measured", "target", "met"); ok {
		p(" Issue 13's goals: %s.", metCount(g, g.col("met", 0), "yes"))
	}
	p("\n\n")
	return nil
}

func readmeFabric(p func(string, ...any), sec string) error {
	if sec == "" {
		p("docs/performance.md holds no fabric run (`make bench-fabric`).\n\n")
		return nil
	}
	m := fabricProvenance.FindStringSubmatch(sec)
	if m == nil {
		return errors.New("docs/performance.md: fabric section without tools/fabricbench's commit and date line")
	}
	tables := parseTables(sec)
	t, ok := findTable(tables, "hosts (switches, switch ports)", "rdma_doctor sweep: CPU, wall", "cached scrape: median (max), CPU", "RSS, peak")
	// A page with the route read gives the sweep's ratio with the read
	// amortised; a page without one, the sweep's alone.
	ratioCol, numCol, what := "sweep CPU with routes amortised / treydock scrape CPU", "sweep interval with routes: amortised, with a read", "rdma_doctor sweep CPU, route read amortised / treydock scrape CPU"
	if t.col(ratioCol, 0) < 0 {
		ratioCol, numCol, what = "sweep CPU / treydock scrape CPU", "rdma_doctor sweep: CPU, wall", "rdma_doctor sweep CPU / treydock scrape CPU"
	}
	if !ok || len(t.rows) == 0 || t.col(ratioCol, 0) < 0 {
		return errors.New("docs/performance.md: fabric section without its results table")
	}
	// The largest fabric measured.
	var big []string
	most := -1
	for _, r := range t.rows {
		h := fabricHosts.FindStringSubmatch(r[0])
		if h == nil {
			return fmt.Errorf("docs/performance.md: fabric row %q: want HOSTS (SWITCHES, SWITCH PORTS)", r[0])
		}
		if n, _ := strconv.Atoi(h[1]); n > most {
			big, most = r, n
		}
	}
	h := fabricHosts.FindStringSubmatch(big[0])
	rss := t.col("RSS, peak", 0)
	trey := t.col("treydock scrape: CPU (min-max), wall", 0)
	treyRSS := -1
	if trey >= 0 {
		treyRSS = t.col("RSS, peak", trey)
	}
	peak := func(i int) string {
		c := cell(big, i)
		if _, pk, ok := strings.Cut(c, ", "); ok {
			return pk
		}
		return "–"
	}
	ratio := cell(big, t.col(ratioCol, 0))
	treyCPU := cell(big, trey)
	num := before(cell(big, t.col(numCol, 0)), ", ")
	if num == "-" { // no route read measured: the sweep's alone
		num = before(cell(big, t.col("rdma_doctor sweep: CPU, wall", 0)), ", ")
	}
	if ratio != "–" && treyCPU != "–" && treyCPU != "skipped" {
		ratio = fmt.Sprintf("%s× (%s / %s)", ratio, num, before(treyCPU, " ("))
	}
	if treyCPU == "skipped" {
		ratio = "– (treydock skipped)"
	}
	p("| fabric, `make bench-fabric` at %s, %s | %s | cached scrape, median | peak RSS, rdma_doctor | peak RSS, treydock |\n", m[1], m[2], what)
	p("|---|---|---|---|---|\n")
	p("| %s hosts (%s switches, %s switch ports) | %s | %s | %s | %s |\n\n", h[1], h[2], h[3], ratio, before(cell(big, t.col("cached scrape: median (max), CPU", 0)), " ("), peak(rss), peak(treyRSS))
	for _, g := range tables {
		if at, ok := strings.CutPrefix(g.header[0], "goal (issue 28, "); ok {
			p("Issue 28's fabric goals (%s): %s.\n\n", strings.TrimSuffix(at, ")"), metCount(g, len(g.header)-1, "**met**"))
			break
		}
	}
	return nil
}

// metCount is "N of M met" over table g's rows, column i reading yes.
func metCount(g mdTable, i int, yes string) string {
	n := 0
	for _, r := range g.rows {
		if cell(r, i) == yes {
			n++
		}
	}
	return fmt.Sprintf("%d of %d met", n, len(g.rows))
}

// readmeCosts is the load test, /diagnose, the /proc/interrupts parser
// and the port state sampler, from the same page.
func readmeCosts(p func(string, ...any), doc string) {
	tables := parseTables(doc)
	load, okL := findTable(tables, "requests", "concurrency", "p50", "p99", "RSS after warm-up", "RSS at end")
	// The /diagnose table: the one with the sampler's tick.
	var diag mdTable
	okD := false
	for _, t := range tables {
		if rowNamed(t, "sampler tick (dgx-h100)") != nil {
			diag, okD = t, true
			break
		}
	}
	var rows [][2]string
	if okL && len(load.rows) > 0 {
		r := load.rows[0]
		rows = append(rows, [2]string{
			fmt.Sprintf("load: %s requests at concurrency %s (`/metrics`, `/diagnose`)", cell(r, load.col("requests", 0)), cell(r, load.col("concurrency", 0))),
			fmt.Sprintf("p50 %s, p99 %s, RSS %s → %s", cell(r, load.col("p50", 0)), cell(r, load.col("p99", 0)), cell(r, load.col("RSS after warm-up", 0)), cell(r, load.col("RSS at end", 0))),
		})
	}
	if okD {
		tick, tick16, checks := rowNamed(diag, "sampler tick (dgx-h100)"), rowNamed(diag, "sampler tick (16 devices)"), rowNamed(diag, "checks alone (dgx-h100)")
		w, c := diag.col("wall/op", 0), diag.col("CPU/op", 0)
		rows = append(rows, [2]string{
			"diagnose: the sampler's tick (host read and every check) on dgx-h100 / 16 devices",
			fmt.Sprintf("%s / %s CPU (the checks alone %s); `/diagnose` text %s, JSON %s, HTML %s", cell(tick, c), cell(tick16, c), cell(checks, c),
				cell(rowNamed(diag, "request, format=text (dgx-h100)"), w), cell(rowNamed(diag, "request, format=json (dgx-h100)"), w), cell(rowNamed(diag, "request, format=html (dgx-h100)"), w)),
		})
	}
	for _, t := range tables {
		parse := rowNamed(t, "ParseInterrupts/512cpu-4096irq")
		if parse == nil {
			continue
		}
		read := rowNamed(t, "ReadInterrupts/512cpu-4096irq")
		w, by, al := t.col("wall/op", 0), t.col("bytes/op", 0), t.col("allocs/op", 0)
		rows = append(rows, [2]string{
			"`/proc/interrupts` parser, generated 512 CPUs × 4,096 IRQs",
			fmt.Sprintf("%s, %s allocs (one per IRQ); streamed from the file as a scrape reads it, %s allocated", cell(parse, w), cell(parse, al), cell(read, by)),
		})
		break
	}
	for _, t := range tables {
		if r := rowNamed(t, "round (dgx-h100, 9 ports)"); r != nil {
			rows = append(rows, [2]string{
				"port state sampler, one round (dgx-h100, 9 ports)",
				fmt.Sprintf("%s CPU; every second, %s of a core", cell(r, t.col("CPU/op", 0)), cell(r, t.col("CPU at 1 s", 0))),
			})
			break
		}
	}
	if len(rows) == 0 {
		return
	}
	p("| from the same `make bench` | result |\n|---|---|\n")
	for _, r := range rows {
		p("| %s | %s |\n", r[0], r[1])
	}
	p("\n")
}

// rowNamed is table t's row whose first cell is name, or nil.
func rowNamed(t mdTable, name string) []string {
	for _, r := range t.rows {
		if len(r) > 0 && r[0] == name {
			return r
		}
	}
	return nil
}

// updateReadme rewrites readme's generated performance summary from
// perf. readme must hold the markers already: where the summary goes
// among the page's sections is the page's choice, not the generator's.
func updateReadme(readme, perf string) error {
	pb, err := os.ReadFile(perf)
	if err != nil {
		return err
	}
	rb, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	sec, err := readmeSection(string(pb))
	if err != nil {
		return fmt.Errorf("%s: %w", perf, err)
	}
	old, err := docsection.Extract(string(rb), docsection.ReadmePerfBegin, docsection.ReadmePerfEnd)
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	if old == "" {
		return fmt.Errorf("%s: no %q line to write the performance summary after", readme, docsection.ReadmePerfBegin)
	}
	out, err := docsection.Splice(string(rb), sec, docsection.ReadmePerfBegin, docsection.ReadmePerfEnd)
	if err != nil {
		return err
	}
	return os.WriteFile(readme, []byte(out), 0o644)
}
