// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/sbsresult"
)

// The results file's types (tools/internal/sbsresult, read by
// tools/perfreport).
type (
	results   = sbsresult.Results
	machine   = sbsresult.Machine
	stats     = sbsresult.Stats
	repeat    = sbsresult.Repeat
	runResult = sbsresult.Run
)

func newResults(o options, b binaries) *results {
	return &results{
		Date:         time.Now().UTC().Format(time.RFC3339),
		Command:      rerunCommand(),
		Machine:      thisMachine(),
		RDMADoctor:   version(b.rdmaDoctor),
		NodeExporter: neVersion(o, b),
		Yuuki:        yuukiVersion(b),
		Skipped:      skipped(b),
		Scrapes:      o.scrapes, Warmup: o.warmup, Repeats: o.repeats, RSSAfter: o.rssAfter,
		SlowDelays: "counters/ 50µs per file, hw_counters/ 1ms per directory refresh (10ms window), 5µs otherwise",
		SlowGap:    o.slowGap.String(),
	}
}

// skipped says what a run leaves out and why.
func skipped(b binaries) []string {
	if b.yuuki != "" {
		return nil
	}
	return []string{"yuuki/rdma_exporter: no -yuuki-exporter binary (it is not on the Go module proxy, so go install cannot fetch it; docs/performance.md says how to build it)"}
}

// yuukiVersion names yuuki/rdma_exporter's binary ("" when not measured).
func yuukiVersion(b binaries) string {
	if b.yuuki == "" {
		return ""
	}
	v := version(b.yuuki) // "rdma_exporter v0.7.1"
	if rest, ok := strings.CutPrefix(v, "rdma_exporter"); ok {
		return "yuuki/rdma_exporter" + rest
	}
	return strings.TrimSpace("yuuki/rdma_exporter " + v)
}

// rerunCommand is the command line that reruns this measurement: the
// flags given, less where the results and the work files went.
func rerunCommand() string {
	args := []string{"go run ./tools/sidebyside"}
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "o" && f.Name != "work" {
			args = append(args, fmt.Sprintf("-%s=%s", f.Name, f.Value))
		}
	})
	return strings.Join(args, " ") + " -o results.json"
}

// neVersion names node_exporter: the pinned version when this run
// installed it (go install leaves --version without one).
func neVersion(o options, b binaries) string {
	if o.nodeExporter == "" {
		return "node_exporter " + o.neVersion + " (go install github.com/prometheus/node_exporter@" + o.neVersion + ")"
	}
	return version(b.nodeExporter)
}

// contender is something timed in the interleaved loop.
type contender struct {
	name  string
	step  func() (time.Duration, error)
	cpu   func() (time.Duration, error) // cumulative CPU time
	put   func(*repeat, stats)          // where its figures go in a repeat
	walls []time.Duration
}

