// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package nstest gives tests two private network namespaces joined by veth
// pairs, so probes can be tested over a real link with a known delay
// (tc netem) or rate (tc tbf) without touching the host's own network:
// every address lives inside the test's namespaces, which vanish with the
// processes that hold them.
//
// Each namespace is held by an "unshare -n sleep" process; links are
// created straight into the two namespaces ("ip link add ... netns PID"),
// commands run in them through nsenter, and Go code in the test process
// reaches them with setns on a locked thread (Listen, Dial). This needs
// root (CAP_SYS_ADMIN and CAP_NET_ADMIN in the host's namespaces); without
// it the tests skip, and fail when CI is set.
package nstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoNetem means the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM).
var ErrNoNetem = errors.New("kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is off)")

// ErrNoTBF means the kernel has no tbf qdisc.
var ErrNoTBF = errors.New("kernel has no tbf qdisc (CONFIG_NET_SCH_TBF is off)")

// Require skips (or, with CI set, fails) a test that cannot build
// namespaces here.
func Require(t testing.TB) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range []string{"ip", "tc", "unshare", "nsenter", "sleep"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "network namespace test needs " + strings.Join(missing, ", ") +
		" (Debian: apt-get install iproute2 util-linux; run as root; .ci/run does)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// NS is one namespace.
type NS struct {
	Name   string
	holder *exec.Cmd
}

// Pid is the holder's process id; "ip ... netns PID" and nsenter -t use it.
func (n *NS) Pid() int { return n.holder.Process.Pid }

// Pair is two namespaces, A and B.
type Pair struct {
	A, B *NS
	t    testing.TB
}

// New creates two namespaces with loopback up. They are removed when the
// test ends.
func New(t testing.TB) *Pair {
	t.Helper()
	Require(t)
	p := &Pair{t: t}
	p.A, p.B = p.newNS("A"), p.newNS("B")
	return p
}

func (p *Pair) newNS(name string) *NS {
	t := p.t
	cmd := exec.Command("unshare", "--net", "--", "sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	n := &NS{Name: name, holder: cmd}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	// unshare execs sleep once the namespace exists: wait until the
	// holder's namespace differs from ours.
	self, _ := os.Readlink("/proc/self/ns/net")
	for i := 0; ; i++ {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/net")
		if err == nil && ns != self {
			break
		}
		if i > 500 {
			t.Fatalf("namespace %s did not appear", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.MustRun(t, "ip", "link", "set", "lo", "up")
	return n
}

// Link creates a veth pair, devA in A with cidrA and devB in B with cidrB
// (e.g. "10.199.0.1/30"), and brings both up.
func (p *Pair) Link(devA, cidrA, devB, cidrB string) {
	t := p.t
	t.Helper()
	out, err := exec.Command("ip", "link", "add", devA, "netns", strconv.Itoa(p.A.Pid()), "type", "veth",
		"peer", "name", devB, "netns", strconv.Itoa(p.B.Pid())).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link add %s/%s: %v\n%s", devA, devB, err, out)
	}
	p.A.MustRun(t, "ip", "addr", "add", cidrA, "dev", devA)
	p.B.MustRun(t, "ip", "addr", "add", cidrB, "dev", devB)
	p.A.MustRun(t, "ip", "link", "set", devA, "up")
	p.B.MustRun(t, "ip", "link", "set", devB, "up")
}

// Command runs name in the namespace (nsenter -n), in its own process
// group.
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(n.Pid()), "-n", "--", name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// Run runs a command in the namespace and returns its combined output.
func (n *NS) Run(name string, args ...string) (string, error) {
	out, err := n.Command(context.Background(), name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %v: %s", name, strings.Join(args, " "), n.Name, err, out)
	}
	return string(out), nil
}

// MustRun is Run that fails the test.
func (n *NS) MustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := n.Run(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Netem delays every packet leaving dev by d (tc qdisc netem delay) and,
// with bitsPerSecond > 0, limits its rate too.
func (n *NS) Netem(dev string, d time.Duration, bitsPerSecond int64) error {
	args := []string{"qdisc", "replace", "dev", dev, "root", "netem", "delay", strconv.FormatInt(d.Microseconds(), 10) + "us"}
	if bitsPerSecond > 0 {
		args = append(args, "rate", strconv.FormatInt(bitsPerSecond, 10)+"bit")
	}
	out, err := n.Run("tc", args...)
	if err != nil && strings.Contains(out, "qdisc kind is unknown") {
		return ErrNoNetem
	}
	return err
}

// Shape limits dev's egress to bitsPerSecond (tc qdisc tbf).
func (n *NS) Shape(dev string, bitsPerSecond int64) error {
	out, err := n.Run("tc", "qdisc", "replace", "dev", dev, "root", "tbf",
		"rate", strconv.FormatInt(bitsPerSecond, 10)+"bit", "burst", "64kb", "latency", "100ms")
	if err != nil && strings.Contains(out, "qdisc kind is unknown") {
		return ErrNoTBF
	}
	return err
}

// ClearQdisc removes dev's root qdisc.
func (n *NS) ClearQdisc(dev string) error {
	_, err := n.Run("tc", "qdisc", "del", "dev", dev, "root")
	return err
}

// Do runs fn on a thread that has entered the namespace. Sockets fn
// creates belong to the namespace and keep working from any thread
// afterwards. The thread goes back to this process's namespace before it
// is released.
func (n *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open("/proc/" + strconv.Itoa(n.Pid()) + "/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns into %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread is in the wrong namespace: let it die with
			// this goroutine (exit while locked) rather than reuse it.
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Listen opens a listener inside the namespace.
func (n *NS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Dial connects from inside the namespace.
func (n *NS) Dial(network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() (err error) {
		c, err = net.DialTimeout(network, addr, 5*time.Second)
		return err
	})
	return c, err
}
