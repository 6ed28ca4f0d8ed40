// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package demo runs what make demo shows: the built rdma_doctor serving
// several fixture hosts, and the simulated fabric (ibsim and opensm) when
// they are installed, scraped by a real Prometheus with the shipped rules,
// so that every dashboard query has data to look at. tools/demo runs it
// until Ctrl-C; the e2e test TestDemoDashboardQueries runs it headless.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-doctor/rdma_doctor/alerts"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
)

// Hosts are the fixture hosts the demo serves by default, chosen so that
// between them most panels have something to show: an InfiniBand DGX with
// GPUs, an HDR host linked at FDR (a degraded link, failing checks), a
// RoCE host with the MLNX_OFED ECN files, a port without a subnet manager,
// and an HGX whose GPUs sit on the wrong rails.
var Hosts = []string{"dgx-h100", "cx6-hdr-fdr", "roce-ecn-ofed", "sm-no-sm", "hgx-h100-swapped"}

// FabricHost is the fixture host whose rdma_doctor runs the fabric
// collector against the simulator (the SM host's tree; the fabric
// collector reads the fabric, not the host).
const FabricHost = "sm-opensm"

// Job is the scrape job name, the one the alerts and dashboards expect.
const Job = "rdma_doctor"

// FabricShape is the simulated fat tree: the e2e fabric tests' shape (4
// leaves, 2 spines, 16 hosts, unplugged ports on every switch).
var FabricShape = ibsimtest.Shape{Hosts: 16, Leaves: 4, Spines: 2, LeafPorts: 8, SpinePorts: 8}

// fabricTools are the programs the simulated fabric needs.
var fabricTools = []string{"ibsim", "opensm", "iblinkinfo", "ibnetdiscover", "ibqueryerrors"}

// Options say what to run.
type Options struct {
	// Binary is the built rdma_doctor; Prometheus the prometheus binary.
	Binary, Prometheus string
	// Root is the repository root (fixtures/hosts is below it).
	Root string
	// Dir holds the processes' files: Prometheus's config, rules and
	// data, each process's log. The caller removes it.
	Dir string
	// Hosts are fixture host names (Hosts when nil).
	Hosts []string
	// Fabric asks for the simulated fabric; without its tools the demo
	// runs without it and FabricErr says why.
	Fabric bool
	// ScrapeInterval is Prometheus's scrape and rule evaluation interval.
	ScrapeInterval time.Duration
	// PrometheusAddr is Prometheus's listen address (a free loopback
	// port when empty).
	PrometheusAddr string
}

// Target is one scraped rdma_doctor.
type Target struct {
	Name, Addr string
	Log        string // its log file
}

// Demo is the running set of processes.
type Demo struct {
	// URL is Prometheus's.
	URL     string
	Targets []Target
	// FabricErr says why the fabric does not run (nil when it does or
	// was not asked for).
	FabricErr error

	procs  []*ibsimtest.Proc
	fabric *ibsimtest.Fabric
	// simDir is where the fabric exporter and its tools work: processes
	// still working there at Close are killed.
	simDir string
}

// setupWait bounds each wait for a process to come up.
const setupWait = 60 * time.Second

// Start starts the exporters, the fabric when asked and possible, and
// Prometheus, and returns once Prometheus is ready. On error everything
// started is stopped.
func Start(o Options) (_ *Demo, err error) {
	if o.ScrapeInterval <= 0 {
		o.ScrapeInterval = 5 * time.Second
	}
	// The processes run in directories of their own: a relative path
	// would not find the binary or the fixtures there.
	for _, p := range []*string{&o.Binary, &o.Root} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = abs
	}
	hosts := o.Hosts
	if hosts == nil {
		hosts = Hosts
	}
	d := &Demo{}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	for _, h := range hosts {
		t, err := d.startExporter(o, h, nil, hostArgs(o.Root, h))
		if err != nil {
			return nil, err
		}
		d.Targets = append(d.Targets, t)
	}
	if o.Fabric {
		t, err := d.startFabric(o)
		switch {
		case errors.Is(err, errNoFabricTools):
			d.FabricErr = err
		case err != nil:
			return nil, err
		default:
			d.Targets = append(d.Targets, t)
		}
	}
	if err := d.startPrometheus(o); err != nil {
		return nil, err
	}
	return d, nil
}

var errNoFabricTools = errors.New("simulated fabric not run")

