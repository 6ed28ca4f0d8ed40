// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func intp(i int) *int { return &i }

// TestRunnerReplaysEverySample runs a loopback whose client replays each
// recorded output (stdout as recorded, or stderr and exit status 1 for the
// error recordings), and checks the runner's result is what the parser
// makes of the file.
func TestRunnerReplaysEverySample(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".txt") || strings.HasPrefix(name, "out_json") || strings.HasPrefix(name, "cudahelp_") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			test := WriteBW
			if strings.Contains(name, "_lat") {
				test = WriteLat
			}
			client := behaviour{StdoutFile: name, Protocol: true}
			failing := strings.HasPrefix(name, "error_") || strings.Contains(name, "_help_")
			if strings.HasPrefix(name, "error_") {
				client = behaviour{StderrFile: name, Exit: 1, Protocol: true}
			} else if failing {
				client.Exit = 1
			}
			d := installFake(t, map[Test]sides{test: {Server: behaviour{StdoutFile: name, Protocol: true}, Client: client}})
			run := d.runner().Loopback(context.Background(), Params{Test: test, Device: "mlx5_0"}, Params{Test: test, Device: "mlx5_0"})
			want, perr := Parse(sample(t, name))
			if failing {
				var pe *Error
				if !errors.As(run.Err, &pe) || pe.Side != "client" {
					t.Fatalf("want a client error, got %v", run.Err)
				}
				wantKind := Classify(sample(t, name), sample(t, name)).Kind
				if pe.Kind != wantKind {
					t.Errorf("kind %s, want %s", pe.Kind, wantKind)
				}
				return
			}
			if perr != nil || run.Err != nil {
				t.Fatalf("parse %v, run %v", perr, run.Err)
			}
			if !reflect.DeepEqual(run.Report, want) {
				t.Errorf("runner report differs from parsing the file")
			}
			if run.Server == nil || run.Server.Err != nil || run.Server.Side != "server" {
				t.Errorf("server outcome %+v", run.Server)
			}
		})
	}
}

// TestRunnerArgv: the exact argument vectors, no shell, the same options on
// both sides, a minimal environment, only stdin/stdout/stderr inherited,
// each process its own group leader.
func TestRunnerArgv(t *testing.T) {
	d := installFake(t, map[Test]sides{WriteBW: {
		Server: behaviour{StdoutFile: "ib_write_bw_report_gbits_ib_v25.10plus.txt", Protocol: true},
		Client: behaviour{StdoutFile: "ib_write_bw_report_gbits_ib_v25.10plus.txt", Protocol: true},
	}})
	r := d.runner()
	before := openFDs(t)
	srv := Params{Test: WriteBW, Device: "mlx5_0", IBPort: 1, GIDIndex: intp(3), Size: 65536, Duration: 5 * time.Second, TCPPort: 0}
	cli := srv
	cli.Device, cli.IBPort, cli.GIDIndex = "mlx5_1", 2, nil
	run := r.Loopback(context.Background(), srv, cli)
	if run.Err != nil {
		t.Fatalf("%v\nclient stderr: %s", run.Err, run.Client.Stderr)
	}
	port := strconv.Itoa(run.Params.TCPPort)
	if run.Params.TCPPort == 0 {
		t.Fatal("no TCP port chosen")
	}
	calls := d.calls(t)
	if len(calls) != 2 {
		t.Fatalf("%d calls", len(calls))
	}
	want := map[string][]string{
		"server": {"-F", "--report_gbits", "-d", "mlx5_0", "-i", "1", "-x", "3", "-s", "65536", "-D", "5", "-p", port},
		"client": {"-F", "--report_gbits", "-d", "mlx5_1", "-i", "2", "-s", "65536", "-D", "5", "-p", port, "localhost"},
	}
	outside := inheritedFromOutside(t)
	for _, c := range calls {
		if !reflect.DeepEqual(c.Args, want[c.Side]) {
			t.Errorf("%s argv %q, want %q", c.Side, c.Args, want[c.Side])
		}
		if c.Name != "ib_write_bw" {
			t.Errorf("ran %s", c.Name)
		}
		if c.Pgid != c.Pid {
			t.Errorf("%s: pgid %d, pid %d: not its own process group", c.Side, c.Pgid, c.Pid)
		}
		for _, env := range c.Env {
			k, _, _ := strings.Cut(env, "=")
			if k != "PATH" && k != "LANG" && k != "LC_ALL" {
				t.Errorf("%s inherited %s", c.Side, env)
			}
		}
		for _, fd := range c.FDs {
			n, target, _ := strings.Cut(fd, "->")
			// The fake's own Go runtime opens cgroup files, an epoll
			// instance and the directory it lists.
			if n == "0" || n == "1" || n == "2" || outside[fd] || target == "" ||
				strings.HasPrefix(target, "anon_inode:") || strings.HasPrefix(target, "/proc/") || strings.HasPrefix(target, "/sys/fs/cgroup/") {
				continue
			}
			t.Errorf("%s inherited fd %s", c.Side, fd)
		}
	}
	if run.Client.CPU < 0 || run.Client.Wall <= 0 {
		t.Errorf("client times %v %v", run.Client.CPU, run.Client.Wall)
	}
	if after := openFDs(t); after != before {
		t.Errorf("open fds %d before, %d after: leaked", before, after)
	}
	if c := children(t); len(c) != 0 {
		t.Errorf("children left: %v", c)
	}
}

