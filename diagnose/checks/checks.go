// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/fabric"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/link"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/placement"
)

// catalogue is every check, built once on first use from the concern
// files, in this order (the checks' order within a concern).
var catalogue = sync.OnceValue(func() []*diagnose.Check {
	var l diagnose.CheckList
	for _, add := range []func(*diagnose.CheckList){
		link.CountersChecks,
		link.DeviceChecks,
		link.DevlinkChecks,
		fabric.FabricChecks,
		fabric.FabricTopologyChecks,
		link.FirmwareChecks,
		placement.GPUChecks,
		placement.GPUACSChecks,
		placement.IRQChecks,
		link.KmsgChecks,
		link.LinkReasonChecks,
		link.ModuleChecks,
		placement.NetdevChecks,
		placement.PCIChecks,
		placement.PCIPayloadChecks,
		link.PortChecks,
		link.PortWatchChecks,
		placement.ProbeChecks,
		placement.RoCEChecks,
		link.SMChecks,
		link.TemperatureChecks,
		link.TrafficChecks,
		placement.TuningChecks,
	} {
		add(&l)
	}
	return l
})

// concernOrder is the order concerns appear in reports: from "is there a
// device" down to the probe.
var concernOrder = []string{"dev", "fw", "port", "sm", "fabric", "ctr", "hw", "kernel", "devlink", "pci", "irq", "gpu", "cpu", "mem", "cgroup", "sysctl", "drv", "ipoib", "roce", "probe"}

func concernRank(id string) int {
	c, _, _ := strings.Cut(id, ".")
	if i := slices.Index(concernOrder, c); i >= 0 {
		return i
	}
	return len(concernOrder)
}

// All returns every check in report order: the one list of the checks
// the binary runs (diagnose, remediate, docs).
func All() []*diagnose.Check {
	out := slices.Clone(catalogue())
	sort.SliceStable(out, func(i, j int) bool { return concernRank(out[i].ID) < concernRank(out[j].ID) })
	return out
}
