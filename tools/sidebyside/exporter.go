// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is an exporter (or slowfs) this harness started and must stop.
// stop may be called from two goroutines at once (the run's deferred stop
// and the signal handler's): exit is closed when the process is reaped, so
// every waiter sees it, and the first stop does the work.
type process struct {
	name    string
	cmd     *exec.Cmd
	log     *os.File
	exit    chan struct{}
	waitErr error // set before exit is closed

	stopOnce sync.Once
	stopErr  error
}

// start runs bin with args in its own process group, its output in
// logDir/name.log.
func start(name, bin string, args []string, logDir string) (*process, error) {
	log, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, exit: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exit)
	}()
	live.add(p)
	return p, nil
}

// live are the processes started and not yet stopped. Each runs in its own
// process group, out of reach of the terminal's ^C: an interrupted harness
// stops them itself (stopAll), or a slowfs mount would outlive it.
var live = &registry{procs: map[*process]bool{}}

type registry struct {
	mu    sync.Mutex
	procs map[*process]bool
}

func (r *registry) add(p *process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[p] = true
}

func (r *registry) remove(p *process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.procs, p)
}

// stopAll stops every live process: exporters first, slowfs last, so that
// no reader keeps its mount busy.
func (r *registry) stopAll() {
	r.mu.Lock()
	var first, last []*process
	for p := range r.procs {
		if strings.HasPrefix(p.name, "slowfs") {
			last = append(last, p)
		} else {
			first = append(first, p)
		}
	}
	r.mu.Unlock()
	for _, p := range append(first, last...) {
		_ = p.stop(5 * time.Second)
	}
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports an exit that happened already, so a wait for readiness
// stops at once for a process that failed to start.
func (p *process) exited() error {
	select {
	case <-p.exit:
		return fmt.Errorf("%s exited: %v (see %s)", p.name, p.waitErr, p.log.Name())
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace. Every
// call returns the first call's result.
func (p *process) stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		defer live.remove(p)
		defer p.log.Close()
		p.stopErr = p.terminate(grace)
	})
	<-p.exit
	return p.stopErr
}

func (p *process) terminate(grace time.Duration) error {
	if err := p.exited(); err != nil {
		return err
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.exit:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exit
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed", p.name, grace)
	}
}

// freePort is a loopback TCP port nobody listens on now. The exporter
// binds it a moment later; another process could take it in between, and
// then waitHTTP fails with a clear error rather than measure a stranger.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls url until it answers 200, at most tries times.
func waitHTTP(p *process, url string, tries int) error {
	var last error
	for range tries {
		if err := p.exited(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			cancel()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("status %s", resp.Status)
		} else {
			cancel()
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready at %s after %d tries: %w", p.name, url, tries, last)
}

// waitPath polls until path exists (a FUSE mount answering), at most tries
// times.
func waitPath(p *process, path string, tries int) error {
	for range tries {
		if err := p.exited(); err != nil {
			return err
		}
		if _, err := os.Stat(path); err == nil {
			return nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s did not appear after %d tries", p.name, path, tries)
}

// exporterSpec is how to run one exporter on a host tree.
type exporterSpec struct {
	name string
	bin  string
	args func(root string, port int) []string
}

// rdmaDoctor runs rdma_doctor with its default collectors, or with the
// infiniband collector alone (--collector.disable-defaults, as
// node_exporter is run), so that a collector added to the defaults never
// slips into the infiniband-only comparison.
func rdmaDoctor(bin string, infinibandOnly bool) exporterSpec {
	name := "rdma_doctor-default"
	if infinibandOnly {
		name = "rdma_doctor-infiniband"
	}
	return exporterSpec{name: name, bin: bin, args: func(root string, port int) []string {
		a := []string{"--path.rootfs=" + root, "--web.listen-address=127.0.0.1:" + strconv.Itoa(port), "--log.level=error"}
		if infinibandOnly {
			a = append(a, "--collector.disable-defaults", "--collector.infiniband")
		}
		return a
	}}
}

func nodeExporter(bin string) exporterSpec {
	return exporterSpec{name: "node_exporter", bin: bin, args: func(root string, port int) []string {
		return []string{"--collector.disable-defaults", "--collector.infiniband",
			"--path.sysfs=" + root + "/sys", "--path.procfs=" + root + "/proc",
			"--web.listen-address=127.0.0.1:" + strconv.Itoa(port), "--log.level=error"}
	}}
}

// yuukiExporter runs yuuki/rdma_exporter as its users do, with its
// defaults: its sysfs collector, and its ethtool and RDMA netlink ones,
// which find nothing of a fixture tree on this machine (the netdevs are
// not here, nor is NETLINK_RDMA) and say so once in its log.
func yuukiExporter(bin string) exporterSpec {
	return exporterSpec{name: "yuuki_rdma_exporter", bin: bin, args: func(root string, port int) []string {
		return []string{"-sysfs-root", root + "/sys", "-listen-address", "127.0.0.1:" + strconv.Itoa(port), "-log-level", "error"}
	}}
}

// running is a started exporter and its scrape target.
type running struct {
	proc   *process
	target *target
}

func (s exporterSpec) start(root, logDir string) (*running, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := start(s.name, s.bin, s.args(root, port), logDir)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	if err := waitHTTP(p, url, 300); err != nil {
		_ = p.stop(5 * time.Second)
		return nil, err
	}
	return &running{proc: p, target: newTarget(s.name, url, p.pid())}, nil
}
