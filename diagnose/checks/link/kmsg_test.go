// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/kmsg"
)

// TestKernelEvents: a fatal event within the window fails its device with
// the remedy for its PCI function; a warning warns; a fatal event older
// than the window and a device without events pass; a message that names
// no RDMA device is judged on target host.
func TestKernelEvents(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ev := func(name string) kmsg.Event { return kmsg.Events[kmsg.EventIndex(name)] }
	last := func(msg string, at time.Time) kmsg.Last { return kmsg.Last{Message: msg, Last: at, Repeats: 1} }
	s := &diagnose.Reading{Time: now, Host: &diagnosetest.Host{KernelLogWatched: true,
		ClassValue: &infiniband.Class{Devices: []infiniband.Device{
			{Name: "mlx5_0", PCIAddress: "0000:61:00.0"}, {Name: "mlx5_1"}, {Name: "mlx5_2"}, {Name: "mlx5_3"},
			{Name: "bnxt_re0", PCIAddress: "0000:19:00.0"},
		}},
		KernelLogValue: &host.KernelLog{Status: kmsg.Status{Reading: true}, Events: []host.KernelEvent{
			{Device: "mlx5_0", Event: ev("cmd_timeout"), Family: kmsg.FamilyMLX5, Live: 2, HasLast: true,
				Last: last("mlx5_core 0000:61:00.0: wait_func:1132:(pid 141181): CREATE_DCT(0x710) timeout. Will cause a leak of a command resource", now.Add(-time.Minute))},
			{Device: "bnxt_re0", Event: ev("cmd_timeout"), Family: kmsg.FamilyBNXT, Live: 1, HasLast: true,
				Last: last("bnxt_en 0000:19:00.0: QPLIB: cmdq[0x41d]=0x3 timedout (20000)msec", now.Add(-time.Minute))},
			{Device: "mlx5_1", Event: ev("module_unplugged"), Live: 1, HasLast: true, Last: last("unplugged", now.Add(-time.Minute))},
			{Device: "mlx5_2", Event: ev("fw_fatal_error"), History: 1, HasLast: true, Last: last("old fatal", now.Add(-time.Hour))},
			{Device: "", Event: ev("access_reg_failed"), Live: 40, HasLast: true, Last: last("ACCESS_REG", now)},
		}}}}
	fs, err := checkKernelEvents(s, nil, &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]diagnose.Finding{}
	for _, f := range fs {
		got[f.Target] = f
	}
	if f := got["mlx5_0"]; f.Severity != diagnose.Fail || !strings.Contains(f.Remedy, "mlxfwreset -d 0000:61:00.0 reset") ||
		!strings.Contains(f.Evidence, "Will cause a leak") || !strings.Contains(f.Observed, "cmd_timeout (fatal) 2 time(s) since rdma_doctor started") {
		t.Errorf("mlx5_0: %+v", f)
	}
	// Another vendor's device gets its own driver's remedy, never an
	// NVIDIA tool.
	if f := got["bnxt_re0"]; f.Severity != diagnose.Fail || !strings.Contains(f.Remedy, "bnxt_re") || strings.Contains(f.Remedy, "mlx") {
		t.Errorf("bnxt_re0: %+v", f)
	}
	if f := got["mlx5_1"]; f.Severity != diagnose.Warn {
		t.Errorf("mlx5_1: %+v", f)
	}
	if f := got["mlx5_2"]; f.Severity != diagnose.Pass || !strings.Contains(f.Observed, "before rdma_doctor started") {
		t.Errorf("mlx5_2 (old history): %+v", f)
	}
	if f := got["mlx5_3"]; f.Severity != diagnose.Pass {
		t.Errorf("mlx5_3 (quiet): %+v", f)
	}
	if f := got["host"]; f.Severity != diagnose.Warn || !strings.Contains(f.Observed, "access_reg_failed") {
		t.Errorf("host: %+v", f)
	}
	// Unreadable: the check skips with the reason.
	diagnosetest.Fixed(s).KernelLogValue.Status = kmsg.Status{Reason: kmsg.ReasonPermission}
	if why := s.Unavailable(diagnose.SourceKmsg); !strings.Contains(why, "permission") || !strings.Contains(why, "CAP_SYSLOG") {
		t.Errorf("unavailable: %q", why)
	}
	diagnosetest.Fixed(s).KernelLogWatched = false
	if why := s.Unavailable(diagnose.SourceKmsg); !strings.Contains(why, "rdma_doctor serve") {
		t.Errorf("no reader: %q", why)
	}
}
