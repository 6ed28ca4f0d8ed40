// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/tools/internal/sbsresult"
)

// The results file of tools/sidebyside.
type (
	sideBySide = sbsresult.Results
	sbsRepeat  = sbsresult.Repeat
	sbsRun     = sbsresult.Run
)

func readSideBySide(name string) (*sideBySide, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var s sideBySide
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

// ratios is one ratio per repeat.
type ratios []float64

func runRatios(r sbsRun, f func(sbsRepeat) (float64, float64)) ratios {
	var out ratios
	for _, p := range r.Repeats {
		if a, b := f(p); b > 0 {
			out = append(out, a/b)
		}
	}
	return out
}

func wallRatio(p sbsRepeat) (float64, float64) { return float64(p.RD.MedianNS), float64(p.NE.MedianNS) }

// yuukiWallRatio and yuukiCPURatio are rdma_doctor against
// yuuki/rdma_exporter; 0 where it was not measured.
func yuukiWallRatio(p sbsRepeat) (float64, float64) {
	y := yuukiOf(p)
	return float64(p.RD.MedianNS), float64(y.MedianNS)
}

func yuukiCPURatio(p sbsRepeat) (float64, float64) {
	y := yuukiOf(p)
	return float64(p.RD.CPUNS), float64(y.CPUNS)
}

// yuukiOf is the repeat's yuuki/rdma_exporter figures, zero where it was
// not measured (a zero denominator: no ratio).
func yuukiOf(p sbsRepeat) sbsresult.Stats {
	if p.Yuuki == nil {
		return sbsresult.Stats{}
	}
	return *p.Yuuki
}
func cpuRatio(p sbsRepeat) (float64, float64) { return float64(p.RD.CPUNS), float64(p.NE.CPUNS) }
func floorRatio(p sbsRepeat) (float64, float64) {
	return float64(p.RD.MedianNS), float64(p.Floor.MedianNS)
}

// floorsOf is the repeat's pread and HTTP floors; ok is false where they
// were not timed (the slow sysfs, results from before they were).
func floorsOf(p sbsRepeat) (pread, http sbsresult.Stats, ok bool) {
	if p.PreadFloor == nil || p.HTTPFloor == nil {
		return pread, http, false
	}
	return *p.PreadFloor, *p.HTTPFloor, true
}

// floorsCPURatio and floorsWallRatio are the floors' sum (one pread of
// each file, and serving rdma_doctor's exposition over net/http) against
// node_exporter: the least ratio an exporter that reads these files and
// serves this text over net/http could have. 0 where they were not timed.
func floorsCPURatio(p sbsRepeat) (float64, float64) {
	pread, http, ok := floorsOf(p)
	if !ok {
		return 0, 0
	}
	return float64(pread.CPUNS + http.CPUNS), float64(p.NE.CPUNS)
}

func floorsWallRatio(p sbsRepeat) (float64, float64) {
	pread, http, ok := floorsOf(p)
	if !ok {
		return 0, 0
	}
	return float64(pread.MedianNS + http.MedianNS), float64(p.NE.MedianNS)
}

// String is "lo–hi" over the repeats (one value when they agree).
func (r ratios) String() string {
	if len(r) == 0 {
		return "–"
	}
	lo, hi := slices.Min(r), slices.Max(r)
	if fmt.Sprintf("%.2f", lo) == fmt.Sprintf("%.2f", hi) {
		return fmt.Sprintf("%.2f×", lo)
	}
	return fmt.Sprintf("%.2f–%.2f×", lo, hi)
}

func (r ratios) median() float64 {
	if len(r) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(r))
	return s[len(s)/2]
}