// hostArgs are the flags that serve a fixture host, with the host's own
// config file when it has one.
func hostArgs(root, host string) []string {
	tree := filepath.Join(root, "fixtures", "hosts", host)
	args := []string{"--path.rootfs=" + tree}
	if cfg := filepath.Join(tree, "etc", "rdma_doctor", "rdma_doctor.yml"); fileExists(cfg) {
		args = append(args, "--config.file="+cfg)
	}
	return args
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startFabric starts ibsim and opensm on FabricShape and an rdma_doctor
// with the fabric collector on it, or returns errNoFabricTools (wrapped,
// with the missing piece) when they are not installed.
func (d *Demo) startFabric(o Options) (Target, error) {
	if _, err := ibsimtest.Umad2sim(); err != nil {
		return Target{}, fmt.Errorf("%w: %v", errNoFabricTools, err)
	}
	for _, tool := range fabricTools {
		if _, err := exec.LookPath(tool); err != nil {
			return Target{}, fmt.Errorf("%w: %s not installed (Debian: ibsim-utils, opensm, infiniband-diags)", errNoFabricTools, tool)
		}
	}
	dir := filepath.Join(o.Dir, "fabric")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Target{}, err
	}
	netFile := filepath.Join(dir, "fattree.net")
	if err := os.WriteFile(netFile, []byte(FabricShape.NetFile()), 0o644); err != nil {
		return Target{}, err
	}
	f, err := ibsimtest.Start(dir, netFile, setupWait)
	if err != nil {
		return Target{}, fmt.Errorf("simulated fabric: %w", err)
	}
	d.fabric = f
	d.simDir = filepath.Join(dir, "exporter")
	// Short intervals so the fabric panels fill within a minute; the
	// timeouts are generous for a loaded machine.
	args := append(hostArgs(o.Root, FabricHost), "--collector.fabric",
		"--collector.fabric.interval=10s", "--collector.fabric.timeout=30s",
		"--collector.fabric.counters-interval=2s", "--collector.fabric.counters-timeout=20s")
	return d.startExporter(o, "fabric ("+FabricHost+" on ibsim)", f.Env, args)
}

// startExporter runs rdma_doctor serve with args on a free loopback port
// and waits until it listens. env, when set, is its environment (the
// simulator's for the fabric one: its tools inherit the preload).
func (d *Demo) startExporter(o Options, name string, env []string, args []string) (Target, error) {
	logName := strings.NewReplacer(" ", "_", "(", "", ")", "").Replace(name) + ".log"
	t := Target{Name: name, Log: filepath.Join(o.Dir, logName)}
	for attempt := 0; ; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return t, err
		}
		t.Addr = addr
		logf, err := os.Create(t.Log)
		if err != nil {
			return t, err
		}
		cmd := exec.Command(o.Binary, append([]string{"serve", "--web.listen-address=" + addr}, args...)...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
		workDir := filepath.Join(o.Dir, "work", strconv.Itoa(len(d.procs)))
		if env != nil {
			workDir = d.simDir
		}
		p, err := ibsimtest.StartProc(cmd, workDir)
		logf.Close()
		if err != nil {
			return t, err
		}
		d.procs = append(d.procs, p)
		err = waitListen(addr, p)
		if err == nil {
			return t, nil
		}
		log, _ := os.ReadFile(t.Log)
		if attempt < 3 && strings.Contains(string(log), "address already in use") {
			continue
		}
		return t, fmt.Errorf("rdma_doctor for %s: %w\n%s", name, err, ibsimtest.Tail(string(log), 2000))
	}
}

// waitListen waits until addr accepts connections or p exits.
func waitListen(addr string, p *ibsimtest.Proc) error {
	for deadline := time.Now().Add(setupWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.Exited():
			return errors.New("exited before it listened")
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("not listening on %s after %v", addr, setupWait)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startPrometheus writes the shipped rules and a config scraping every
// target, starts Prometheus and waits until it is ready.
func (d *Demo) startPrometheus(o Options) error {
	rules := filepath.Join(o.Dir, "rdma_doctor.rules.yml")
	if err := os.WriteFile(rules, alerts.Rules, 0o644); err != nil {
		return err
	}
	targets := make([]string, len(d.Targets))
	for i, t := range d.Targets {
		targets[i] = strconv.Quote(t.Addr)
	}
	cfg := filepath.Join(o.Dir, "prometheus.yml")
	iv := model(o.ScrapeInterval)
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `global:
  scrape_interval: %s
  evaluation_interval: %s
rule_files: [%q]
scrape_configs:
  - job_name: %s
    static_configs:
      - targets: [%s]
`, iv, iv, rules, Job, strings.Join(targets, ", ")), 0o644); err != nil {
		return err
	}
	addr := o.PrometheusAddr
	if addr == "" {
		var err error
		if addr, err = freeAddr(); err != nil {
			return err
		}
	}
	logPath := filepath.Join(o.Dir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(o.Prometheus, "--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(o.Dir, "prometheus-data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := ibsimtest.StartProc(cmd, filepath.Join(o.Dir, "work", "prometheus"))
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	d.URL = "http://" + addr
	if err := waitReady(d.URL+"/-/ready", p); err != nil {
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("prometheus: %w\n%s", err, ibsimtest.Tail(string(log), 2000))
	}
	return nil
}

// model formats a duration as Prometheus's config wants it (whole
// milliseconds at least).
func model(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}

func waitReady(u string, p *ibsimtest.Proc) error {
	for deadline := time.Now().Add(setupWait); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case <-p.Exited():
			return errors.New("exited before it was ready")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return nil
		}
	}
	return fmt.Errorf("%s not ready after %v", u, setupWait)
}

// Close stops every process, the fabric exporter's tools (they run in
// process groups of their own and outlive its kill) and the simulator.
func (d *Demo) Close() {
	for i := len(d.procs) - 1; i >= 0; i-- {
		_ = d.procs[i].Stop()
	}
	d.procs = nil
	if d.simDir != "" {
		killWorkingIn(d.simDir)
	}
	if d.fabric != nil {
		d.fabric.Close()
		d.fabric = nil
	}
}

// killWorkingIn kills the processes whose working directory is dir or
// below it, until none is left (10 s at most).
func killWorkingIn(dir string) {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		entries, _ := os.ReadDir("/proc")
		left := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
			if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+"/")) {
				continue
			}
			left++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if left == 0 {
			return
		}
	}
}
