// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command sidebyside measures rdma_doctor against node_exporter (its
// infiniband collector alone, built from a pinned version) on the same
// host trees: both exporters run at once and are scraped interleaved, one
// scrape of each in turn, as Prometheus scrapes (gzip, its Accept header),
// so that the machine's load falls on both alike and their ratio means
// something on a shared machine. In the same loop it times the floors:
// bare open/read/close of the files an infiniband-only scrape reads (the
// raw floor), one pread of each on a kept descriptor (the pread floor), and
// tools/bareexporter serving rdma_doctor's own exposition over net/http
// (the HTTP floor): what is left of rdma_doctor's cost above the last two
// is its own work. It
// runs on fixture hosts, on generated hosts of N clones of one fixture
// device, and on a slow sysfs (tools/slowfs: the same tree over FUSE with
// a firmware-like delay per read). make bench runs it and tools/perfreport
// turns its results into docs/performance.md.
//
//	go run ./tools/sidebyside -o results.json [-rdma-doctor ./rdma_doctor] [-scrapes 200] ...
//
// It needs root and /dev/fuse for the slow sysfs runs (-slow-hosts= to skip
// them). Only loopback addresses are used; every loop is bounded.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	rdmaDoctor, nodeExporter, neVersion, cache string
	yuuki                                      string
	fixtures, template, templateDevice         string
	hosts, configs, slowHosts                  []string
	scrapes, warmup, repeats, rssAfter         int
	slowGap                                    time.Duration
	out, work, printFloor                      string
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.rdmaDoctor, "rdma-doctor", "", "rdma_doctor binary to measure (default: build ./cmd/rdma_doctor)")
	flag.StringVar(&o.nodeExporter, "node-exporter", "", "node_exporter binary (default: go install the pinned version into -cache)")
	flag.StringVar(&o.yuuki, "yuuki-exporter", "", "yuuki/rdma_exporter binary, measured in the same loop with its defaults (it is not on the Go module proxy: go build it from a checkout of github.com/yuuki/rdma_exporter; empty: skipped)")
	flag.StringVar(&o.neVersion, "node-exporter-version", "v1.10.1", "node_exporter version to install")
	flag.StringVar(&o.cache, "cache", defaultCache(), "where node_exporter is installed, outside the repository")
	flag.StringVar(&o.fixtures, "fixtures", "fixtures/hosts", "fixture hosts directory")
	flag.StringVar(&o.template, "template", "dgx-h100", "fixture host the generated hosts are made from")
	flag.StringVar(&o.templateDevice, "template-device", "mlx5_0", "device of -template cloned into the generated hosts")
	hosts := flag.String("hosts", "dgx-h100,gen:0,gen:1,gen:9,gen:32,gen:64", "hosts: fixture names and gen:N (N clones of -template-device; gen:0 has none, the fixed cost of a scrape)")
	configs := flag.String("configs", "default,infiniband", "rdma_doctor configurations: default (its default collectors), infiniband (that collector alone)")
	slow := flag.String("slow-hosts", "dgx-h100", "hosts also measured on the slow sysfs (tools/slowfs; needs root and /dev/fuse); empty for none")
	flag.IntVar(&o.scrapes, "scrapes", 200, "timed scrapes of each exporter per repeat")
	flag.IntVar(&o.warmup, "warmup", 20, "untimed scrapes of each exporter before the first repeat")
	flag.IntVar(&o.repeats, "repeats", 3, "repeats")
	flag.IntVar(&o.rssAfter, "rss-after", 1000, "scrapes of each exporter (warm-up and timed included) after which VmRSS is read; also the scrapes of the memory run (rdma_doctor, node_exporter and tools/bareexporter on -template; 0: none)")
	flag.DurationVar(&o.slowGap, "slow-gap", 25*time.Millisecond, "pause before each scrape on the slow sysfs, longer than its hw_counters window, so that neither exporter reads the other's refresh")
	flag.StringVar(&o.out, "o", "", "results file (JSON) for tools/perfreport")
	flag.StringVar(&o.printFloor, "print-floor", "", "print the raw floor's file list of this host tree's sys/ and exit (to compare with what a scrape opens, e.g. under strace)")
	flag.StringVar(&o.work, "work", "", "work directory (default: a new temporary one, removed at the end)")
	flag.Parse()
	o.hosts, o.configs, o.slowHosts = split(*hosts), split(*configs), split(*slow)
	return o
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func defaultCache() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rdma_doctor-bench")
	}
	return filepath.Join(os.TempDir(), "rdma_doctor-bench")
}

func main() {
	go stopOnSignal()
	if err := run(parseFlags()); err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
}

// stopOnSignal stops the exporters and slowfs on SIGINT or SIGTERM, then
// exits.
func stopOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	sig := <-ch
	fmt.Fprintf(os.Stderr, "sidebyside: %v: stopping what it started\n", sig)
	live.stopAll()
	os.Exit(130)
}

