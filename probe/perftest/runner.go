// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
)

// Defaults of a Runner.
const (
	// DefaultSetup is added to a run's expected duration for the deadline:
	// perftest spends about a second per side on its own setup (a sleep(1),
	// CPU clock sampling, the TCP exchange).
	DefaultSetup = 10 * time.Second
	// DefaultListenWait bounds the wait for a server to listen.
	DefaultListenWait = 5 * time.Second
	// OutputLimit caps what is kept of each stream: a real run prints a few
	// KiB; a process spewing garbage must not grow memory.
	OutputLimit = 1 << 20
	// waitDelay bounds how long Wait waits for the output pipes after the
	// process group is gone.
	waitDelay = 2 * time.Second
)

// Runner runs perftest processes.
type Runner struct {
	// Dir holds the perftest binaries; empty searches $PATH.
	Dir string
	// Proc is the procfs the runner reads net/tcp and net/tcp6 from, to
	// see when a server listens. nil, or a tree without those files, falls
	// back to waiting ListenWait.
	Proc hostfs.FS
	// Locks serialises runs per device; nil means the process-wide Locks.
	Locks *DeviceLocks
	// Setup is added to each run's expected length to make its deadline;
	// 0 means DefaultSetup.
	Setup time.Duration
	// ListenWait bounds the wait for a server to listen; 0 means
	// DefaultListenWait.
	ListenWait time.Duration
	// ServerGrace is how long a loopback server may take to finish after
	// its client; 0 means 3 s.
	ServerGrace time.Duration
	Logger      *slog.Logger
	// Reaper, when set, starts the perftest processes and kills what they
	// leave outside their process group (the server's, which is its
	// subreaper, must start every child through it).
	Reaper *subprocess.Reaper
	// cuda caches each binary's CUDA support (CUDA).
	cuda cudaCache
}

// Outcome is what one process did.
type Outcome struct {
	Side     string   `json:"side"`
	Path     string   `json:"path"`
	Args     []string `json:"args"`
	Stdout   []byte   `json:"-"`
	Stderr   []byte   `json:"-"`
	Exit     Exit     `json:"exit"`
	Wall     time.Duration
	CPU      time.Duration // user + system time of the process
	Report   *Report       `json:"-"`
	Err      error         `json:"-"`
	started  time.Time
	cmd      *exec.Cmd
	stdout   *capBuffer
	stderr   *capBuffer
	waitDone chan struct{}
	killed   bool
	mu       sync.Mutex
}

// Run is one test: the client's result and both processes.
type Run struct {
	Params Params
	// Report is the client's parsed output (nil on failure).
	Report *Report
	Client *Outcome
	// Server is nil for a client against a remote server.
	Server *Outcome
	// Err is the run's failure, an *Error.
	Err error
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// AcquireDevices holds devices in the runner's locks (see
// DeviceLocks.Acquire).
func (r *Runner) AcquireDevices(ctx context.Context, devices ...string) (release func(), err error) {
	return r.locks().Acquire(ctx, devices...)
}

// ListenTimeout is how long a started server may take to listen.
func (r *Runner) ListenTimeout() time.Duration { return r.listenWait() }

func (r *Runner) locks() *DeviceLocks {
	if r.Locks != nil {
		return r.Locks
	}
	return Locks
}

func (r *Runner) setup() time.Duration {
	if r.Setup > 0 {
		return r.Setup
	}
	return DefaultSetup
}

func (r *Runner) listenWait() time.Duration {
	if r.ListenWait > 0 {
		return r.ListenWait
	}
	return DefaultListenWait
}

func (r *Runner) serverGrace() time.Duration {
	if r.ServerGrace > 0 {
		return r.ServerGrace
	}
	return 3 * time.Second
}

// Deadline is how long a run of p may take in all before both sides are
// killed.
func (r *Runner) Deadline(p Params) time.Duration { return p.Expected() + r.setup() }

// Path finds the binary of t.
func (r *Runner) Path(t Test) (string, error) {
	if r.Dir != "" {
		p := filepath.Join(r.Dir, t.Binary())
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", &Error{Kind: NotInstalled, Detail: p + " is not an executable (install perftest, or fix probe.perftest_dir)", Status: -1}
		}
		return p, nil
	}
	p, err := exec.LookPath(t.Binary())
	if err != nil {
		return "", &Error{Kind: NotInstalled, Detail: t.Binary() + " not found in $PATH (install perftest)", Status: -1}
	}
	return p, nil
}

