// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package ibsimtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Umad2sim is the path of ibsim's client library (Debian libumad2sim0, a
// dependency of ibsim-utils).
func Umad2sim() (string, error) {
	for _, pat := range []string{"/usr/lib/*/umad2sim/libumad2sim.so", "/usr/lib*/umad2sim/libumad2sim.so"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", errors.New("libumad2sim.so not installed (Debian: apt-get install ibsim-utils)")
}

// simCount numbers the simulators this process started.
var simCount atomic.Int64

// Fabric is a running simulator and opensm on it.
type Fabric struct {
	// Dir holds the topology file, opensm's files and the processes'
	// working directories (umad2sim writes a fake sysfs, sys-<pid>/, into
	// the working directory of each process it attaches).
	Dir string
	// Env is the environment of a client: IBSIM_SOCKNAME and LD_PRELOAD.
	// A static Go binary ignores the preload but passes it to its tools.
	Env []string
	// SubnetUp is how long opensm took from its start to SUBNET UP.
	SubnetUp time.Duration

	console *os.File
	// consoleMu makes Do one command at a time: a test may drive the
	// console from several goroutines.
	consoleMu sync.Mutex
	out       *buffer
	procs     []*Proc
	sim       *Proc
	sm        *Proc
	// setup bounds each wait, as Start's.
	setup  time.Duration
	smRuns int
}

// Start starts ibsim on netFile (ibnetdiscover's format) in dir, with
// simArgs before it (Shape.SimArgs for a large fabric), and opensm on it,
// and returns once opensm has logged SUBNET UP. setup bounds each wait (a
// 4000-host fabric takes minutes for ibsim to come up on a small
// machine). Close stops both.
func Start(dir, netFile string, setup time.Duration, simArgs ...string) (_ *Fabric, err error) {
	lib, err := Umad2sim()
	if err != nil {
		return nil, err
	}
	ibsim, err := exec.LookPath("ibsim")
	if err != nil {
		return nil, fmt.Errorf("%w (Debian: apt-get install ibsim-utils)", err)
	}
	opensm, err := exec.LookPath("opensm")
	if err != nil {
		return nil, fmt.Errorf("%w (Debian: apt-get install opensm)", err)
	}
	// A simulator of our own: concurrent runs and a developer's ibsim do
	// not meet.
	// A test's temporary directories all end in 001, 002...: the
	// number of simulators this process started keeps parallel tests'
	// simulators apart.
	sock := "IBSIM_SOCKNAME=rdma_doctor-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(simCount.Add(1), 10) + "-" + filepath.Base(dir)
	f := &Fabric{Dir: dir, out: &buffer{}, Env: append(os.Environ(), sock, "LD_PRELOAD="+lib), setup: setup}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()

	// The console reads stdin only, and spins on EOF: it gets a pipe
	// whose write end we hold until Close.
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	f.console = wr
	sim := exec.Command(ibsim, append(append([]string{"-s"}, simArgs...), netFile)...)
	sim.Env, sim.Stdin, sim.Stdout, sim.Stderr = append(os.Environ(), sock), rd, f.out, f.out
	p, err := StartProc(sim, filepath.Join(dir, "ibsim"))
	rd.Close()
	if err != nil {
		return nil, err
	}
	f.procs = append(f.procs, p)
	f.sim = p
	if err := f.waitOut("sim>", 1, setup); err != nil {
		return nil, err
	}

	start := time.Now()
	if err := f.startSM(opensm); err != nil {
		return nil, err
	}
	f.SubnetUp = time.Since(start)
	return f, nil
}

// startSM starts opensm with args on the simulator, in Dir/opensm (its
// cache, guid2lid included, stays there across restarts), and returns
// once it has logged SUBNET UP.
func (f *Fabric) startSM(opensm string, args ...string) error {
	osmDir := filepath.Join(f.Dir, "opensm")
	if err := os.MkdirAll(osmDir, 0o755); err != nil {
		return err
	}
	f.smRuns++
	log := filepath.Join(osmDir, "opensm.log")
	if f.smRuns > 1 {
		log = filepath.Join(osmDir, fmt.Sprintf("opensm-%d.log", f.smRuns))
	}
	// -d2: without it SUBNET UP never reaches the log.
	osm := exec.Command(opensm, append([]string{"-d2", "-f", log}, args...)...)
	osm.Env = append(append([]string{}, f.Env...), "OSM_CACHE_DIR="+osmDir, "OSM_TMP_DIR="+osmDir)
	osmOut := &buffer{}
	osm.Stdout, osm.Stderr = osmOut, osmOut
	p, err := StartProc(osm, osmDir)
	if err != nil {
		return err
	}
	f.procs = append(f.procs, p)
	f.sm = p
	for deadline := time.Now().Add(f.setup); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(log)
		if bytes.Contains(b, []byte("SUBNET UP")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("opensm: no SUBNET UP in %v\n%s\n%s\nibsim:\n%s", f.setup, osmOut, Tail(string(b), 2000), Tail(f.out.String(), 2000))
		}
	}
}