// median of one figure over the repeats.
func runMedian(r sbsRun, f func(sbsRepeat) float64) float64 {
	var v []float64
	for _, p := range r.Repeats {
		v = append(v, f(p))
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// find is the run of host and config on the page cache or the slow sysfs.
func find(s *sideBySide, host, config string, slow bool) (sbsRun, bool) {
	for _, r := range s.Runs {
		if r.Host == host && r.Config == config && r.Slow == slow {
			return r, true
		}
	}
	return sbsRun{}, false
}

func writeSideBySide(w io.Writer, s *sideBySide) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Side by side with node_exporter\n\n")
	if s == nil {
		p("Not measured in this run.\n")
		return
	}
	writeSBSIntro(p, s)
	writeSBSSummary(p, s)
	writeSBSYuuki(p, s)
	writeSBSGoals(p, s)
	writeSBSFloors(p, s)
	writeSBSMemory(p, s)
	writeSBSFlat(p, s)
	writeSBSFixed(p, s)
	writeSBSDetail(p, s)
}

func writeSBSIntro(p func(string, ...any), s *sideBySide) {
	p("tools/sidebyside, %s. **%s** against **%s** run with\n", s.Date, s.RDMADoctor, s.NodeExporter)
	p("`--collector.disable-defaults --collector.infiniband`, both serving the same\n")
	p("host tree at once on loopback. They are scraped **interleaved** (rdma_doctor, node_exporter,\n")
	also := ""
	if s.Yuuki != "" {
		also = "yuuki/rdma_exporter, "
	}
	p("raw floor, %spread floor, HTTP floor, rdma_doctor, ...), each scrape as Prometheus 3 sends it (`Accept-Encoding: gzip`,\n", also)
	p("its default `Accept` header, a keep-alive connection), %d untimed scrapes of each first,\n", s.Warmup)
	p("then %d repeats of %d timed scrapes each. Wall time is per scrape, request to last\n", s.Repeats, s.Scrapes)
	p("compressed byte; CPU is utime+stime from /proc/PID/stat over a repeat divided by its\n")
	p("scrapes (10 ms ticks; it includes each exporter's own background work, e.g.\n")
	p("rdma_doctor's diagnose sampler); RSS is VmRSS after %d scrapes of each. A ratio is\n", s.RSSAfter)
	p("rdma_doctor / node_exporter of the repeat's median (wall) or CPU per scrape, given as\n")
	p("the range over the repeats; below 1 rdma_doctor is cheaper.\n\n")
	p("**Noise.** Machine: %d CPUs (%s), Linux %s, %s, **shared with other developers'\n", s.Machine.NProc, s.Machine.CPU, s.Machine.Kernel, s.Machine.Go)
	p("builds and tests while measured**: absolute times are noisy and vary from run to run.\n")
	p("The interleaving is what makes the ratios meaningful: load that slows one scrape\n")
	p("falls on its neighbours of the other exporter alike.\n\n")
	p("- `default`: rdma_doctor's default collectors (%s; on a fixture tree the live-kernel\n", strings.Join(defaultCollectors(), ", "))
	p("  ones, rdma_netlink, devlink and the ethtool query, ask nothing). `infiniband`: that\n")
	p("  collector alone (`--collector.disable-defaults --collector.infiniband`). node_exporter\n")
	p("  runs its infiniband collector alone in both.\n")
	p("- Hosts: `fixtures/hosts/dgx-h100`, and `generated-N`: dgx-h100 with its RDMA devices\n")
	p("  replaced by N clones of its `mlx5_0` (1 NDR port, 21 `counters/`, 26 `hw_counters/`)\n")
	p("  with new names, PCI addresses and GUIDs, in the kernel's layout, generated into a\n")
	p("  temporary directory at bench time (clones have no `msi_irqs/`, so the irq collector\n")
	p("  finds no IRQs of theirs).\n")
	p("- Raw floor: bare open/read/close (syscall, page-sized stack buffer, one goroutine per\n")
	p("  device) of exactly the files an infiniband-only scrape reads, timed in the same loop\n")
	p("  by the harness. The list is made by walking the class tree as the collector does:\n")
	p("  each device's regular files and `hw_counters/*`, `device/net/*/dev_port`, each port's\n")
	p("  regular files, `gid_attrs/ndevs/0` where present, `counters/*` and `hw_counters/*`\n")
	p("  (less `lifespan`, a setting). Checked against `strace -e openat` of one infiniband-only\n")
	p("  scrape of dgx-h100: the same 577 files opened; the scrape also tries 26 optional files\n")
	p("  that do not exist there and opens 46 directories to list them, which the floor leaves\n")
	p("  out (`go run ./tools/sidebyside -print-floor fixtures/hosts/dgx-h100` prints the list).\n")
	p("  Floor ratio: rdma_doctor's median wall / the floor's, for each configuration (the\n")
	p("  default one reads much more than these files).\n")
	p("- Slow sysfs: tools/slowfs serves the same tree read-only over FUSE with a delay per\n")
	p("  read at offset 0 (%s); a counter read sleeps\n", s.SlowDelays)
	p("  (a MAD: the firmware works, the host waits), the rest spins. Each scrape waits %s\n", s.SlowGap)
	p("  first, longer than the hw_counters window, so neither exporter is served the\n")
	p("  other's refresh. FUSE itself adds tens of µs per file here (open and two reads are\n")
	p("  round trips to slowfs on the same 2 CPUs), the same for both exporters: the raw\n")
	p("  floor's time on slowfs below is what the files cost there in all.\n")
	for _, sk := range s.Skipped {
		p("- Skipped: %s.\n", sk)
	}
	p("\nRerun: `make bench` (all of this page), or this part alone:\n\n")
	p("    %s\n\n", s.Command)
}

// hosts in the order they were run.
func hosts(s *sideBySide) []sbsRun {
	var out []sbsRun
	seen := map[string]bool{}
	for _, r := range s.Runs {
		if !seen[r.Host] {
			seen[r.Host] = true
			out = append(out, r)
		}
	}
	return out
}

func configs(s *sideBySide) []string {
	var out []string
	for _, r := range s.Runs {
		if !slices.Contains(out, r.Config) {
			out = append(out, r.Config)
		}
	}
	return out
}

func writeSBSSummary(p func(string, ...any), s *sideBySide) {
	p("| host | devices | config | wall ratio | CPU ratio | RSS rdma_doctor | RSS node_exporter | floor ratio | slow-sysfs wall ratio | slow-sysfs CPU ratio |\n")
	p("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, h := range hosts(s) {
		for _, c := range configs(s) {
			r, ok := find(s, h.Host, c, false)
			if !ok {
				continue
			}
			slowWall, slowCPU := "–", "–"
			if sr, ok := find(s, h.Host, c, true); ok {
				slowWall, slowCPU = runRatios(sr, wallRatio).String(), runRatios(sr, cpuRatio).String()
			}
			floor := runRatios(r, floorRatio).String()
			if r.Devices == 0 {
				floor = "–" // no device: no file to read
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Host, r.Devices, r.Config,
				runRatios(r, wallRatio), runRatios(r, cpuRatio), mib(r.RSSRD), mib(r.RSSNE), floor, slowWall, slowCPU)
		}
	}
	p("\n")
	failed := false
	for _, r := range s.Runs {
		if len(r.FailedRD)+len(r.FailedNE) > 0 {
			failed = true
			p("- %s %s: collectors reporting failure: rdma_doctor %v, node_exporter %v.\n", r.Host, r.Config, r.FailedRD, r.FailedNE)
		}
	}
	if failed {
		p("\n")
	}
}

// writeSBSYuuki is rdma_doctor against yuuki/rdma_exporter, where it was
// measured.
func writeSBSYuuki(p func(string, ...any), s *sideBySide) {
	var rows []string
	gzip := true
	for _, r := range s.Runs {
		if len(runRatios(r, yuukiCPURatio)) == 0 {
			continue
		}
		gzip = gzip && r.GzipYuuki
		sysfs := map[bool]string{true: "slow", false: "page cache"}[r.Slow]
		rss := mib(r.RSSYuuki)
		if r.RSSYuuki == 0 {
			rss = "–"
		}
		yCPU := runMedian(r, func(x sbsRepeat) float64 { return float64(yuukiOf(x).CPUNS) })
		rows = append(rows, fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %d | %s |\n", r.Host, r.Devices, r.Config, sysfs,
			runRatios(r, yuukiWallRatio), runRatios(r, yuukiCPURatio), ms(yCPU), r.SamplesYuuki, rss))
	}
	if len(rows) == 0 {
		return
	}
	p("Against **%s** with its defaults (`-sysfs-root` the same tree), in the same loop: the\n", s.Yuuki)
	p("ratio is rdma_doctor / yuuki/rdma_exporter. Its ethtool and RDMA netlink collectors find\n")
	p("nothing of a fixture tree on this machine (its netdevs are not here, nor NETLINK_RDMA); its\n")
	p("sysfs collector reads the same counters.")
	if !gzip {
		p(" It answers uncompressed: it does not negotiate gzip, so it\n")
		p("spends nothing on compression that rdma_doctor and node_exporter spend.")
	}
	p(" It is not on the Go module proxy: `git clone https://github.com/yuuki/rdma_exporter`,\n")
	p("`go build -o rdma_exporter .` there, and `make bench YUUKI_EXPORTER=path/to/rdma_exporter`.\n")
	p("\n| host | devices | config | sysfs | wall ratio | CPU ratio | yuuki CPU per scrape | yuuki samples | yuuki RSS |\n")
	p("|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range rows {
		p("%s", row)
	}
	p("\n")
}

