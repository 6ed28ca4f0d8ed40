// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/kmsg"
)

// TestMapKernelLog: subjects map to devices by PCI address, netdev or RDMA
// name and merge per device; an unknown function's message goes to
// device ""; an AER line of a function that is no RDMA device is dropped.
func TestMapKernelLog(t *testing.T) {
	class := &infiniband.Class{Devices: []infiniband.Device{
		{Name: "mlx5_0", PCIAddress: "0000:3b:00.0", Ports: []infiniband.Port{{Num: 1, Netdev: "ens1f0np0"}}},
		{Name: "mlx5_1", PCIAddress: "0000:3b:00.1"},
	}}
	ev := func(name string) int { return kmsg.EventIndex(name) }
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := kmsg.Report{Status: kmsg.Status{Reading: true}, Events: kmsg.Events,
		Counts: []kmsg.Count{
			{Subject: kmsg.Subject{PCI: "0000:3b:00.0"}, Event: ev("netdev_watchdog"), Live: 1},
			{Subject: kmsg.Subject{Netdev: "ens1f0np0"}, Event: ev("netdev_watchdog"), Live: 2, History: 1},
			{Subject: kmsg.Subject{IBDev: "mlx5_1"}, Event: ev("cmd_timeout"), Family: kmsg.FamilyMLX5, Live: 1},
			{Subject: kmsg.Subject{PCI: "0000:d2:00.0"}, Event: ev("access_reg_failed"), Live: 7},
			{Subject: kmsg.Subject{PCI: "0000:00:1d.3"}, Event: ev("pcie_aer_corrected"), Live: 9},
			{Subject: kmsg.Subject{PCI: "0000:3b:00.1"}, Event: ev("pcie_aer_fatal"), Live: 1},
		},
		Last: []kmsg.Last{
			{Subject: kmsg.Subject{PCI: "0000:3b:00.0"}, Event: ev("netdev_watchdog"), Message: "old", Last: t0},
			{Subject: kmsg.Subject{Netdev: "ens1f0np0"}, Event: ev("netdev_watchdog"), Family: kmsg.FamilyBNXT, Message: "new", Last: t0.Add(time.Second)},
		}}
	kl := mapKernelLog(r, newDeviceIndex(class))
	got := map[string]KernelEvent{}
	for _, e := range kl.Events {
		got[e.Device+"/"+e.Event.Name] = e
	}
	if e := got["mlx5_0/netdev_watchdog"]; e.Live != 3 || e.History != 1 || !e.HasLast || e.Last.Message != "new" || e.Family != kmsg.FamilyBNXT {
		t.Errorf("merged: %+v", e)
	}
	if e := got["mlx5_1/cmd_timeout"]; e.Live != 1 || e.Family != kmsg.FamilyMLX5 {
		t.Errorf("by RDMA name: %+v", e)
	}
	if e := got["/access_reg_failed"]; e.Live != 7 {
		t.Errorf("unmapped: %+v", e)
	}
	if _, ok := got["/pcie_aer_corrected"]; ok {
		t.Error("an AER line of a function that is no RDMA device was kept")
	}
	if e := got["mlx5_1/pcie_aer_fatal"]; e.Live != 1 {
		t.Errorf("AER of an RDMA function: %+v", e)
	}
	if len(kl.Events) != 4 || kl.Events[0].Device != "" {
		t.Errorf("want 4 events sorted by device: %+v", kl.Events)
	}
}

func TestBootTime(t *testing.T) {
	h := newTestHost(t, map[string]string{"proc/stat": "cpu  1 2 3\nbtime 1767225600\nprocesses 5\n"})
	if got := h.bootTime(); !got.Equal(time.Unix(1767225600, 0)) {
		t.Errorf("btime: %v", got)
	}
	h = newTestHost(t, map[string]string{"proc/stat": "cpu  1 2 3\n"})
	if !h.bootTime().IsZero() {
		t.Error("no btime line: want zero")
	}
}

func newTestHost(t *testing.T, files map[string]string) *Host {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := AtRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