// TestRunnerFailures: hang, crash, garbage and a server that dies; each
// ends in its kind, with every process (and a hung grandchild) gone.
func TestRunnerFailures(t *testing.T) {
	good := behaviour{StdoutFile: "ib_write_lat_rdma_cm_roce_v4.4-24.07.txt", Protocol: true}
	for _, tc := range []struct {
		name           string
		server, client behaviour
		kind           ErrorKind
		side           string
		grandchild     bool
	}{
		{"client hangs", behaviour{Mode: "hang"}, behaviour{Mode: "hang"}, Timeout, "client", false},
		{"client hangs with a child", behaviour{Mode: "hang"}, behaviour{Mode: "hang-child"}, Timeout, "client", true},
		{"client crashes", good, behaviour{Stdout: "half a header\n", Mode: "crash"}, Crashed, "client", false},
		{"client prints garbage", good, behaviour{Mode: "garbage", Bytes: 3 * OutputLimit}, BadOutput, "client", false},
		{"client exits 0 with nothing", good, behaviour{}, BadOutput, "client", false},
		{"server has no device", behaviour{StderrFile: "error_port_down_lsgunth_perftest_issue1.txt", Exit: 1}, good, PortDown, "server", false},
		{"server crashes before listening", behaviour{Mode: "crash"}, good, Crashed, "server", false},
		{"client cannot connect, server says why", behaviour{Stderr: " Port number 1 state is Down\n", Exit: 1, DelayMS: 1500}, behaviour{Protocol: true}, PortDown, "server", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := installFake(t, map[Test]sides{WriteLat: {Server: tc.server, Client: tc.client}})
			before := openFDs(t)
			p := Params{Test: WriteLat, Device: "mlx5_0", Iterations: 1000}
			run := d.runner().Loopback(context.Background(), p, p)
			var e *Error
			if !errors.As(run.Err, &e) || e.Kind != tc.kind || e.Side != tc.side {
				t.Fatalf("got %v (%#v), want %s from the %s", run.Err, e, tc.kind, tc.side)
			}
			if run.Report != nil {
				t.Errorf("a failed run has a report")
			}
			for _, c := range d.calls(t) {
				if !waitGone(c.Pid) {
					t.Errorf("%s pid %d still running", c.Side, c.Pid)
				}
			}
			if tc.grandchild {
				b, err := os.ReadFile(filepath.Join(string(d.Dir), "child.pid"))
				if err != nil {
					t.Fatal(err)
				}
				pid, _ := strconv.Atoi(string(b))
				if !waitGone(pid) {
					t.Errorf("grandchild %d survived the process-group kill", pid)
					_ = syscallKill(pid)
				}
			}
			if run.Client != nil && len(run.Client.Stdout) > OutputLimit {
				t.Errorf("kept %d bytes of stdout", len(run.Client.Stdout))
			}
			if c := children(t); len(c) != 0 {
				t.Errorf("children left (zombies?): %v", c)
			}
			if after := openFDs(t); after != before {
				t.Errorf("open fds %d before, %d after", before, after)
			}
		})
	}
}