// measure starts both exporters on root and runs the interleaved loop.
func measure(o options, b binaries, work, host, root, config string, slow bool, floor floorList) (r runResult, err error) {
	rdSpec := rdmaDoctor(b.rdmaDoctor, config == "infiniband")
	if config != "default" && config != "infiniband" {
		return r, fmt.Errorf("config %q: want default or infiniband", config)
	}
	r = runResult{Host: host, Devices: len(floor.devices), Ports: floor.ports, FloorFiles: floor.files(), Config: config, Slow: slow}
	label := fmt.Sprintf("%s %s%s", host, config, map[bool]string{true: " slow-sysfs"}[slow])
	fmt.Printf("sidebyside: %s: %d devices, %d ports, %d floor files\n", label, r.Devices, r.Ports, r.FloorFiles)
	rd, err := rdSpec.start(root, work)
	if err != nil {
		return r, err
	}
	defer stopBoth(&err, rd)
	ne, err := nodeExporter(b.nodeExporter).start(root, work)
	if err != nil {
		return r, err
	}
	defer stopBoth(&err, ne)
	if err := inspect(&r, rd.target, ne.target); err != nil {
		return r, err
	}
	gap := time.Duration(0)
	if slow {
		gap = o.slowGap
	}
	cs := contenders(rd.target, ne.target, floor, gap)
	// What the RSS top-up scrapes: the exporters, not the floors.
	exporters := cs[:2:2]
	var yk *running
	if b.yuuki != "" {
		if yk, err = yuukiExporter(b.yuuki).start(root, work); err != nil {
			return r, err
		}
		defer stopBoth(&err, yk)
		e, err := yk.target.inspect()
		if err != nil {
			return r, err
		}
		if e.samples == 0 {
			return r, fmt.Errorf("%s answered no samples", yk.target.name)
		}
		// It answers as it answers Prometheus: uncompressed, where it
		// does not negotiate gzip.
		r.SamplesYuuki, r.GzipYuuki = e.samples, e.gzipped
		c := scrapeContender(yk.target, gap, func(p *repeat, s stats) { p.Yuuki = &s })
		cs = append(cs, c)
		exporters = append(exporters, c)
	}
	if !slow {
		// The floors under rdma_doctor's own work: reading each file once
		// on a kept descriptor, and serving its exposition over net/http.
		kept, ferr := floor.open()
		if ferr != nil {
			return r, ferr
		}
		defer kept.close()
		hf, ferr := startHTTPFloor(b.bareExporter, work, rd.target)
		if ferr != nil {
			return r, ferr
		}
		defer stopBoth(&err, hf)
		cs = append(cs, readContender("pread floor", kept.read, 0, func(p *repeat, s stats) { p.PreadFloor = &s }),
			scrapeContender(hf.target, 0, func(p *repeat, s stats) { p.HTTPFloor = &s }))
	}
	if err := loop(cs, o.warmup); err != nil {
		return r, err
	}
	for i := range o.repeats {
		rep, err := timedRepeat(cs, o.scrapes)
		if err != nil {
			return r, err
		}
		r.Repeats = append(r.Repeats, rep)
		fmt.Printf("sidebyside: %s: repeat %d: wall %s / %s = %.2f, CPU %s / %s = %.2f, floor %s\n", label, i+1,
			dur(rep.RD.MedianNS), dur(rep.NE.MedianNS), ratio(rep.RD.MedianNS, rep.NE.MedianNS),
			dur(rep.RD.CPUNS), dur(rep.NE.CPUNS), ratio(rep.RD.CPUNS, rep.NE.CPUNS), dur(rep.Floor.MedianNS))
		if rep.Yuuki != nil {
			fmt.Printf("sidebyside: %s: repeat %d: against yuuki/rdma_exporter: wall %s / %s = %.2f, CPU %s / %s = %.2f\n", label, i+1,
				dur(rep.RD.MedianNS), dur(rep.Yuuki.MedianNS), ratio(rep.RD.MedianNS, rep.Yuuki.MedianNS),
				dur(rep.RD.CPUNS), dur(rep.Yuuki.CPUNS), ratio(rep.RD.CPUNS, rep.Yuuki.CPUNS))
		}
		if rep.PreadFloor != nil && rep.HTTPFloor != nil {
			fmt.Printf("sidebyside: %s: repeat %d: CPU of the floors: pread %s + HTTP %s = %.2f of node_exporter's\n", label, i+1,
				dur(rep.PreadFloor.CPUNS), dur(rep.HTTPFloor.CPUNS), ratio(rep.PreadFloor.CPUNS+rep.HTTPFloor.CPUNS, rep.NE.CPUNS))
		}
	}
	// Top up to rss-after scrapes of each exporter, then read VmRSS. Not
	// on the slow sysfs: memory does not depend on how slow a read is, and
	// the top-up would cost minutes there.
	done := o.warmup + o.repeats*o.scrapes
	r.RSSScrapes = done
	if !slow {
		if err := loop(exporters, o.rssAfter-done); err != nil {
			return r, err
		}
		r.RSSScrapes = max(done, o.rssAfter)
	}
	if r.RSSRD, err = procRSS(rd.target.pid); err != nil {
		return r, err
	}
	if r.RSSNE, err = procRSS(ne.target.pid); err != nil {
		return r, err
	}
	if yk != nil {
		if r.RSSYuuki, err = procRSS(yk.target.pid); err != nil {
			return r, err
		}
	}
	return r, nil
}

// check says whether an exposition is what the loop must time: gzip, with
// samples.
func (e exposition) check(t *target) error {
	if !e.gzipped || e.samples == 0 {
		return fmt.Errorf("%s answered gzip=%v with %d samples", t.name, e.gzipped, e.samples)
	}
	return nil
}

func stopBoth(err *error, x *running) {
	if serr := x.proc.stop(10 * time.Second); serr != nil && *err == nil {
		*err = serr
	}
}

// inspect checks that both exporters answer gzip with samples, and keeps
// which collectors fail (a generated host lacks what some collectors of
// the default configuration look for; that is reported, not hidden).
func inspect(r *runResult, rd, ne *target) error {
	for _, t := range []*target{rd, ne} {
		e, err := t.inspect()
		if err != nil {
			return err
		}
		if err := e.check(t); err != nil {
			return err
		}
		if t == rd {
			r.SamplesRD, r.FailedRD, r.ContentType = e.samples, e.failed, e.contentType
		} else {
			r.SamplesNE, r.FailedNE = e.samples, e.failed
		}
		if len(e.failed) > 0 {
			fmt.Printf("sidebyside: %s: failed collectors: %s\n", t.name, strings.Join(e.failed, ", "))
		}
	}
	return nil
}

// contenders are the two exporters and the raw floor, in the order they
// take turns.
func contenders(rd, ne *target, floor floorList, gap time.Duration) []*contender {
	return []*contender{
		scrapeContender(rd, gap, func(p *repeat, s stats) { p.RD = s }),
		scrapeContender(ne, gap, func(p *repeat, s stats) { p.NE = s }),
		readContender("floor", floor.read, gap, func(p *repeat, s stats) { p.Floor = s }),
	}
}

