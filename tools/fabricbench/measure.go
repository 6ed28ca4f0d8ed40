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
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/ibsimtest"
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

// waitSweeps scrapes (every 250 ms) until rdma_fabric_counter_sweep_runs_total
// reaches n and returns that scrape's body.
func waitSweeps(e *exporter, n float64, timeout time.Duration) ([]byte, error) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		_, body, err := e.target.scrape(time.Minute)
		if err != nil {
			return nil, err
		}
		if v, _ := value(body, "rdma_fabric_counter_sweep_runs_total"); v >= n {
			return body, nil
		}
	}
	return nil, fmt.Errorf("no %v counter sweeps in %v", n, timeout)
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
	scrapeWall, _, err := cal.target.scrape(o.scrapeTimeout)
	cal.stop()
	if err != nil {
		return nil, err
	}
	interval := time.Duration(1.5*(sweepWall+tdWall+float64(o.scrapes)*scrapeWall.Seconds())*float64(time.Second)) + 3*time.Second
	interval = interval.Round(time.Second)
	logf("%d hosts: calibration: sweep %.2f s, cached scrape %.3f s: counters interval %v", hosts, sweepWall, scrapeWall.Seconds(), interval)

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
	var (
		lats           []float64
		sweepWalls     []float64
		scrapeCPU      float64
		sweepCPU       float64
		afterScrapes   float64 // rdma_doctor's CPU after the previous round's scrapes
		prevRuns       float64
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
		var runs float64
		for i := 0; i < o.scrapes; i++ {
			wall, body, err := rd.target.scrape(o.scrapeTimeout)
			if err != nil {
				return nil, err
			}
			lats = append(lats, wall.Seconds())
			if i == 0 {
				runs, _ = value(body, "rdma_fabric_counter_sweep_runs_total")
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
				sweepCPU += atIdle - afterScrapes
				res.Sweeps += int(runs - prevRuns)
			}
		}
		afterScrapes, prevRuns, prevClean = s1, runs, clean
		logf("%d hosts: round %d/%d: %v sweeps so far", hosts, round, rounds, runs)
	}
	if res.Sweeps == 0 || res.Scrapes == 0 {
		return nil, fmt.Errorf("%d hosts: no clean round (%d overlapped): raise the interval", hosts, overlapped)
	}
	// The CPU windows between rounds hold only sweeps and idle time.
	res.SweepCPUS = sweepCPU / float64(res.Sweeps)
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