// writeSBSGoals compares dgx-h100 with issue 13's goals.
func writeSBSGoals(p func(string, ...any), s *sideBySide) {
	type goal struct {
		what, config string
		slow         bool
		f, floors    func(sbsRepeat) (float64, float64)
		max          float64
	}
	goals := []goal{
		{"default scrape, wall", "default", false, wallRatio, floorsWallRatio, 0.3},
		{"default scrape, CPU", "default", false, cpuRatio, floorsCPURatio, 0.3},
		{"infiniband only, wall", "infiniband", false, wallRatio, floorsWallRatio, 0.2},
		{"infiniband only, CPU", "infiniband", false, cpuRatio, floorsCPURatio, 0.2},
		{"infiniband only / raw floor, wall", "infiniband", false, floorRatio, nil, 1.3},
		{"slow sysfs, default, wall", "default", true, wallRatio, nil, 0.25},
		{"slow sysfs, infiniband only, wall", "infiniband", true, wallRatio, nil, 0.25},
	}
	p("Issue 13's goals on dgx-h100 (medians over the repeats). Floors: the same ratio for\n")
	p("the floors' sum (see below), the least an exporter over net/http that reads these\n")
	p("files and serves this exposition could reach on this machine:\n\n")
	p("| goal | measured | floors | target | met |\n|---|---|---|---|---|\n")
	for _, g := range goals {
		r, ok := find(s, "dgx-h100", g.config, g.slow)
		if !ok {
			continue
		}
		m := runRatios(r, g.f).median()
		floors := "–"
		if g.floors != nil {
			if fr := runRatios(r, g.floors); len(fr) > 0 {
				floors = fmt.Sprintf("%.2f×", fr.median())
			}
		}
		p("| %s | %.2f× | %s | ≤ %.2f× | %s |\n", g.what, m, floors, g.max, map[bool]string{true: "yes", false: "no"}[m <= g.max])
	}
	if r, ok := find(s, "dgx-h100", "default", false); ok {
		bare := ""
		for _, m := range s.Memory {
			if m.Name == "bareexporter" {
				bare = "; a bare client_golang exporter here: " + mib(m.RSS)
			}
		}
		target, limit := "14.7–16.8 MiB, issue 13", uint64(168<<20)/10
		if r.RSSYuuki > 0 {
			target, limit = "measured here: "+mib(r.RSSYuuki), r.RSSYuuki
		}
		p("| RSS after %d scrapes | %s | – | ≤ yuuki/rdma_exporter's (%s%s) | %s |\n", r.RSSScrapes, mib(r.RSSRD), target, bare,
			map[bool]string{true: "yes", false: "no"}[r.RSSRD <= limit])
	}
	p("\n")
}