func TestRunnerCancel(t *testing.T) {
	d := installFake(t, map[Test]sides{WriteBW: {Server: behaviour{Mode: "hang"}, Client: behaviour{Mode: "hang"}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Run)
	p := Params{Test: WriteBW, Device: "mlx5_0", Duration: 60 * time.Second}
	go func() { done <- d.runner().Loopback(ctx, p, p) }()
	// Cancel once both processes exist.
	for len(d.calls(t)) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	run := <-done
	if !errors.Is(run.Err, Timeout) {
		t.Errorf("cancelled run: %v", run.Err)
	}
	for _, c := range d.calls(t) {
		if !waitGone(c.Pid) {
			t.Errorf("pid %d survived", c.Pid)
		}
	}
}

// TestRunnerBadInput: nothing starts.
func TestRunnerBadInput(t *testing.T) {
	d := installFake(t, map[Test]sides{WriteBW: {}})
	r := d.runner()
	ctx := context.Background()
	for name, run := range map[string]*Run{
		"unknown test":      r.Loopback(ctx, Params{Test: "ib_fast_bw"}, Params{Test: "ib_fast_bw"}),
		"size":              r.Loopback(ctx, Params{Test: WriteBW, Size: MaxSize + 1}, Params{Test: WriteBW, Size: MaxSize + 1}),
		"options differ":    r.Loopback(ctx, Params{Test: WriteBW, Size: 2}, Params{Test: WriteBW, Size: 4}),
		"device":            r.Loopback(ctx, Params{Test: WriteBW, Device: "-d"}, Params{Test: WriteBW, Device: "-d"}),
		"peer not a host":   r.Client(ctx, Params{Test: WriteBW}, "bad host;rm"),
		"peer is an option": r.Client(ctx, Params{Test: WriteBW}, "--help"),
		"lat duration":      r.Client(ctx, Params{Test: SendLat, Duration: 10 * time.Second}, "10.0.0.1"),
	} {
		if run.Err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if c := d.calls(t); len(c) != 0 {
		t.Errorf("bad input started %d processes: %+v", len(c), c)
	}
	missing := &Runner{Dir: t.TempDir()}
	if run := missing.Client(ctx, Params{Test: WriteBW}, "10.0.0.1"); !errors.Is(run.Err, NotInstalled) {
		t.Errorf("missing binary: %v", run.Err)
	}
}

// TestRunnerDeviceBusy: a device held by another probe is not touched.
func TestRunnerDeviceBusy(t *testing.T) {
	d := installFake(t, map[Test]sides{WriteBW: {}})
	r := d.runner()
	release, err := r.Locks.Acquire(context.Background(), "mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p := Params{Test: WriteBW, Device: "mlx5_0"}
	if run := r.Loopback(ctx, p, p); !errors.Is(run.Err, Busy) {
		t.Errorf("busy device: %v", run.Err)
	}
	if c := d.calls(t); len(c) != 0 {
		t.Errorf("started %d processes on a busy device", len(c))
	}
}

func TestDeviceLocks(t *testing.T) {
	l := &DeviceLocks{}
	ctx := context.Background()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	relA, err := l.Acquire(ctx, "mlx5_0", "mlx5_1", "mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(short(), "mlx5_1"); !errors.Is(err, Busy) {
		t.Errorf("second holder of mlx5_1: %v", err)
	}
	if _, err := l.Acquire(short(), anyDevice); !errors.Is(err, Busy) {
		t.Errorf("'any device' while mlx5_0 is held: %v", err)
	}
	relB, err := l.Acquire(short(), "mlx5_2")
	if err != nil {
		t.Fatalf("independent device: %v", err)
	}
	relB()
	got := make(chan error)
	go func() {
		rel, err := l.Acquire(ctx, "mlx5_0")
		if err == nil {
			rel()
		}
		got <- err
	}()
	relA()
	relA() // idempotent
	if err := <-got; err != nil {
		t.Errorf("waiter after release: %v", err)
	}
}

// TestRealPerftestNoDevice runs the real Debian perftest binaries on this
// host, which has no RDMA device: each must end as NoDevice from the side
// that runs first, with nothing left running.
func TestRealPerftestNoDevice(t *testing.T) {
	if _, err := exec.LookPath("ib_write_bw"); err != nil {
		msg := "perftest not installed (Debian: apt-get install perftest; .ci/run does)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := os.Stat("/sys/class/infiniband"); err == nil {
		if entries, _ := os.ReadDir("/sys/class/infiniband"); len(entries) > 0 {
			t.Skip("this host has RDMA devices; the no-device path cannot be tested here")
		}
	}
	r := &Runner{Locks: &DeviceLocks{}, Setup: 5 * time.Second}
	ctx := context.Background()
	for _, test := range Tests {
		t.Run(string(test), func(t *testing.T) {
			p := Params{Test: test, Device: "mlx5_0"}
			run := r.Loopback(ctx, p, p)
			var e *Error
			if !errors.As(run.Err, &e) || (e.Kind != NoDevice && e.Kind != DeviceNotFound) || e.Side != "server" {
				t.Errorf("loopback: %v", run.Err)
			}
			if test == ReadBW && e != nil && e.ExitCode != 7 {
				t.Errorf("ib_read_bw exit %d, want 7 (recorded)", e.ExitCode)
			}
			run = r.Client(ctx, Params{Test: test}, "192.0.2.10")
			if !errors.Is(run.Err, NoDevice) {
				t.Errorf("client: %v", run.Err)
			}
		})
	}
	v, err := r.Version(ctx, WriteBW)
	if err != nil || v == "" {
		t.Errorf("version %q: %v", v, err)
	}
	if c := children(t); len(c) != 0 {
		t.Errorf("children left: %v", c)
	}
}

// TestMain lets the test binary act as a prober process for
// TestRunnerParentDies.
func TestMain(m *testing.M) {
	if dir := os.Getenv("RDMA_DOCTOR_RUNNER_HELPER"); dir != "" {
		r := &Runner{Dir: dir, Locks: &DeviceLocks{}, Setup: time.Hour, ListenWait: 100 * time.Millisecond}
		p := Params{Test: WriteBW, Device: "mlx5_0", Duration: 300 * time.Second}
		r.Loopback(context.Background(), p, p)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunnerParentDies: when rdma_doctor itself is killed (no chance to
// clean up), its perftest processes die with it (Pdeathsig) instead of
// holding the device and the port.
func TestRunnerParentDies(t *testing.T) {
	d := installFake(t, map[Test]sides{WriteBW: {Server: behaviour{Mode: "hang"}, Client: behaviour{Mode: "hang"}}})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(exe, "-test.run=^$")
	// The killed helper cannot remove its work directories: they go with
	// the test's own temporary directory.
	helper.Env = append(os.Environ(), "RDMA_DOCTOR_RUNNER_HELPER="+string(d.Dir), "TMPDIR="+t.TempDir())
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; len(d.calls(t)) < 2; i++ {
		if i > 1000 {
			_ = helper.Process.Kill()
			t.Fatal("the helper's perftest processes did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	for _, c := range d.calls(t) {
		if !waitGone(c.Pid) {
			t.Errorf("%s pid %d outlived its killed parent", c.Side, c.Pid)
			_ = syscallKill(c.Pid)
		}
	}
}

// TestRemoveStaleWorkDirs: the work directory of a process that is gone is
// removed, this process's and a running one's are kept, and a name that is
// not a work directory is left alone.
func TestRemoveStaleWorkDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	// A pid that does not run: above the kernel's pid_max ceiling (2^22).
	gone := filepath.Join(tmp, workDirPrefix+"4194305-123")
	ours := filepath.Join(tmp, workDirPrefix+strconv.Itoa(os.Getpid())+"-456")
	running := filepath.Join(tmp, workDirPrefix+"1-789") // init
	other := filepath.Join(tmp, workDirPrefix+"notapid")
	for _, d := range []string{gone, ours, running, other} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n, err := RemoveStaleWorkDirs()
	if err != nil || n != 1 {
		t.Fatalf("removed %d, err %v; want 1", n, err)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", gone, err)
	}
	for _, d := range []string{ours, running, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}
