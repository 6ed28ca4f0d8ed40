// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command fabricbench measures rdma_doctor's fabric collector (the
// background counter sweep and the cached scrape) and
// treydock/infiniband_exporter on the same simulated fat trees (ibsim,
// the real opensm and infiniband-diags, internal/dev/ibsimtest), interleaved,
// and writes docs/performance.md's fabric section (make bench-fabric).
//
// CPU is CPU, not wall: utime+stime+cutime+cstime of each exporter from
// /proc/PID/stat, before and after, so a server's reaped tool children
// (perfquery, ibnetdiscover) count as its own.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type options struct {
	sizes         []int
	rdmaDoctor    string
	treydock      string
	rootfs        string
	scrapes       int
	roundsFlag    int
	setup         time.Duration
	scrapeTimeout time.Duration
	out           string
	jsonOut       string
	jsonIn        string
	command       string
	tdVersion     string
	extraArgs     []string
}

// rounds is how many sweeps (and treydock scrapes) are measured at a
// size: fewer on large fabrics, where each is seconds; enough that
// windows with and without a route read both occur (splitWindows).
func (o options) rounds(hosts int) int {
	if o.roundsFlag > 0 {
		return o.roundsFlag
	}
	if hosts > 2000 {
		return 4
	}
	return 6
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fabricbench: "+format+"\n", args...)
}

func main() {
	var o options
	sizes := flag.String("sizes", "1000,4000", "comma-separated host counts of the generated fat trees (36-port leaves, half down, half up)")
	flag.StringVar(&o.rdmaDoctor, "rdma-doctor", "", "rdma_doctor binary (default: build ./cmd/rdma_doctor)")
	flag.StringVar(&o.treydock, "treydock-exporter", "", "treydock/infiniband_exporter binary, scraped on the same fabric (not on the Go module proxy: go build it from a checkout of github.com/treydock/infiniband_exporter; empty: skipped)")
	flag.StringVar(&o.rootfs, "rootfs", "fixtures/hosts/sm-opensm", "--path.rootfs of rdma_doctor (the fabric collector reads the fabric, not the host)")
	flag.IntVar(&o.scrapes, "scrapes", 20, "cached rdma_doctor scrapes per round")
	flag.IntVar(&o.roundsFlag, "rounds", 0, "rounds (sweeps and treydock scrapes) per size (0: 6, 4 above 2000 hosts)")
	flag.DurationVar(&o.setup, "setup-timeout", 15*time.Minute, "bound of each wait for the simulator, opensm and the first sweep")
	flag.DurationVar(&o.scrapeTimeout, "scrape-timeout", 2*time.Minute, "bound of one scrape")
	flag.StringVar(&o.out, "o", "docs/performance.md", "document whose fabric section is (re)written; empty: print the section")
	flag.StringVar(&o.jsonOut, "json", "", "also write the raw results here")
	flag.StringVar(&o.jsonIn, "from-json", "", "write the section from these raw results instead of measuring")
	flag.StringVar(&o.tdVersion, "treydock-version", "", "treydock's version, said in the report when its --version prints none (a go build without its ldflags)")
	flag.StringVar(&o.command, "command", "make bench-fabric", "the command the section says reruns it")
	extra := flag.String("rdma-doctor-args", "", "extra flags for rdma_doctor, space-separated (e.g. --collector.fabric.port-series=errors); the section names them")
	flag.Parse()
	o.extraArgs = strings.Fields(*extra)
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fabricbench: -sizes: %q is not a host count\n", s)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "fabricbench:", err)
		os.Exit(1)
	}
}

// results is the raw outcome of a run, with what the report needs to say
// where it comes from.
type results struct {
	Commit          string        `json:"commit"`
	Date            string        `json:"date"`
	CPU             string        `json:"cpu"`
	Cores           int           `json:"cores"`
	Command         string        `json:"command"`
	ExtraArgs       []string      `json:"rdma_doctor_args,omitempty"`
	Treydock        string        `json:"treydock,omitempty"` // its version
	TreydockSkipped string        `json:"treydock_skipped,omitempty"`
	Tools           string        `json:"tools"`
	Sizes           []*sizeResult `json:"sizes"`
}

func run(o options) error {
	var res results
	if o.jsonIn != "" {
		b, err := os.ReadFile(o.jsonIn)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("%s: %w", o.jsonIn, err)
		}
		return writeReport(o, &res)
	}
	res = results{Commit: gitOut("rev-parse", "--short", "HEAD"), Date: time.Now().UTC().Format("2006-01-02"),
		CPU: cpuModel(), Cores: numCPU(), Command: o.command, ExtraArgs: o.extraArgs, Tools: toolVersions()}
	if dirty := gitOut("status", "--porcelain", "--untracked-files=no"); dirty != "" {
		res.Commit += " (with uncommitted changes)"
	}
	if o.rdmaDoctor == "" {
		tmp, err := os.MkdirTemp("", "fabricbench-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		o.rdmaDoctor = filepath.Join(tmp, "rdma_doctor")
		cmd := exec.Command("go", "build", "-o", o.rdmaDoctor, "./cmd/rdma_doctor")
		cmd.Env, cmd.Stdout, cmd.Stderr = append(os.Environ(), "CGO_ENABLED=0"), os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/rdma_doctor: %w", err)
		}
	}
	if o.treydock == "" {
		res.TreydockSkipped = "TREYDOCK_EXPORTER (-treydock-exporter) names no binary: treydock/infiniband_exporter is not on the Go module proxy; go build it from a checkout of github.com/treydock/infiniband_exporter"
		logf("treydock skipped: %s", res.TreydockSkipped)
	} else {
		out, _ := exec.Command(o.treydock, "--version").CombinedOutput()
		res.Treydock = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
		if strings.Contains(res.Treydock, "version  (") || res.Treydock == "" {
			res.Treydock = "its --version names no version (built without its ldflags)"
			if o.tdVersion != "" {
				res.Treydock = o.tdVersion + ", " + res.Treydock
			}
		}
	}
	// The exporters run in directories of their own: relative paths
	// would not resolve there.
	for _, p := range []*string{&o.rootfs, &o.rdmaDoctor, &o.treydock} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	for _, n := range o.sizes {
		r, err := measureSize(o, n)
		if err != nil {
			return fmt.Errorf("%d hosts: %w", n, err)
		}
		res.Sizes = append(res.Sizes, r)
		logf("%d hosts: %+v", n, r.RdmaDoctor)
		if r.Treydock != nil {
			logf("%d hosts: treydock %+v", n, *r.Treydock)
		}
	}
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(&res, "", "  ")
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return writeReport(o, &res)
}

func gitOut(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for l := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func numCPU() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// toolVersions names the Debian packages the fabric ran on, as dpkg has
// them.
func toolVersions() string {
	var parts []string
	for _, p := range []string{"ibsim-utils", "opensm", "infiniband-diags"} {
		out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", p).Output()
		if err != nil {
			continue
		}
		parts = append(parts, p+" "+strings.TrimSpace(string(out)))
	}
	if len(parts) == 0 {
		return "unknown versions"
	}
	return strings.Join(parts, ", ")
}