// writeSBSFloors splits rdma_doctor's CPU per scrape into the floors
// under it and what it spends above them.
func writeSBSFloors(p func(string, ...any), s *sideBySide) {
	var rows []string
	for _, r := range s.Runs {
		if len(r.Repeats) == 0 {
			continue
		}
		if _, _, ok := floorsOf(r.Repeats[0]); !ok {
			continue
		}
		rd := runMedian(r, func(x sbsRepeat) float64 { return float64(x.RD.CPUNS) })
		pread := runMedian(r, func(x sbsRepeat) float64 { p, _, _ := floorsOf(x); return float64(p.CPUNS) })
		http := runMedian(r, func(x sbsRepeat) float64 { _, h, _ := floorsOf(x); return float64(h.CPUNS) })
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Host, r.Config, ms(rd), ms(pread), ms(http),
			ms(rd-pread-http), runRatios(r, cpuRatio), runRatios(r, floorsCPURatio)))
	}
	if len(rows) == 0 {
		return
	}
	p("Floors under rdma_doctor's CPU per scrape, timed in the same interleaved loop on the page cache:\n\n")
	p("- pread floor: one `pread` at offset 0 of each raw-floor file on a descriptor kept open,\n")
	p("  one goroutine per device (the harness's getrusage over the reads): the least any reader\n")
	p("  of these files does per scrape, and how rdma_doctor reads its live files.\n")
	p("- HTTP floor: tools/bareexporter `-body`, serving the exposition rdma_doctor answered\n")
	p("  (one scrape of it, saved) over net/http, gzip-compressed per request as rdma_doctor\n")
	p("  compresses (klauspost/compress, BestSpeed, a reused writer): answering a scrape of this\n")
	p("  size without reading anything or making the text.\n")
	p("- Above the floors: what rdma_doctor spends beyond both: parsing the values, making the\n")
	p("  exposition, its own go_*, process_* and promhttp_* series, its diagnose series, and its\n")
	p("  scheduling. For `default` the pread floor holds only the infiniband files, so the sum\n")
	p("  is lower than that configuration's real floor.\n\n")
	p("| host | config | rdma_doctor CPU | pread floor | HTTP floor | above the floors | CPU ratio | floors' CPU ratio |\n")
	p("|---|---|---|---|---|---|---|---|\n")
	for _, row := range rows {
		p("%s", row)
	}
	p("\n")
}

