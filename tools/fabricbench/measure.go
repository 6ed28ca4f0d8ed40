// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
)

// sizeResult is what one fabric size measured.
type sizeResult struct {
	Hosts int `json:"hosts"`
	// PerfqueryCPUS is the CPU of one bare perfquery run (the local
	// port's PortCounters, one MAD) on this simulator: the floor of what
	// each perfquery run of either exporter costs, mostly umad2sim's
	// setup of its fake sysfs.
	PerfqueryCPUS float64 `json:"perfquery_cpu_seconds"`
	Switches      int     `json:"switches"`
	SwitchPorts   int     `json:"switch_ports"`
	SubnetUpS     float64 `json:"subnet_up_seconds"`
	SetupS        float64 `json:"setup_seconds"` // ibsim up to SUBNET UP
	RdmaDoctor    rdmaResult
	Treydock      *treydockResult `json:",omitempty"`
	Notes         []string        `json:",omitempty"`
}

type rdmaResult struct {
	IntervalS     float64 `json:"counters_interval_seconds"`
	SweptPorts    float64 `json:"swept_ports"` // rdma_fabric_counter_sweep_ports
	UnknownPorts  float64 `json:"unknown_ports"`
	Sweeps        int     `json:"sweeps"`             // sweeps inside the CPU windows
	SweepCPUS     float64 `json:"sweep_cpu_seconds"`  // per sweep, self + tool children (ibqueryerrors, ibnetdiscover)
	SweepWallS    float64 `json:"sweep_wall_seconds"` // median of rdma_fabric_counter_sweep_duration_seconds
	Scrapes       int     `json:"scrapes"`
	ScrapeMedianS float64 `json:"scrape_median_seconds"`
	ScrapeMaxS    float64 `json:"scrape_max_seconds"`
	ScrapeCPUS    float64 `json:"scrape_cpu_seconds"` // per scrape
	Samples       int     `json:"samples"`
	BodyBytes     int     `json:"body_bytes"` // uncompressed
	RSS           uint64  `json:"rss_bytes"`
	HWM           uint64  `json:"hwm_bytes"`
	// The route read (dump_fts and its parse, in the same process): the
	// bench runs it with a max age between one and two counters
	// intervals, so windows with and without a read alternate and
	// splitWindows tells the read's CPU from the sweep's.
	RoutesMaxAgeS  float64  `json:"routes_max_age_seconds,omitempty"`
	RouteReads     int      `json:"route_reads,omitempty"`             // reads inside the clean windows
	RouteReadCPUS  float64  `json:"route_read_cpu_seconds,omitempty"`  // per read, self + dump_fts
	RouteReadWallS float64  `json:"route_read_wall_seconds,omitempty"` // median of rdma_fabric_routes_read_duration_seconds
	RouteSwitches  float64  `json:"route_switches,omitempty"`          // rdma_fabric_routes_switches of the last read
	RouteUnknown   float64  `json:"route_switches_unknown,omitempty"`
	RouteFailures  float64  `json:"route_failures,omitempty"` // rdma_fabric_routes_read_failures_total, all reasons
	Windows        []window `json:"windows,omitempty"`
	// The flags' defaults, from the binary's --help: what the amortised
	// figure assumes.
	DefaultIntervalS float64 `json:"default_counters_interval_seconds,omitempty"`
	DefaultMaxAgeS   float64 `json:"default_routes_max_age_seconds,omitempty"`
	SplitNote        string  `json:"split_note,omitempty"`
}

// window is one clean CPU window between a round's scrapes and the end of
// the next sweep: the sweeps and route reads counted in it and its CPU.
type window struct {
	Sweeps int     `json:"sweeps"`
	Reads  int     `json:"reads"`
	CPUS   float64 `json:"cpu_seconds"`
}

// splitWindows solves CPU = sweep*Sweeps + read*Reads over the windows by
// least squares. Without a window free of reads, or without one holding a
// read, the two cannot be told apart: ok is false and note says why
// (sweep is then the mean per sweep, reads included).
func splitWindows(ws []window) (sweep, read float64, ok bool, note string) {
	var ss, sr, rr, sc, rc, c float64
	var sweeps, reads, withRead int
	for _, w := range ws {
		s, r := float64(w.Sweeps), float64(w.Reads)
		ss, sr, rr, sc, rc, c = ss+s*s, sr+s*r, rr+r*r, sc+s*w.CPUS, rc+r*w.CPUS, c+w.CPUS
		sweeps, reads = sweeps+w.Sweeps, reads+w.Reads
		if w.Reads > 0 {
			withRead++
		}
	}
	if sweeps == 0 {
		return math.NaN(), math.NaN(), false, "no clean window"
	}
	det := ss*rr - sr*sr
	switch {
	case reads == 0:
		return c / float64(sweeps), math.NaN(), false, "no route read fell in a clean window"
	case withRead == len(ws) || det <= 1e-9*ss*rr:
		return c / float64(sweeps), math.NaN(), false, "every clean window held a route read: the read's CPU is in the sweep's"
	}
	return (sc*rr - rc*sr) / det, (rc*ss - sc*sr) / det, true, ""
}