func run(o options) error {
	if o.printFloor != "" {
		return printFloorList(o.printFloor)
	}
	if o.scrapes < 1 || o.repeats < 1 || o.warmup < 0 {
		return fmt.Errorf("-scrapes and -repeats must be at least 1, -warmup at least 0")
	}
	work := o.work
	if work == "" {
		d, err := os.MkdirTemp("", "sidebyside-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	bins, err := prepare(o, work)
	if err != nil {
		return err
	}
	res := newResults(o, bins)
	for _, sk := range res.Skipped {
		fmt.Println("sidebyside: skipped:", sk)
	}
	for _, h := range o.hosts {
		runs, err := measureHost(o, bins, work, h)
		if err != nil {
			return err
		}
		res.Runs = append(res.Runs, runs...)
	}
	if o.rssAfter > 0 {
		root, err := hostTree(o, work, o.template)
		if err != nil {
			return err
		}
		if res.Memory, err = measureMemory(bins, work, o.template, root, o.rssAfter); err != nil {
			return err
		}
	}
	printSummary(res)
	if o.out == "" {
		return nil
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(o.out, append(b, '\n'), 0o644)
}

func printFloorList(root string) error {
	l, err := listFloor(filepath.Join(root, "sys"))
	if err != nil {
		return err
	}
	for _, files := range l.devices {
		for _, f := range files {
			fmt.Println(f)
		}
	}
	return nil
}

// binaries are the programs a run starts.
type binaries struct {
	rdmaDoctor, nodeExporter, bareExporter, slowfs string
	// yuuki is yuuki/rdma_exporter; "": not measured.
	yuuki string
}

// prepare builds or finds rdma_doctor, node_exporter and slowfs.
func prepare(o options, work string) (binaries, error) {
	b := binaries{rdmaDoctor: o.rdmaDoctor, nodeExporter: o.nodeExporter, yuuki: o.yuuki}
	if b.rdmaDoctor == "" {
		b.rdmaDoctor = filepath.Join(work, "rdma_doctor")
		// The revision goes into --version, and so into the report.
		ldflags := "-X github.com/prometheus/common/version.Revision=" + revision()
		if err := goCmd(nil, "build", "-ldflags", ldflags, "-o", b.rdmaDoctor, "./cmd/rdma_doctor"); err != nil {
			return b, err
		}
	}
	if b.nodeExporter == "" {
		dir := filepath.Join(o.cache, "node_exporter-"+o.neVersion)
		b.nodeExporter = filepath.Join(dir, "node_exporter")
		if _, err := os.Stat(b.nodeExporter); err != nil {
			fmt.Printf("sidebyside: installing node_exporter %s into %s\n", o.neVersion, dir)
			if err := goCmd([]string{"GOBIN=" + dir}, "install", "github.com/prometheus/node_exporter@"+o.neVersion); err != nil {
				return b, err
			}
		}
	}
	b.bareExporter = filepath.Join(work, "bareexporter")
	if err := goCmd(nil, "build", "-o", b.bareExporter, "./tools/bareexporter"); err != nil {
		return b, err
	}
	if len(o.slowHosts) > 0 {
		b.slowfs = filepath.Join(work, "slowfs")
		if err := goCmd(nil, "build", "-o", b.slowfs, "./tools/slowfs"); err != nil {
			return b, err
		}
	}
	for _, p := range []*string{&b.rdmaDoctor, &b.nodeExporter, &b.yuuki} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return b, err
		}
		*p = abs
	}
	return b, nil
}

// revision is the checkout's commit, "-dirty" when it has changes.
func revision() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func goCmd(env []string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// hostTree returns the root of host h: a fixture host, or a generated one
// written below work.
func hostTree(o options, work, h string) (string, error) {
	n, ok := strings.CutPrefix(h, "gen:")
	if !ok {
		root, err := filepath.Abs(filepath.Join(o.fixtures, h))
		if err != nil {
			return "", err
		}
		_, err = os.Stat(filepath.Join(root, "sys/class/infiniband"))
		return root, err
	}
	devices, err := strconv.Atoi(n)
	if err != nil {
		return "", fmt.Errorf("host %q: want gen:<devices>", h)
	}
	tmpl, err := filepath.Abs(filepath.Join(o.fixtures, o.template))
	if err != nil {
		return "", err
	}
	root := filepath.Join(work, "hosts", fmt.Sprintf("generated-%d", devices))
	if err := (hostGen{template: tmpl, device: o.templateDevice}).generate(root, devices); err != nil {
		return "", fmt.Errorf("host %s: %w", h, err)
	}
	return root, nil
}

func hostName(h string) string {
	if n, ok := strings.CutPrefix(h, "gen:"); ok {
		return "generated-" + n
	}
	return h
}

// measureHost runs every configuration on host h, and again on the slow
// sysfs if h is one of -slow-hosts.
func measureHost(o options, bins binaries, work, h string) ([]runResult, error) {
	root, err := hostTree(o, work, h)
	if err != nil {
		return nil, err
	}
	floor, err := listFloor(filepath.Join(root, "sys"))
	if err != nil {
		return nil, err
	}
	var runs []runResult
	for _, c := range o.configs {
		r, err := measure(o, bins, work, hostName(h), root, c, false, floor)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	if !contains(o.slowHosts, h) {
		return runs, nil
	}
	slow, err := onSlowfs(o, bins, work, hostName(h), root, floor)
	return append(runs, slow...), err
}

// onSlowfs mounts root on the slow sysfs and runs every configuration there.
func onSlowfs(o options, bins binaries, work, name, root string, floor floorList) (runs []runResult, err error) {
	mnt := filepath.Join(work, "slow-"+name)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, err
	}
	fs, err := start("slowfs-"+name, bins.slowfs, []string{"-tree", root, "-mount", mnt}, work)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := fs.stop(10 * time.Second); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := waitPath(fs, filepath.Join(mnt, "sys/class/infiniband"), 200); err != nil {
		return nil, err
	}
	slowFloor, err := listFloor(filepath.Join(mnt, "sys"))
	if err != nil {
		return nil, err
	}
	if slowFloor.files() != floor.files() {
		return nil, fmt.Errorf("slowfs serves %d floor files of %s, the tree has %d", slowFloor.files(), name, floor.files())
	}
	for _, c := range o.configs {
		r, err := measure(o, bins, work, name, mnt, c, true, slowFloor)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// machine describes where the numbers were taken.
func thisMachine() machine {
	m := machine{NProc: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// version is the first line of bin --version (both exporters print it on
// stderr), or "" if it says nothing.
func version(bin string) string {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}