// keptKernelBytes is the kernel memory one file held open on sysfs pins
// (issue 30's estimate, docs/measurements.md#hostfs).
const keptKernelBytes = 4.5 * 1024

// writeSBSMemory says where each exporter's resident memory lies.
func writeSBSMemory(p func(string, ...any), s *sideBySide) {
	if len(s.Memory) == 0 {
		return
	}
	m0 := s.Memory[0]
	p("Where the resident memory lies: rdma_doctor (default collectors), node_exporter (infiniband\n")
	p("collector) and tools/bareexporter (client_golang's default registry and promhttp, nothing\n")
	p("else: the least any client_golang exporter, yuuki/rdma_exporter among them, has) run at once\n")
	p("on %s, read from /proc/PID/status after %d interleaved scrapes of each. RssFile is the\n", m0.Host, m0.Scrapes)
	p("binary's own pages, mapped from the page cache (shared, and dropped under memory pressure):\n")
	p("it follows from the binary's loadable size and from how much of a file one page fault maps\n")
	p("on this kernel, not from what a scrape does. RssAnon is the heap, stacks and runtime.\n")
	p("Open files are the files each holds open after the scrapes (rdma_doctor's kept descriptors,\n")
	p("rdma_host_kept_descriptors, at most 4,096): on a real sysfs each pins about %.1f KiB of kernel\n", keptKernelBytes/1024)
	p("memory (the open file, and the seq_file with the page its first read filled, kept until\n")
	p("close) that no RSS figure shows; the last column is that estimate.\n\n")
	p("| exporter | loadable segments | VmRSS | RssAnon | RssFile | open files | their kernel memory on sysfs |\n|---|---|---|---|---|---|---|\n")
	for _, m := range s.Memory {
		p("| %s | %s | %s | %s | %s | %d | %s |\n", m.Name, mib(m.LoadBytes), mib(m.RSS), mib(m.Anon), mib(m.File),
			m.OpenFiles, mib(uint64(float64(m.OpenFiles)*keptKernelBytes)))
	}
	p("\n")
}

// writeSBSFixed splits CPU per scrape into a fixed part, measured on the
// generated host with no device, and a part per device, from there to the
// largest generated host: the ratio can only be flat where both
// exporters' fixed and per-device costs stand in the same proportion.
func writeSBSFixed(p func(string, ...any), s *sideBySide) {
	cpuRD := func(x sbsRepeat) float64 { return float64(x.RD.CPUNS) }
	cpuNE := func(x sbsRepeat) float64 { return float64(x.NE.CPUNS) }
	var lines []string
	for _, c := range configs(s) {
		var none, most *sbsRun
		for i, r := range s.Runs {
			if r.Config != c || r.Slow || !strings.HasPrefix(r.Host, "generated-") {
				continue
			}
			if r.Devices == 0 {
				none = &s.Runs[i]
			} else if most == nil || r.Devices > most.Devices {
				most = &s.Runs[i]
			}
		}
		if none == nil || most == nil {
			continue
		}
		n := float64(most.Devices)
		fixedRD, fixedNE := runMedian(*none, cpuRD), runMedian(*none, cpuNE)
		perRD, perNE := (runMedian(*most, cpuRD)-fixedRD)/n, (runMedian(*most, cpuNE)-fixedNE)/n
		if fixedNE <= 0 || perNE <= 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("- %s: rdma_doctor %s + %s per device, node_exporter %s + %s per device: fixed %.2f×, per device %.2f×.\n",
			c, ms(fixedRD), ms(perRD), ms(fixedNE), ms(perNE), fixedRD/fixedNE, perRD/perNE))
	}
	if len(lines) == 0 {
		return
	}
	p("CPU per scrape as a fixed part (generated-0: the host with no RDMA device) and a part\n")
	p("per device (from there to the largest generated host). The fixed part is HTTP,\n")
	p("compression, the exporter's own go_*, process_* and promhttp_* series, and for\n")
	p("rdma_doctor its diagnose series and its other collectors' cached state. The ratio\n")
	p("tends to the fixed ratio as devices shrink and to the per-device ratio as they grow,\n")
	p("so it is flat only where the two agree.\n\n")
	for _, l := range lines {
		p("%s", l)
	}
	p("\n")
}

