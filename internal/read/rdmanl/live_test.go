// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// TestLiveKernel asks the running kernel. Without RDMA devices (CI) the
// device dump is empty or the socket family is missing (no ib_core); both
// are real answers and neither is an error.
func TestLiveKernel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := Read(ctx, Live{}, Options{Stats: true, Status: true, Resources: true, ProcessResources: true, QPCounters: true,
		ProcessName: func(uint32) (string, bool) { return "", false }})
	dev := s.Outcomes[QueryDevice]
	if len(dev) != 1 {
		t.Fatalf("device dump outcomes %v, want exactly one", dev)
	}
	switch {
	case dev[StatusOK] == 1:
		t.Logf("kernel has RDMA netlink, %d devices", len(s.Devices))
		if len(s.Devices) == 0 && (len(s.Stats) != 0 || s.Outcomes[QueryStatistic] != nil) {
			t.Errorf("no devices but statistics %v %v", s.Stats, s.Outcomes[QueryStatistic])
		}
		if len(s.Devices) == 0 && (s.Outcomes[QueryResourceObjects] != nil || s.Outcomes[QueryQPCounterMode] != nil ||
			len(s.ProcessResources) != 0 || len(s.QPCounterModes) != 0) {
			t.Errorf("no devices but per-object reads %v %v", s.Outcomes, s.ProcessResources)
		}
		if s.Outcomes[QueryResource][StatusOK] != 1 {
			t.Errorf("resource dump outcomes %v", s.Outcomes[QueryResource])
		}
	case dev[StatusNoNetlink] == 1:
		t.Logf("no NETLINK_RDMA on this kernel")
		if len(s.Outcomes) != 1 {
			t.Errorf("outcomes after no socket family: %v", s.Outcomes)
		}
	default:
		t.Fatalf("device dump outcomes %v, errors %v", dev, s.Errors)
	}
	for _, err := range s.Errors {
		t.Errorf("error: %v", err)
	}
}

// TestLiveCancelAbandons: a request whose context is cancelled from its
// own callback (what the object cap does) returns the context's error at
// once and hands keep nothing more: the socket is closed, so the kernel
// builds no more of the dump. RTM_GETLINK stands in for an nldev dump
// (every kernel has rtnetlink; these have no RDMA devices).
func TestLiveCancelAbandons(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := make([]byte, unix.SizeofIfInfomsg) // struct ifinfomsg, AF_UNSPEC: every link
	n := 0
	err := Live{}.Exec(ctx, unix.NETLINK_ROUTE, unix.RTM_GETLINK, unix.NLM_F_DUMP, body, func([]byte) bool {
		n++
		cancel()
		return false
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Errorf("err %v after %d messages, want context.Canceled after 1", err, n)
	}
	// The same request not cancelled ends cleanly.
	n = 0
	if err := (Live{}).Exec(context.Background(), unix.NETLINK_ROUTE, unix.RTM_GETLINK, unix.NLM_F_DUMP, body, func([]byte) bool { n++; return true }); err != nil || n == 0 {
		t.Errorf("uncancelled dump: %v, %d messages", err, n)
	}
}

// TestLiveDCBVeth sends the real DCB_CMD_IEEE_GET (RTM_GETDCB) for a veth
// the test creates in a private user and network namespace. veth has no
// dcbnl_ops, so dcb_doit answers EOPNOTSUPP: the "driver does not support
// DCB" outcome every non-DCB netdev gives (a VF, a bond, an upstream
// driver without DCB), classified unsupported, not an error. A name the
// kernel does not have is ENODEV from the same handler: no_device. What
// this cannot cover: a driver's DCB reply (no DCB-capable netdev here;
// the recorded replies in testdata cover the decoder). A kernel built
// without CONFIG_DCB has no RTM_GETDCB handler and answers EOPNOTSUPP to
// the unknown name too, failing the last assertion: that kernel is not
// the one this test describes.
func TestLiveDCBVeth(t *testing.T) {
	if !testenv.InChild(t.Name()) {
		testenv.RequireTool(t, "ip", "ip (iproute2) not installed")
		t.Log(testenv.InNamespaces(t, t.Name(), "-n"))
		return
	}
	testenv.Run(t, "ip", "link", "add", "rddcb0", "type", "veth", "peer", "name", "rddcb1")
	testenv.Run(t, "ip", "link", "set", "rddcb0", "up")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := ReadDCB(ctx, Live{}, "rddcb0")
	if d != nil || !errors.Is(err, unix.EOPNOTSUPP) || Classify(err) != StatusUnsupported {
		t.Errorf("veth: %+v, %v (%s); want EOPNOTSUPP, unsupported", d, err, Classify(err))
	}
	// A short name (IFNAMSIZ fits: a longer one is EINVAL from the
	// attribute policy, TestLiveDCBUnsupported) the kernel does not have.
	d, err = ReadDCB(ctx, Live{}, "rdnone0")
	if d != nil || !errors.Is(err, unix.ENODEV) || Classify(err) != StatusNoDevice {
		t.Errorf("unknown netdev: %+v, %v (%s); want ENODEV, no_device", d, err, Classify(err))
	}
}