// scrapeContender scrapes t, after gap; its CPU is the process's.
func scrapeContender(t *target, gap time.Duration, put func(*repeat, stats)) *contender {
	return &contender{name: t.name, put: put,
		step: func() (time.Duration, error) {
			if gap > 0 {
				time.Sleep(gap)
			}
			return t.scrape()
		},
		cpu: func() (time.Duration, error) {
			s, err := procCPU(t.pid)
			return time.Duration(s * float64(time.Second)), err
		}}
}

// readContender runs read in this process, after gap; its CPU is this
// process's over the reads alone.
func readContender(name string, read func() (time.Duration, int, error), gap time.Duration, put func(*repeat, stats)) *contender {
	var total time.Duration
	return &contender{name: name, put: put,
		step: func() (time.Duration, error) {
			if gap > 0 {
				time.Sleep(gap)
			}
			before, err := selfCPU()
			if err != nil {
				return 0, err
			}
			el, _, err := read()
			after, cerr := selfCPU()
			if cerr != nil {
				return 0, cerr
			}
			total += after - before
			return el, err
		},
		cpu: func() (time.Duration, error) { return total, nil }}
}

// startHTTPFloor saves rdma_doctor's exposition (one scrape, in the
// format it negotiates with Prometheus's Accept header) and starts
// tools/bareexporter serving it.
func startHTTPFloor(bin, work string, rd *target) (*running, error) {
	body, contentType, err := rd.plain()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(work, "http-floor-body.txt")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return nil, err
	}
	return httpFloor(bin, path, contentType).start("", work)
}

// loop runs n rounds of one step of each contender, in turn.
func loop(cs []*contender, n int) error {
	for range n {
		for _, c := range cs {
			if _, err := c.step(); err != nil {
				return err
			}
		}
	}
	return nil
}

// timedRepeat runs n interleaved rounds and returns each contender's
// median and p90 wall time and its CPU per round.
func timedRepeat(cs []*contender, n int) (repeat, error) {
	cpu0 := make([]time.Duration, len(cs))
	for i, c := range cs {
		v, err := c.cpu()
		if err != nil {
			return repeat{}, err
		}
		cpu0[i] = v
		c.walls = c.walls[:0]
	}
	for range n {
		for _, c := range cs {
			d, err := c.step()
			if err != nil {
				return repeat{}, err
			}
			c.walls = append(c.walls, d)
		}
	}
	var rep repeat
	for i, c := range cs {
		v, err := c.cpu()
		if err != nil {
			return repeat{}, err
		}
		c.put(&rep, stats{MedianNS: int64(quantile(c.walls, 0.5)), P90NS: int64(quantile(c.walls, 0.9)), CPUNS: int64(v-cpu0[i]) / int64(n)})
	}
	return rep, nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func dur(ns int64) string { return time.Duration(ns).Round(time.Microsecond).String() }

// printSummary prints the ratios per run and whether they stay flat over
// the generated hosts.
func printSummary(res *results) {
	fmt.Println("\nhost\tdevices\tconfig\tsysfs\twall ratio\tCPU ratio\tfloor ratio\tRSS rdma_doctor\tRSS node_exporter")
	for _, r := range res.Runs {
		fmt.Printf("%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f MiB\t%.1f MiB\n", r.Host, r.Devices, r.Config, map[bool]string{true: "slow", false: "cache"}[r.Slow],
			wallRange(r), cpuRange(r), floorRange(r), float64(r.RSSRD)/(1<<20), float64(r.RSSNE)/(1<<20))
	}
	if len(res.Memory) > 0 {
		fmt.Println("\nexporter\tloadable\tVmRSS\tRssAnon\tRssFile")
	}
	for _, m := range res.Memory {
		fmt.Printf("%s\t%.1f MiB\t%.1f MiB\t%.1f MiB\t%.1f MiB\n", m.Name, mb(m.LoadBytes), mb(m.RSS), mb(m.Anon), mb(m.File))
	}
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }

func wallRange(r runResult) string {
	return rangeOf(r.Repeats, func(p repeat) float64 { return ratio(p.RD.MedianNS, p.NE.MedianNS) })
}

func cpuRange(r runResult) string {
	return rangeOf(r.Repeats, func(p repeat) float64 { return ratio(p.RD.CPUNS, p.NE.CPUNS) })
}

func floorRange(r runResult) string {
	return rangeOf(r.Repeats, func(p repeat) float64 { return ratio(p.RD.MedianNS, p.Floor.MedianNS) })
}

// rangeOf is "lo–hi" of f over the repeats.
func rangeOf(reps []repeat, f func(repeat) float64) string {
	if len(reps) == 0 {
		return "–"
	}
	lo, hi := f(reps[0]), f(reps[0])
	for _, p := range reps[1:] {
		lo, hi = min(lo, f(p)), max(hi, f(p))
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}