// Loopback runs server and client on this host: same device on both sides
// (the HCA loops internally: proves HCA, driver, PCIe, not the cable), or two
// devices or ports (traffic crosses the wire and the switch). server and
// client must agree on everything but device, port and GID index.
func (r *Runner) Loopback(ctx context.Context, server, client Params) *Run {
	run := &Run{Params: client}
	if err := sameOptions(server, client); err != nil {
		run.Err = err
		return run
	}
	release, err := r.locks().Acquire(ctx, server.Device, client.Device)
	if err != nil {
		run.Err = err
		return run
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, r.Deadline(client))
	defer cancel()

	if server.TCPPort == 0 {
		port, err := FreePort()
		if err != nil {
			run.Err = &Error{Kind: PortInUse, Detail: err.Error(), Status: -1}
			return run
		}
		server.TCPPort, client.TCPPort = port, port
		run.Params = client
	}
	srv, err := r.StartServer(ctx, server)
	if err != nil {
		run.Err = err
		return run
	}
	run.Server = srv.Outcome
	if err := srv.WaitListening(ctx, r.listenWait()); err != nil {
		// It exited before listening: its error is the run's.
		run.Err = err
		return run
	}
	run.Client = r.runClient(ctx, client, "localhost")
	// The server prints its copy of the report right after the client;
	// a server still waiting now (the client never reached it) is killed.
	grace, cancelGrace := context.WithTimeout(ctx, r.serverGrace())
	srvOut := srv.Wait(grace)
	cancelGrace()
	run.Report = run.Client.Report
	run.Err = rootCause(run.Client.Err, srvOut.Err)
	return run
}

// rootCause picks the error to report when the client failed: a server
// that could not open its device or port explains the client's refused
// connection or broken exchange.
func rootCause(client, server error) error {
	if client == nil {
		return nil
	}
	var ce, se *Error
	if server != nil && errors.As(client, &ce) && errors.As(server, &se) {
		switch ce.Kind {
		case ConnectFailed, ExchangeFailed, Timeout:
			switch se.Kind {
			case Timeout, ExchangeFailed, ConnectFailed:
			default:
				return server
			}
		}
	}
	return client
}

func sameOptions(a, b Params) error {
	a.Device, a.IBPort, a.GIDIndex = b.Device, b.IBPort, b.GIDIndex
	if a != b {
		return errors.New("perftest loopback: server and client options differ beyond device, port and GID index")
	}
	return nil
}

// Client runs the client side against a server at host (started by the
// peer's responder).
func (r *Runner) Client(ctx context.Context, p Params, host string) *Run {
	run := &Run{Params: p}
	release, err := r.locks().Acquire(ctx, p.Device)
	if err != nil {
		run.Err = err
		return run
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, r.Deadline(p))
	defer cancel()
	run.Client = r.runClient(ctx, p, host)
	run.Report, run.Err = run.Client.Report, run.Client.Err
	return run
}

func (r *Runner) runClient(ctx context.Context, p Params, host string) *Outcome {
	o := &Outcome{Side: "client"}
	args, err := p.Args(host)
	if err != nil {
		o.Err = err
		return o
	}
	path, err := r.Path(p.Test)
	if err != nil {
		o.Err = err
		return o
	}
	if err := r.start(ctx, o, path, args, p.env()); err != nil {
		o.Err = err
		return o
	}
	<-o.waitDone
	return o
}

// Server is a started perftest server.
type Server struct {
	*Outcome
	Params Params
	proc   hostfs.FS
	cancel context.CancelFunc
}