// flatLimit is how far apart the ratios of the generated hosts may be
// (largest / smallest) to call them flat: noise on this machine alone moves
// a ratio by about a tenth between repeats.
const flatLimit = 1.25

func writeSBSFlat(p func(string, ...any), s *sideBySide) {
	p("Growth from 1 to 64 devices (generated hosts; medians over the repeats). Wall time\n")
	p("also measures parallelism: rdma_doctor reads devices concurrently (on %d CPUs here),\n", s.Machine.NProc)
	p("node_exporter one after another, so its wall ratio falls as the work grows; the CPU\n")
	p("ratio is the cost each puts on the host.\n\n")
	for _, c := range configs(s) {
		for _, m := range []struct {
			name string
			f    func(sbsRepeat) (float64, float64)
		}{{"wall", wallRatio}, {"CPU", cpuRatio}, {"floors' CPU", floorsCPURatio}} {
			if line, ok := flatness(s, c, m.f); ok {
				p("- %s, %s ratio by devices %s.\n", c, m.name, line)
			}
		}
	}
	p("\nThe floors' CPU ratio is what an exporter that did nothing beyond reading each file\n")
	p("once and serving the text would have: where it is not flat, no exporter over net/http\n")
	p("serving this exposition has a flat ratio against node_exporter.\n\n")
}

// flatness says how the ratio f of config c moves over the generated
// hosts, and whether that is flat.
func flatness(s *sideBySide, c string, f func(sbsRepeat) (float64, float64)) (string, bool) {
	var parts []string
	var meds []float64
	for _, r := range s.Runs {
		if r.Config != c || r.Slow || !strings.HasPrefix(r.Host, "generated-") || r.Devices == 0 {
			continue
		}
		m := runRatios(r, f).median()
		meds = append(meds, m)
		parts = append(parts, fmt.Sprintf("%d: %.2f×", r.Devices, m))
	}
	if len(meds) < 2 || slices.Min(meds) == 0 {
		return "", false
	}
	spread := slices.Max(meds) / slices.Min(meds)
	verdict := "flat"
	if spread > flatLimit {
		verdict = "**not flat**"
	}
	return fmt.Sprintf("%s; largest / smallest %.2f: %s (limit %.2f)", strings.Join(parts, ", "), spread, verdict, flatLimit), true
}

func ms(ns float64) string {
	if ns == 0 {
		return "–"
	}
	return time.Duration(ns).Round(10 * time.Microsecond).String()
}

func writeSBSDetail(p func(string, ...any), s *sideBySide) {
	p("Absolute figures (medians over the repeats of each repeat's median, p90 and CPU per scrape):\n\n")
	p("| host | config | sysfs | floor files | rdma_doctor median | p90 | CPU | node_exporter median | p90 | CPU | floor median | floor CPU |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.Runs {
		sysfs := "page cache"
		if r.Slow {
			sysfs = "slowfs"
		}
		med := func(f func(sbsRepeat) float64) string { return ms(runMedian(r, f)) }
		p("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Host, r.Config, sysfs, r.FloorFiles,
			med(func(x sbsRepeat) float64 { return float64(x.RD.MedianNS) }), med(func(x sbsRepeat) float64 { return float64(x.RD.P90NS) }),
			med(func(x sbsRepeat) float64 { return float64(x.RD.CPUNS) }),
			med(func(x sbsRepeat) float64 { return float64(x.NE.MedianNS) }), med(func(x sbsRepeat) float64 { return float64(x.NE.P90NS) }),
			med(func(x sbsRepeat) float64 { return float64(x.NE.CPUNS) }),
			med(func(x sbsRepeat) float64 { return float64(x.Floor.MedianNS) }), med(func(x sbsRepeat) float64 { return float64(x.Floor.CPUNS) }))
	}
	p("\n")
}

// defaultCollectors are the collectors rdma_doctor runs by default, from
// its collector table (so this page never lists a stale set).
func defaultCollectors() []string {
	var out []string
	for _, c := range collector.Table {
		if c.Default {
			out = append(out, c.Name)
		}
	}
	return out
}
