// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/cpulist"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// Node is one NUMA node and its CPUs.
type Node struct {
	ID   int
	CPUs cpulist.Set
}

// Topology is where the host's CPUs are: which are online and which node
// each belongs to. A check uses it to name the node an IRQ's CPUs are on.
type Topology struct {
	// Online is cpu/online; absent when unreadable.
	Online Opt[cpulist.Set]
	// Nodes are node<N>/cpulist in node order; empty on kernels built
	// without NUMA, which have no node directory.
	Nodes  []Node
	Errors []error
}

// NodeOf returns the node holding cpu, or -1.
func (t *Topology) NodeOf(cpu int) int {
	for _, n := range t.Nodes {
		if n.CPUs.Contains(cpu) {
			return n.ID
		}
	}
	return -1
}

// Node returns the CPUs of node id.
func (t *Topology) Node(id int) (cpulist.Set, bool) {
	for _, n := range t.Nodes {
		if n.ID == id {
			return n.CPUs, true
		}
	}
	return cpulist.Set{}, false
}

// ReadTopology reads devices/system/cpu/online and
// devices/system/node/node<N>/cpulist below the sysfs root.
func ReadTopology(sys hostfs.FS) Topology {
	var t Topology
	if b, err := sys.ReadFile("devices/system/cpu/online"); err != nil {
		t.Errors = append(t.Errors, err)
	} else if s, err := cpulist.Parse(string(b)); err != nil {
		t.Errors = append(t.Errors, &ParseError{Path: "devices/system/cpu/online", Err: err})
	} else {
		t.Online = some(s)
	}
	entries, err := sys.ReadDir("devices/system/node")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errors = append(t.Errors, err)
		}
		return t
	}
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "node")
		id, err := strconv.Atoi(num)
		if !ok || err != nil || id < 0 {
			continue // online, possible, has_cpu, ...
		}
		name := fmt.Sprintf("devices/system/node/%s/cpulist", e.Name())
		b, err := sys.ReadFile(name)
		if err != nil {
			t.Errors = append(t.Errors, err)
			continue
		}
		s, err := cpulist.Parse(string(b))
		if err != nil {
			t.Errors = append(t.Errors, &ParseError{Path: name, Err: err})
			continue
		}
		t.Nodes = append(t.Nodes, Node{ID: id, CPUs: s})
	}
	// ReadDir sorts by name: node10 before node2.
	sort.Slice(t.Nodes, func(i, j int) bool { return t.Nodes[i].ID < t.Nodes[j].ID })
	return t
}