// RestartSM stops opensm, lets edit rewrite its guid2lid file (the LIDs
// it will hand out: nil keeps them), and starts it again with args (for
// example "-l", "2": another LMC), as an operator restarting the SM
// would; it returns once the new opensm has logged SUBNET UP.
func (f *Fabric) RestartSM(edit func(guid2lid []byte) []byte, args ...string) error {
	opensm, err := exec.LookPath("opensm")
	if err != nil {
		return err
	}
	if f.sm != nil {
		if err := f.sm.Stop(); err != nil {
			return err
		}
	}
	if edit != nil {
		file := filepath.Join(f.Dir, "opensm", "guid2lid")
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if err := os.WriteFile(file, edit(b), 0o644); err != nil {
			return err
		}
	}
	return f.startSM(opensm, args...)
}

// Do runs a console command and waits for ibsim's next prompt; it returns
// ibsim's output to it.
func (f *Fabric) Do(cmd string, timeout time.Duration) (string, error) {
	f.consoleMu.Lock()
	defer f.consoleMu.Unlock()
	before := f.out.String()
	if _, err := fmt.Fprintln(f.console, cmd); err != nil {
		return "", err
	}
	if err := f.waitOut("sim>", strings.Count(before, "sim>")+1, timeout); err != nil {
		return "", err
	}
	return strings.TrimPrefix(f.out.String(), before), nil
}

// waitOut waits until ibsim's output holds want at least n times; it
// gives up when ibsim exits (it panics on a fabric beyond its tables).
func (f *Fabric) waitOut(want string, n int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); strings.Count(f.out.String(), want) < n; time.Sleep(20 * time.Millisecond) {
		select {
		case <-f.sim.Exited():
			return fmt.Errorf("ibsim exited: %v:\n%s", f.sim.Cmd.ProcessState, Tail(f.out.String(), 2000))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ibsim: no %q (x%d) in %v:\n%s", want, n, timeout, Tail(f.out.String(), 2000))
		}
	}
	return nil
}

// StopSM kills opensm, as a subnet manager that crashed: the fabric
// keeps its LIDs and routes, nothing answers SubnetManager queries.
func (f *Fabric) StopSM() error {
	if f.sm == nil {
		return errors.New("opensm is not running")
	}
	err := f.sm.Stop()
	f.sm = nil
	return err
}

// Close stops opensm and ibsim (their whole process groups).
func (f *Fabric) Close() {
	for i := len(f.procs) - 1; i >= 0; i-- {
		_ = f.procs[i].Stop()
	}
	f.procs = nil
	if f.console != nil {
		f.console.Close()
		f.console = nil
	}
}

// Proc is a process started in a process group of its own.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
}

// StartProc starts cmd in a process group of its own, in dir (created)
// unless cmd.Dir is set.
func StartProc(cmd *exec.Cmd, dir string) (*Proc, error) {
	if cmd.Dir == "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		cmd.Dir = dir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Stop kills the process group and waits for the process.
func (p *Proc) Stop() error {
	err := syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return err
}

// Tail is the last n bytes of s: the end of a tool's output, where its
// error is, for an error message (the e2e tests and fabricbench too).
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// buffer is a bytes.Buffer safe for a process's writes and our reads.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