type treydockResult struct {
	Scrapes   int     `json:"scrapes"`
	CPUS      float64 `json:"cpu_seconds"` // median per scrape, self + children
	CPUMinS   float64 `json:"cpu_min_seconds"`
	CPUMaxS   float64 `json:"cpu_max_seconds"`
	WallS     float64 `json:"wall_seconds"` // median
	Samples   int     `json:"samples"`
	BodyBytes int     `json:"body_bytes"`
	RSS       uint64  `json:"rss_bytes"`
	HWM       uint64  `json:"hwm_bytes"`
	// Its own account of the scrapes' perfquery runs that failed or
	// timed out (infiniband_exporter_collect_errors and _timeouts of the
	// switch collector), summed over the measured scrapes; nil when its
	// exposition has neither.
	CollectErrors *float64 `json:"collect_errors,omitempty"`
}

// exporter is a running exporter under measurement.
type exporter struct {
	proc   *ibsimtest.Proc
	target *target
	log    *os.File
}

func (e *exporter) pid() int { return e.proc.Pid() }

func (e *exporter) stop() {
	_ = e.proc.Stop()
	e.log.Close()
}

// startExporter runs bin with args (listening on addr, from
// argsFor(addr)) in the fabric's client environment, in a directory of
// its own under the fabric's (umad2sim writes its fake sysfs there).
func startExporter(f *ibsimtest.Fabric, name, bin string, argsFor func(addr string) []string) (*exporter, error) {
	dir := filepath.Join(f.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			logf.Close()
			return nil, err
		}
		cmd := exec.Command(bin, argsFor(addr)...)
		cmd.Env, cmd.Stdout, cmd.Stderr = f.Env, logf, logf
		p, err := ibsimtest.StartProc(cmd, dir)
		if err != nil {
			logf.Close()
			return nil, err
		}
		if err = waitListen(addr, p.Exited(), 30*time.Second); err == nil {
			return &exporter{proc: p, target: newTarget(addr), log: logf}, nil
		}
		_ = p.Stop()
		if attempt == 2 {
			logf.Close()
			b, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("%s: %w\n%s", name, err, ibsimtest.Tail(string(b), 2000))
		}
	}
}

// rdmaDoctorArgs: the route read (on by default) re-reads at most every
// 1.5 counters intervals, so once the first read is confirmed it reads at
// every other check and the rounds alternate windows with and without a
// read (splitWindows).
func rdmaDoctorArgs(o options, interval time.Duration) func(string) []string {
	return func(addr string) []string {
		return append([]string{
			"--path.rootfs=" + o.rootfs, "--web.listen-address=" + addr, "--log.level=warn",
			"--collector.disable-defaults", "--collector.fabric",
			// One scan at the start, none in the measured windows: the
			// sweep reuses it.
			"--collector.fabric.interval=24h", "--collector.fabric.timeout=10m",
			"--collector.fabric.counters-interval=" + interval.String(),
			"--collector.fabric.counters-timeout=2m",
			"--collector.fabric.routes-max-age=" + routesMaxAge(interval).String(),
		}, o.extraArgs...)
	}
}

// treydockArgs: the switch collector (its default) and nothing else, as
// its README runs it for Prometheus scrapes (not --exporter.runonce).
func treydockArgs(dir string) func(string) []string {
	return func(addr string) []string {
		return []string{"--collector.switch", "--no-collector.hca", "--no-collector.ibswinfo",
			"--web.listen-address=" + addr, "--log.level=warn",
			"--exporter.lockfile=" + filepath.Join(dir, "infiniband_exporter.lock")}
	}
}

func routesMaxAge(interval time.Duration) time.Duration { return interval * 3 / 2 }

