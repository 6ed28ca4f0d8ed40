// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"testing"
)

// TestRegistry: every check has the fields the docs and reports need, ids
// are unique and ordered by concern, and pending checks say why.
func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	last := -1
	for _, c := range All() {
		if seen[c.ID] {
			t.Errorf("duplicate id %s", c.ID)
		}
		seen[c.ID] = true
		if c.Title == "" || c.Doc == "" || c.Remedy == "" {
			t.Errorf("%s: title, doc and remedy are required", c.ID)
		}
		if c.Run == nil && c.Pending == "" {
			t.Errorf("%s: no Run and no Pending reason", c.ID)
		}
		if c.Run != nil && c.Pending != "" {
			t.Errorf("%s: has Run and a Pending reason", c.ID)
		}
		if r := concernRank(c.ID); r < last {
			t.Errorf("%s out of concern order", c.ID)
		} else {
			last = r
		}
		if concernRank(c.ID) == len(concernOrder) {
			t.Errorf("%s: concern not in concernOrder", c.ID)
		}
	}
	for _, id := range []string{"dev.present", "fw.version", "fw.uniform", "port.phys", "port.state", "port.rate", "port.layer",
		"port.traffic", "sm.present", "ctr.symbol", "ctr.downed", "hw.retrans", "hw.fatal", "pci.link", "irq.local", "irq.spread",
		"irq.balance", "cpu.governor", "mem.hugepages", "mem.memlock", "sysctl.net", "ipoib.mode", "ipoib.mtu", "roce.gid_v2",
		"sm.master", "probe.latency", "probe.bandwidth"} {
		if !seen[id] {
			t.Errorf("catalogue check %s missing", id)
		}
	}
}