// StartServer starts the server side of p and returns at once. The caller
// must call Wait (which also kills it at the context's end). The device is
// not locked here: Loopback holds both devices, the responder locks its own.
func (r *Runner) StartServer(ctx context.Context, p Params) (*Server, error) {
	args, err := p.Args("")
	if err != nil {
		return nil, err
	}
	if p.TCPPort == 0 {
		return nil, errors.New("perftest server: a TCP port is required (two servers on the default port collide)")
	}
	path, err := r.Path(p.Test)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Server{Outcome: &Outcome{Side: "server"}, Params: p, proc: r.Proc, cancel: cancel}
	if err := r.start(ctx, s.Outcome, path, args, p.env()); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// WaitListening returns when the server listens on its TCP port, when max
// has passed (procfs unreadable: assume it does), or with the server's
// error when it exits first.
func (s *Server) WaitListening(ctx context.Context, max time.Duration) error {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, err := listening(s.proc, s.Params.TCPPort); err == nil && ok {
			return nil
		}
		select {
		case <-s.waitDone:
			if s.Err != nil {
				return s.Err
			}
			return &Error{Kind: Failed, Side: "server", Detail: "server exited before a client connected", Status: -1}
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			s.Kill()
			<-s.waitDone
			return s.Err
		case <-tick.C:
		}
	}
}

// Wait waits for the server to exit; when ctx ends first it kills the
// process group. Either way the process has been reaped when Wait returns.
func (s *Server) Wait(ctx context.Context) *Outcome {
	select {
	case <-s.waitDone:
	case <-ctx.Done():
		s.Kill()
		<-s.waitDone
	}
	s.cancel()
	return s.Outcome
}

// Kill kills the process group now.
func (o *Outcome) Kill() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil || o.cmd.Process == nil {
		return
	}
	select {
	case <-o.waitDone:
		return
	default:
	}
	o.killed = true
	_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
}

// Done is closed when the process has been reaped and its output parsed.
func (o *Outcome) Done() <-chan struct{} { return o.waitDone }

// workDirPrefix begins the name of each run's work directory, followed by
// the pid of the rdma_doctor that made it, so that a later start can tell
// the directories of a killed process from those of a running one.
const workDirPrefix = "rdma_doctor-perftest-"

// RemoveStaleWorkDirs removes the run directories in the temporary
// directory that a killed rdma_doctor left behind: those whose pid no longer
// runs. It returns how many it removed; errors are not fatal to a probe.
func RemoveStaleWorkDirs() (int, error) {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), workDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue // not ours to judge, or ours
		}
		if _, err := os.Stat("/proc/" + pidText); err == nil {
			continue // its process still runs
		}
		if err := os.RemoveAll(filepath.Join(tmp, e.Name())); err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// start execs path in its own process group, with the minimal environment
// plus env. A goroutine reaps it, kills
// whatever is left of its group, and interprets its output; waitDone is
// closed after that.
func (r *Runner) start(ctx context.Context, o *Outcome, path string, args, env []string) error {
	dir, err := os.MkdirTemp("", workDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return fmt.Errorf("perftest %s: work directory: %w", o.Side, err)
	}
	o.Path, o.Args = path, args
	o.stdout, o.stderr = &capBuffer{limit: OutputLimit}, &capBuffer{limit: OutputLimit}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir // --out_json and core files land here, not in our cwd
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LANG=C", "LC_ALL=C"}, env...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = o.stdout, o.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If rdma_doctor dies, its perftest processes die with it
		// instead of holding a device and a port.
		Pdeathsig: syscall.SIGKILL,
	}
	// Output pipes stay open while anything in the group lives; the group
	// is killed before Wait, and WaitDelay is the backstop.
	cmd.WaitDelay = waitDelay
	o.cmd = cmd
	o.waitDone = make(chan struct{})
	o.started = time.Now()
	// Pdeathsig fires when the thread that forked the child exits, not the
	// process; Go may end a thread whose goroutine exits while locked to
	// it. The reaper goroutine therefore starts the child from a thread it
	// holds until the child has been reaped.
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.Reaper.Start(cmd); err != nil {
			started <- err
			return
		}
		started <- nil
		r.reap(ctx, o, cmd, dir, exited)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		close(o.waitDone)
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, fs.ErrNotExist) {
			return &Error{Kind: NotInstalled, Side: o.Side, Detail: err.Error(), Status: -1}
		}
		return fmt.Errorf("perftest %s: %w", o.Side, err)
	}
	r.logger().Debug("perftest started", "side", o.Side, "pid", cmd.Process.Pid, "cmd", path, "args", strings.Join(args, " "))
	go func() {
		select {
		case <-ctx.Done():
			o.Kill()
		case <-exited:
		}
	}()
	return nil
}

