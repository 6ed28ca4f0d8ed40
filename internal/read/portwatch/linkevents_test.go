// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package portwatch

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// setLinkUp sets a link up or down as `ip link set NAME up|down` does:
// RTM_NEWLINK with IFF_UP in ifi_change and, for up, in ifi_flags.
func setLinkUp(name string, up bool) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return err
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	// struct ifinfomsg: family, pad, type, index, flags, change.
	msg := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(msg[4:], uint32(ifi.Index))
	if up {
		binary.NativeEndian.PutUint32(msg[8:], unix.IFF_UP)
	}
	binary.NativeEndian.PutUint32(msg[12:], unix.IFF_UP)
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_NEWLINK, Flags: netlink.Request | netlink.Acknowledge},
		Data:   msg,
	})
	return err
}

// inNewNetNS returns a function that runs f on one thread in a network
// namespace of its own, made on the first call; the thread is never
// returned to the runtime (it ends with its goroutine at the test's end).
func inNewNetNS(t *testing.T) func(f func() error) error {
	t.Helper()
	work := make(chan func() error)
	errs := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		err := unix.Unshare(unix.CLONE_NEWNET)
		errs <- err
		if err != nil {
			return
		}
		for f := range work {
			errs <- f()
		}
	}()
	if err := <-errs; err != nil {
		testenv.SkipOrFail(t, "a new network namespace needs root (CAP_SYS_ADMIN): "+err.Error())
	}
	t.Cleanup(func() { close(work) })
	return func(f func() error) error { work <- f; return <-errs }
}

// TestLinkEventsLive subscribes in a new network namespace of this
// machine's kernel and brings its loopback up, then down: each change is
// an event, and the channel closes when the context ends.
func TestLinkEventsLive(t *testing.T) {
	in := inNewNetNS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events <-chan struct{}
	if err := in(func() (err error) { events, err = LinkEvents(ctx); return err }); err != nil {
		t.Fatal(err)
	}
	wait := func(what string) {
		t.Helper()
		select {
		case _, ok := <-events:
			if !ok {
				t.Fatalf("%s: the channel closed", what)
			}
		case <-time.After(30 * time.Second): // a bound, not a measurement
			t.Fatalf("%s: no event", what)
		}
	}
	for _, up := range []bool{true, false} {
		err := in(func() error {
			return setLinkUp("lo", up)
		})
		if err != nil {
			t.Fatal(err)
		}
		if up {
			wait("lo set up")
		} else {
			wait("lo set down")
		}
	}
	cancel()
	for range events { // drained until closed; the test's timeout bounds it
	}
}
