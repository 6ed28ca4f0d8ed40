// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"fmt"
	"sort"
	"strconv"
)

// HugepagesDropIn persists the pool of the default (2 MiB) page size.
const HugepagesDropIn = "etc/sysctl.d/90-rdma-doctor-hugepages.conf"

// hugepagesAction reserves diagnose.policies.hugepages (min_pages of
// page_size_kib) spread evenly over the NUMA nodes, at runtime per node,
// and persists a 2 MiB pool as vm.nr_hugepages in a sysctl drop-in.
// 1 GiB pages are persisted only on the kernel command line, which
// remediate never edits: the plan says so.
type hugepagesAction struct{}

func (hugepagesAction) ID() string       { return "hugepages" }
func (hugepagesAction) Checks() []string { return []string{"mem.hugepages"} }

func (a hugepagesAction) Plan(in *Input) ([]Change, []string, error) {
	tun, err := in.Snap.Host.Tuning()
	if tun == nil {
		return nil, nil, fmt.Errorf("tuning state unreadable: %v", err)
	}
	pol := in.Config.Diagnose.Policies.Hugepages
	if pol.MinPages == 0 || pol.PageSizeKiB == 0 {
		return nil, []string{"nothing to do: no requirement (diagnose.policies.hugepages); verbs do not need hugepages"}, nil
	}
	size := pol.PageSizeKiB * 1024
	pool := "hugepages-" + strconv.FormatUint(pol.PageSizeKiB, 10) + "kB/nr_hugepages"
	type node struct {
		n     int
		total uint64
	}
	var nodes []node
	var global *node
	for _, p := range tun.Hugepages {
		if p.SizeBytes != size || !p.Total.OK {
			continue
		}
		if p.Node < 0 {
			global = &node{n: -1, total: p.Total.V}
		} else {
			nodes = append(nodes, node{p.Node, p.Total.V})
		}
	}
	if len(nodes) == 0 && global == nil {
		return nil, []string{fmt.Sprintf("no %d KiB pool: the kernel or CPU lacks that page size; not changed", pol.PageSizeKiB)}, nil
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].n < nodes[j].n })
	var out []Change
	var notes []string
	var total uint64
	for _, nd := range nodes {
		total += nd.total
	}
	switch {
	case len(nodes) > 0 && total < pol.MinPages:
		// An even share per node, the remainder to the first nodes.
		share, rest := pol.MinPages/uint64(len(nodes)), pol.MinPages%uint64(len(nodes))
		for i, nd := range nodes {
			want := share
			if uint64(i) < rest {
				want++
			}
			if nd.total >= want {
				continue
			}
			out = append(out, Change{Action: a.ID(), Check: "mem.hugepages", Target: fmt.Sprintf("node%d %d KiB pages", nd.n, pol.PageSizeKiB),
				Area: AreaSys, Path: fmt.Sprintf("devices/system/node/node%d/hugepages/%s", nd.n, pool),
				Current: strconv.FormatUint(nd.total, 10) + "\n", Exists: true, Desired: strconv.FormatUint(want, 10) + "\n", InPlace: true})
		}
	case len(nodes) == 0 && global.total < pol.MinPages:
		out = append(out, Change{Action: a.ID(), Check: "mem.hugepages", Target: fmt.Sprintf("%d KiB pages", pol.PageSizeKiB),
			Area: AreaSys, Path: "kernel/mm/hugepages/" + pool,
			Current: strconv.FormatUint(global.total, 10) + "\n", Exists: true, Desired: strconv.FormatUint(pol.MinPages, 10) + "\n", InPlace: true})
	}
	if pol.PageSizeKiB == 2048 {
		cur, exists, err := readOptional(in.W, AreaRoot, HugepagesDropIn)
		if err != nil {
			return nil, nil, err
		}
		desired := sysctlConf(map[string]string{"vm.nr_hugepages": strconv.FormatUint(pol.MinPages, 10)})
		if c := dropInChange(a.ID(), "mem.hugepages", HugepagesDropIn, cur, exists, desired); c != nil {
			out = append(out, *c)
		}
	} else {
		notes = append(notes, fmt.Sprintf("%d KiB pages persist only via the kernel command line (hugepagesz=%dK hugepages=%d), which remediate never edits",
			pol.PageSizeKiB, pol.PageSizeKiB, pol.MinPages))
	}
	if len(out) > 0 {
		notes = append(notes, "the kernel may allocate fewer pages than asked (fragmented memory): diagnose reads back what it got")
	} else {
		notes = append(notes, "nothing to do: the pool has its pages")
	}
	return out, notes, nil
}