// reap waits for the child, kills what is left of its group, and
// interprets its output; o.waitDone is closed after that.
func (r *Runner) reap(ctx context.Context, o *Outcome, cmd *exec.Cmd, dir string, exited chan struct{}) {
	defer close(o.waitDone)
	defer os.RemoveAll(dir)
	werr := cmd.Wait()
	close(exited)
	// The leader is gone; anything it left in its group goes too, and
	// with a reaper what left the group.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	r.Reaper.Finish(cmd.Process.Pid)
	o.Wall = time.Since(o.started)
	o.Stdout, o.Stderr = o.stdout.Bytes(), o.stderr.Bytes()
	o.mu.Lock()
	killed := o.killed
	o.mu.Unlock()
	o.Exit = exitOf(cmd.ProcessState, werr, killed)
	if cmd.ProcessState != nil {
		o.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	o.Report, o.Err = Interpret(o.Stdout, o.Stderr, o.Exit)
	var e *Error
	if errors.As(o.Err, &e) {
		e.Side = o.Side
		if killed && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			e.Detail = "cancelled"
		}
	}
	r.logger().Debug("perftest finished", "side", o.Side, "pid", cmd.Process.Pid, "exit", o.Exit.Code,
		"signal", o.Exit.Signal, "wall", o.Wall, "err", o.Err)
}

func exitOf(ps *os.ProcessState, werr error, killed bool) Exit {
	e := Exit{Killed: killed}
	if ps == nil {
		e.Code = -1
		if werr != nil {
			e.Signal = werr.Error()
		}
		return e
	}
	e.Code = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal().String()
	}
	return e
}

// capBuffer keeps the first limit bytes written and drops the rest, still
// reporting success so the copying goroutine drains the pipe.
type capBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	limit   int
	dropped int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - c.b.Len()
	if room < len(p) {
		if room > 0 {
			c.b.Write(p[:room])
		}
		c.dropped += len(p) - max(room, 0)
		return len(p), nil
	}
	return c.b.Write(p)
}

func (c *capBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.b.Bytes())
}

// FreePort asks the kernel for a free TCP port. Another process may take
// it before perftest binds it; the server then fails with PortInUse and the
// next run picks another.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("free TCP port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// listening reports whether a socket listens on port, from net/tcp and
// net/tcp6 (state 0A is LISTEN). perftest prints nothing a pipe would
// deliver before the client connects (stdout is block-buffered), and
// dialling the port would use up its single accept(), so procfs is the only
// way to know.
func listening(proc hostfs.FS, port int) (bool, error) {
	if proc == nil {
		return false, errors.New("no procfs")
	}
	want := fmt.Sprintf(":%04X", port)
	var lastErr error
	read := 0
	for _, f := range []string{"net/tcp", "net/tcp6"} {
		b, err := proc.ReadFile(f)
		if err != nil {
			lastErr = err
			continue
		}
		read++
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 3 && f[3] == "0A" && strings.HasSuffix(f[1], want) {
				return true, nil
			}
		}
	}
	if read == 0 {
		return false, lastErr
	}
	return false, nil
}

// Version runs "<test> -V" and returns the internal version ("6.06").
// perftest exits 1 after printing it.
func (r *Runner) Version(ctx context.Context, t Test) (string, error) {
	path, err := r.Path(t)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o := &Outcome{Side: "version"}
	if err := r.start(ctx, o, path, []string{"-V"}, nil); err != nil {
		return "", err
	}
	<-o.waitDone
	return ParseVersion(o.Stdout)
}

// String describes an outcome for logs.
func (o *Outcome) String() string {
	if o == nil {
		return "<none>"
	}
	return o.Side + " " + filepath.Base(o.Path) + " " + strings.Join(o.Args, " ") + " exit " + strconv.Itoa(o.Exit.Code)
}
