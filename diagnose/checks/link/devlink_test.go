// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/devlink"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Versions from real devlink dev info outputs (ConnectX-7, 28.41.1000:
// Jiri Pirko, netdev 2025-03-20; the failed query 255.255.65535: commit
// 10dc35f6a443); 28.43.1014 stands for any image flashed after it.
func devlinkSnapshot() *diagnose.Reading {
	info := func(dev, running, stored string) *devlink.Info {
		return &devlink.Info{Handle: devlink.PCI(dev), Driver: "mlx5_core",
			Running: []devlink.Version{{Name: "fw.version", Value: running}},
			Stored:  []devlink.Version{{Name: "fw.version", Value: stored}}}
	}
	rep := func(name string, st devlink.State, errs uint64) devlink.Reporter {
		return devlink.Reporter{Name: name, State: sysattr.Some(st), Errors: sysattr.Some(errs), Recovers: sysattr.Some[uint64](0)}
	}
	return &diagnose.Reading{Host: &diagnosetest.Host{DevlinkValue: &host.Devlink{Devices: []host.DevlinkDevice{
		{Name: "mlx5_0", PCI: "0000:08:00.0", Info: info("0000:08:00.0", "28.41.1000", "28.41.1000"),
			Reporters: []devlink.Reporter{rep("fw", devlink.StateHealthy, 0), rep("fw_fatal", devlink.StateHealthy, 0)}},
		{Name: "mlx5_1", PCI: "0000:08:00.1", Info: info("0000:08:00.1", "28.41.1000", "28.43.1014"),
			Reporters: []devlink.Reporter{rep("tx", devlink.StateError, 3)}},
		{Name: "mlx5_2", PCI: "0000:00:06.0", Info: info("0000:00:06.0", "22.41.0188", "255.255.65535"),
			Reporters: []devlink.Reporter{rep("fw", devlink.StateError, 7), rep("fw_fatal", devlink.StateError, 1)}},
		{Name: "rxe0"},
	}}}}
}

func TestFirmwarePending(t *testing.T) {
	fs, err := checkFirmwarePending(devlinkSnapshot(), nil, &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		sev     diagnose.Severity
		unknown bool
		remedy  string
	}{{diagnose.Pass, false, ""}, {diagnose.Warn, false, "mlxfwreset -d 0000:08:00.1 reset"}, {diagnose.Warn, true, "mlxfwmanager --query -d 0000:00:06.0"}, {diagnose.Skip, false, ""}}
	if len(fs) != len(want) {
		t.Fatalf("findings %+v", fs)
	}
	for i, w := range want {
		if fs[i].Severity != w.sev || fs[i].Unknown != w.unknown || !strings.Contains(fs[i].Remedy, w.remedy) {
			t.Errorf("%s: %s unknown=%v remedy %q; want %s %v %q", fs[i].Target, fs[i].Severity, fs[i].Unknown, fs[i].Remedy, w.sev, w.unknown, w.remedy)
		}
	}
}

func TestDevlinkHealth(t *testing.T) {
	fs, err := checkDevlinkHealth(devlinkSnapshot(), nil, &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []diagnose.Severity{diagnose.Pass, diagnose.Warn, diagnose.Fail, diagnose.Skip}
	for i, f := range fs {
		if i >= len(want) || f.Severity != want[i] {
			t.Errorf("%s: %s (%s); want %v", f.Target, f.Severity, f.Observed, want)
		}
	}
	if !strings.Contains(fs[2].Remedy, "fw_fatal") || !strings.Contains(fs[2].Observed, "fw error, 7 errors") {
		t.Errorf("fw_fatal finding: %+v", fs[2])
	}
}

func TestDevlinkUnavailable(t *testing.T) {
	s := &diagnose.Reading{Host: &diagnosetest.Host{DevlinkErr: host.ErrNotLive}}
	if r := s.Unavailable(diagnose.SourceDevlink); !strings.Contains(r, "running kernel") {
		t.Errorf("fixture tree reason %q", r)
	}
	s = &diagnose.Reading{Host: &diagnosetest.Host{DevlinkErr: errors.New("boom")}}
	if r := s.Unavailable(diagnose.SourceDevlink); !strings.Contains(r, "boom") {
		t.Errorf("reason %q", r)
	}
	s = &diagnose.Reading{Host: &diagnosetest.Host{DevlinkValue: &host.Devlink{Health: &devlink.Snapshot{Outcomes: map[devlink.Query]map[devlink.Status]int{devlink.QueryHealth: {devlink.StatusNoDevlink: 1}}}}}}
	if r := s.Unavailable(diagnose.SourceDevlink); !strings.Contains(r, "no devlink family") {
		t.Errorf("reason %q", r)
	}
}