// waitSweeps scrapes (every 250 ms) until rdma_fabric_counter_sweep_runs_total
// reaches n and returns that scrape's body.
func waitSweeps(e *exporter, n float64, timeout time.Duration) ([]byte, error) {
	return waitCounter(e, "rdma_fabric_counter_sweep_runs_total", n, timeout)
}

// waitCounter scrapes (every 250 ms) until the counter name reaches n and
// returns that scrape's body.
func waitCounter(e *exporter, name string, n float64, timeout time.Duration) ([]byte, error) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		_, body, err := e.target.scrape(time.Minute)
		if err != nil {
			return nil, err
		}
		if v, _ := value(body, name); v >= n {
			return body, nil
		}
	}
	return nil, fmt.Errorf("%s did not reach %v in %v", name, n, timeout)
}

// quiet is how long rdma_doctor must have no child for a sweep to count
// as finished: perfquery runs follow each other within microseconds.
const quiet = 500 * time.Millisecond

// waitSweepEnd waits for a sweep to start (a child appears; skipped when
// started is false) and then to end (no child for quiet).
func waitSweepEnd(pid int, wait bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for wait {
		c, err := hasChildren(pid)
		if err != nil {
			return err
		}
		if c {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no sweep started in %v", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for last := time.Now(); time.Since(last) < quiet; time.Sleep(10 * time.Millisecond) {
		c, err := hasChildren(pid)
		if err != nil {
			return err
		}
		if c {
			last = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sweep still running after %v", timeout)
		}
	}
	return nil
}

// measureSize brings up the fat tree for hosts hosts and measures both
// exporters on it.
func measureSize(o options, hosts int) (_ *sizeResult, err error) {
	shape := ibsimtest.FatTreeShape(hosts)
	r := &sizeResult{Hosts: hosts, Switches: shape.Switches(), SwitchPorts: shape.SwitchPorts()}
	dir, err := os.MkdirTemp("", fmt.Sprintf("fabricbench-%d-", hosts))
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	net := filepath.Join(dir, "fattree.net")
	if err := os.WriteFile(net, []byte(shape.NetFile()), 0o644); err != nil {
		return nil, err
	}
	logf("%d hosts: %d switches, %d switch ports: starting ibsim and opensm", hosts, r.Switches, r.SwitchPorts)
	start := time.Now()
	f, err := ibsimtest.Start(dir, net, o.setup, shape.SimArgs()...)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r.SetupS, r.SubnetUpS = time.Since(start).Seconds(), f.SubnetUp.Seconds()
	logf("%d hosts: SUBNET UP after %.1f s (%.1f s with ibsim's setup)", hosts, r.SubnetUpS, r.SetupS)

	if r.PerfqueryCPUS, err = perfqueryFloor(f, 10); err != nil {
		return nil, err
	}
	logf("%d hosts: one bare perfquery run: %.1f ms CPU", hosts, r.PerfqueryCPUS*1000)

	var td *exporter
	tdWall := 0.0
	if o.treydock != "" {
		if td, err = startExporter(f, "treydock", o.treydock, treydockArgs(dir)); err != nil {
			return nil, err
		}
		defer td.stop()
		// A first scrape warms it (and sizes the interval below); not
		// counted.
		wall, body, err := td.target.scrape(o.scrapeTimeout)
		if err != nil {
			return nil, fmt.Errorf("treydock: %w", err)
		}
		tdWall = wall.Seconds()
		logf("%d hosts: treydock warm-up scrape %.2f s, %d samples", hosts, tdWall, samples(body))
	}

	// Calibration: the first sweep's duration and a cached scrape's, to
	// choose an interval that leaves each round's treydock scrape and
	// cached scrapes between two sweeps.
	cal, err := startExporter(f, "rdma_doctor-calibration", o.rdmaDoctor, rdmaDoctorArgs(o, 24*time.Hour))
	if err != nil {
		return nil, err
	}
	body, err := waitSweeps(cal, 1, o.setup)
	if err != nil {
		cal.stop()
		return nil, err
	}
	sweepWall, _ := value(body, "rdma_fabric_counter_sweep_duration_seconds")
	routeWall := 0.0
	if routesOn(o) {
		if body, err = waitCounter(cal, "rdma_fabric_routes_reads_total", 1, o.setup); err != nil {
			cal.stop()
			return nil, err
		}
		routeWall, _ = value(body, "rdma_fabric_routes_read_duration_seconds")
	}
	scrapeWall, _, err := cal.target.scrape(o.scrapeTimeout)
	cal.stop()
	if err != nil {
		return nil, err
	}
	interval := time.Duration(1.5*(sweepWall+routeWall+tdWall+float64(o.scrapes)*scrapeWall.Seconds())*float64(time.Second)) + 3*time.Second
	interval = interval.Round(time.Second)
	logf("%d hosts: calibration: sweep %.2f s, route read %.2f s, cached scrape %.3f s: counters interval %v", hosts, sweepWall, routeWall, scrapeWall.Seconds(), interval)

	rd, err := startExporter(f, "rdma_doctor", o.rdmaDoctor, rdmaDoctorArgs(o, interval))
	if err != nil {
		return nil, err
	}
	defer rd.stop()
	if _, err := waitSweeps(rd, 1, o.setup); err != nil {
		return nil, err
	}
	res := &r.RdmaDoctor
	res.IntervalS = interval.Seconds()
	if routesOn(o) {
		res.RoutesMaxAgeS = routesMaxAge(interval).Seconds()
		if res.DefaultIntervalS, res.DefaultMaxAgeS, err = flagDefaults(o.rdmaDoctor); err != nil {
			return nil, err
		}
	}
	var (
		lats           []float64
		sweepWalls     []float64
		scrapeCPU      float64
		afterScrapes   float64 // rdma_doctor's CPU after the previous round's scrapes
		prevRuns       float64
		prevReads      float64
		readWalls      []float64
		tdCPU, tdWalls []float64
		overlapped     int
		prevClean      bool
		rounds         = o.rounds(hosts)
	)
	for round := 0; round <= rounds; round++ {
		// Round 0 starts after the first sweep (waitSweeps saw it
		// counted); the others wait for the next one.
		if err := waitSweepEnd(rd.pid(), round > 0, 2*interval+o.setup); err != nil {
			return nil, err
		}
		atIdle, err := cpu(rd.pid())
		if err != nil {
			return nil, err
		}
		tdBusy := false
		if round < rounds && td != nil {
			before, err := cpu(td.pid())
			if err != nil {
				return nil, err
			}
			wall, body, err := td.target.scrape(o.scrapeTimeout)
			if err != nil {
				return nil, fmt.Errorf("treydock: %w", err)
			}
			after, err := cpu(td.pid())
			if err != nil {
				return nil, err
			}
			tdCPU, tdWalls = append(tdCPU, after-before), append(tdWalls, wall.Seconds())
			t := r.Treydock
			if t == nil {
				t = &treydockResult{}
				r.Treydock = t
			}
			t.Samples, t.BodyBytes = samples(body), len(body)
			e, ok1 := value(body, `infiniband_exporter_collect_errors{collector="switch"}`)
			to, ok2 := value(body, `infiniband_exporter_collect_timeouts{collector="switch"}`)
			if ok1 || ok2 {
				if t.CollectErrors == nil {
					t.CollectErrors = new(float64)
				}
				*t.CollectErrors += e + to
			}
			if tdBusy, err = hasChildren(rd.pid()); err != nil {
				return nil, err
			}
		}
		s0, err := cpu(rd.pid())
		if err != nil {
			return nil, err
		}
		var runs, reads float64
		for i := 0; i < o.scrapes; i++ {
			wall, body, err := rd.target.scrape(o.scrapeTimeout)
			if err != nil {
				return nil, err
			}
			lats = append(lats, wall.Seconds())
			if i == 0 {
				runs, _ = value(body, "rdma_fabric_counter_sweep_runs_total")
				reads, _ = value(body, "rdma_fabric_routes_reads_total")
				if reads > prevReads {
					rw, _ := value(body, "rdma_fabric_routes_read_duration_seconds")
					readWalls = append(readWalls, rw)
				}
				res.RouteSwitches, _ = value(body, "rdma_fabric_routes_switches")
				res.RouteUnknown, _ = value(body, "rdma_fabric_routes_switches_unknown")
				res.RouteFailures = sumValues(body, "rdma_fabric_routes_read_failures_total")
				d, _ := value(body, "rdma_fabric_counter_sweep_duration_seconds")
				sweepWalls = append(sweepWalls, d)
				res.SweptPorts, _ = value(body, "rdma_fabric_counter_sweep_ports")
				res.UnknownPorts, _ = value(body, "rdma_fabric_counter_sweep_ports_unknown")
				res.Samples, res.BodyBytes = samples(body), len(body)
			}
		}
		s1, err := cpu(rd.pid())
		if err != nil {
			return nil, err
		}
		busy, err := hasChildren(rd.pid())
		if err != nil {
			return nil, err
		}
		// A sweep that began inside the round has its CPU in neither
		// figure's window alone, nor whole in the next round's sweep
		// window: both are left out, counted and said, not hidden.
		clean := !busy && !tdBusy && (round == 0 || runs-prevRuns == 1)
		if !clean {
			overlapped++
			r.Notes = append(r.Notes, fmt.Sprintf("%d hosts, round %d: a sweep started before the round's scrapes ended; the round is left out", hosts, round))
		} else {
			scrapeCPU += s1 - s0
			res.Scrapes += o.scrapes
			if round > 0 && prevClean {
				res.Windows = append(res.Windows, window{Sweeps: int(runs - prevRuns), Reads: int(reads - prevReads), CPUS: atIdle - afterScrapes})
				res.Sweeps += int(runs - prevRuns)
				res.RouteReads += int(reads - prevReads)
			}
		}
		afterScrapes, prevRuns, prevReads, prevClean = s1, runs, reads, clean
		logf("%d hosts: round %d/%d: %v sweeps so far", hosts, round, rounds, runs)
	}
	if res.Sweeps == 0 || res.Scrapes == 0 {
		return nil, fmt.Errorf("%d hosts: no clean round (%d overlapped): raise the interval", hosts, overlapped)
	}
	// The CPU windows between rounds hold only sweeps, route reads and
	// idle time.
	var split bool
	res.SweepCPUS, res.RouteReadCPUS, split, res.SplitNote = splitWindows(res.Windows)
	if !split {
		res.RouteReadCPUS = 0
		if res.RouteReads > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%d hosts: the route read's CPU could not be told from the sweep's (%s); the sweep's figure holds it", hosts, res.SplitNote))
		}
	}
	if len(readWalls) > 0 {
		res.RouteReadWallS = median(readWalls)
	}
	res.SweepWallS = median(sweepWalls)
	res.ScrapeCPUS = scrapeCPU / float64(res.Scrapes)
	res.ScrapeMedianS, res.ScrapeMaxS = median(lats), slices.Max(lats)
	if res.RSS, res.HWM, err = memory(rd.pid()); err != nil {
		return nil, err
	}
	if t := r.Treydock; t != nil {
		t.Scrapes, t.CPUS, t.WallS = len(tdCPU), median(tdCPU), median(tdWalls)
		t.CPUMinS, t.CPUMaxS = slices.Min(tdCPU), slices.Max(tdCPU)
		if t.RSS, t.HWM, err = memory(td.pid()); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// perfqueryFloor is the mean CPU (user and system) of n bare perfquery
// runs, each reading the local port's PortCounters.
func perfqueryFloor(f *ibsimtest.Fabric, n int) (float64, error) {
	dir := filepath.Join(f.Dir, "perfquery")
	var total time.Duration
	for i := 0; i < n; i++ {
		cmd := exec.Command("perfquery")
		cmd.Env = f.Env
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, err
		}
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("perfquery: %w\n%s", err, ibsimtest.Tail(string(out), 1000))
		}
		total += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return total.Seconds() / float64(n), nil
}

// routesOn reports whether rdma_doctor runs its route read (the default)
// in this run.
func routesOn(o options) bool {
	return !slices.Contains(o.extraArgs, "--no-collector.fabric.routes") && !slices.Contains(o.extraArgs, "--collector.fabric.routes=false")
}

// flagDefaults reads the defaults of --collector.fabric.counters-interval
// and --collector.fabric.routes-max-age from the binary's --help: the
// amortised route cost is said at the defaults the binary ships.
func flagDefaults(bin string) (interval, maxAge float64, err error) {
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("%s --help: %w", bin, err)
	}
	return parseFlagDefaults(string(out))
}

func parseFlagDefaults(help string) (interval, maxAge float64, err error) {
	get := func(flag string) (float64, error) {
		_, rest, ok := strings.Cut(help, "--"+flag+"=")
		if !ok {
			return 0, fmt.Errorf("--help names no default of --%s", flag)
		}
		d, err := time.ParseDuration(strings.Fields(rest)[0])
		if err != nil {
			return 0, fmt.Errorf("--%s's default: %w", flag, err)
		}
		return d.Seconds(), nil
	}
	if interval, err = get("collector.fabric.counters-interval"); err != nil {
		return 0, 0, err
	}
	maxAge, err = get("collector.fabric.routes-max-age")
	return interval, maxAge, err
}
