// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// TestReadTakesTheSample: Read reads every source of the host before it
// returns, so no check reads after the sample's deadline (the CLI cancels
// it before evaluating), and every call of a source returns the same
// reading (the host's slow sources come from a cache that may refresh).
func TestReadTakesTheSample(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	// numa-remote: devices, IRQs, tuning, netdevs and GPUs to read; no
	// devices are expected beyond those present, so the bus stays unread.
	s := (&diagnose.Reader{Host: diagnosetest.HostOf(filepath.Join(diagnosetest.Fixtures, "numa-remote"))}).Read(ctx)
	cancel()
	h := s.Host
	for name, read := range map[string]func() (any, error){
		"class":        func() (any, error) { return h.Class() },
		"placement":    func() (any, error) { return h.Placement() },
		"topology":     func() (any, error) { return h.Topology(), nil },
		"tuning":       func() (any, error) { return h.Tuning() },
		"netdevs":      func() (any, error) { return h.Netdevs() },
		"opensm":       func() (any, error) { return h.OpenSM() },
		"gpus":         func() (any, error) { return h.GPUs() },
		"roce":         func() (any, error) { return h.RoCE() },
		"devlink":      func() (any, error) { return h.Devlink() },
		"temperatures": func() (any, error) { return h.Temperatures() },
		"kernel log":   func() (any, error) { l, _ := h.KernelLog(); return l, nil },
	} {
		first, err := read()
		if errors.Is(err, context.Canceled) {
			t.Errorf("%s was read after Read returned: %v", name, err)
		}
		if again, _ := read(); again != first {
			t.Errorf("%s: a second call read again (%p, then %p)", name, first, again)
		}
	}
	if c, err := h.Class(); c == nil || len(c.Devices) == 0 {
		t.Fatalf("numa-remote read no devices: %v", err)
	}
	if bus, err := h.Bus(); bus != nil || err != nil {
		t.Errorf("a host with its devices walked the PCI bus: %v, %v", bus, err)
	}
}

// A reading has sminfo's round where the host runs sminfo: without a
// loop, one round per sample (the CLI), the same result however often a
// check asks; none where it does not (--no-collector.sm), and no fabric
// sweep where no loop runs.
func TestReadSMThroughHost(t *testing.T) {
	ctx := t.Context()
	p, _ := hostfs.Paths{Rootfs: filepath.Join(diagnosetest.Fixtures, "sm-opensm")}.Resolve()
	now := time.Unix(1_000_000, 0)
	h := host.New(host.Options{Paths: p, SM: &host.SMOptions{SminfoPath: "/nonexistent"}, Fabric: &host.FabricOptions{Counters: true},
		Now: func() time.Time { return now }})
	r := &diagnose.Reader{Host: h}
	s := r.Read(ctx)
	st := s.SMStatus()
	if st == nil || st.Rounds != 1 || s.SMStatus() != st {
		t.Fatalf("first sample: %+v, want its own round, kept", st)
	}
	if r := s.Unavailable(diagnose.SourceSM); !strings.Contains(r, "sminfo cannot run") {
		t.Errorf("unavailable(sm) = %q, want why sminfo cannot run (no umad on the fixture)", r)
	}
	now = now.Add(time.Minute)
	if st := r.Read(ctx).SMStatus(); st.Rounds != 2 {
		t.Errorf("second sample read round %d, want its own", st.Rounds)
	}
	if sw := s.SweepStatus(); sw != nil {
		t.Errorf("a fabric sweep without a loop: %+v", sw)
	}
	h = host.New(host.Options{Paths: p})
	if st := (&diagnose.Reader{Host: h}).Read(ctx).SMStatus(); st != nil {
		t.Errorf("sminfo read without Options.SM: %+v", st)
	}
}
