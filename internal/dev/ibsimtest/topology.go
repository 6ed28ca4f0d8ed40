// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package ibsimtest generates simulated InfiniBand fabrics and runs them
// on the real Debian stack: ibsim (ibsim-utils) simulates the fabric,
// the real opensm brings it up, and clients attach through umad2sim's
// LD_PRELOAD. The e2e fabric tests and tools/fabricbench share it.
package ibsimtest

import (
	"fmt"
	"strconv"
	"strings"
)

// fatTreeLeafPorts is the port count of FatTreeShape's leaves (a
// two-level fat tree of 36-port switches).
const fatTreeLeafPorts = 36

// Shape is the layout of a generated fat tree.
type Shape struct {
	Hosts  int
	Leaves int
	Spines int
	// LeafPorts is the port count of a leaf: the lower half go down to
	// hosts, the upper half up, port LeafPorts/2+s to spine s; up ports
	// beyond the spines are unplugged.
	LeafPorts int
	// SpinePorts: port l to leaf l; a spine's ports beyond the leaves
	// are unplugged.
	SpinePorts int
}

// Switches is the switch count of the fat tree.
func (s Shape) Switches() int { return s.Leaves + s.Spines }

// SwitchPorts is the count of every switch port, unplugged ones included
// (what a sweep of every switch port covers).
func (s Shape) SwitchPorts() int { return s.Leaves*s.LeafPorts + s.Spines*s.SpinePorts }

// FatTreeShape is the two-level fat tree of 36-port switches for hosts
// hosts (at least 1): 18 hosts per leaf (the last leaf's spare host ports
// unplugged), 18 spines, each leaf's upper half cabled one port to each
// spine.
func FatTreeShape(hosts int) Shape {
	hosts = max(hosts, 1)
	down := fatTreeLeafPorts / 2
	leaves := (hosts + down - 1) / down
	return Shape{Hosts: hosts, Leaves: leaves, Spines: down, LeafPorts: fatTreeLeafPorts, SpinePorts: max(leaves, fatTreeLeafPorts)}
}

// SimArgs are ibsim's capacity options for the fabric: its defaults
// hold at most 13312 ports in all (ibsim 0.10 panics "new_ports: no more
// ports" on a 4000-host fat tree), so the tables are sized from the shape:
// every port, port 0 of each node included, with room to spare.
func (s Shape) SimArgs() []string {
	nodes := s.Switches() + s.Hosts
	ports := s.SwitchPorts() + nodes + s.Hosts
	return []string{"-N", strconv.Itoa(nodes + 64), "-S", strconv.Itoa(s.Switches() + 16), "-P", strconv.Itoa(ports + 1024)}
}

// Node descriptions of the generated fabric.
func leafName(l int) string  { return fmt.Sprintf("S-leaf%03d", l) }
func spineName(s int) string { return fmt.Sprintf("S-spine%03d", s) }
func hostName(h int) string  { return fmt.Sprintf("H-host%04d", h) }

// LID plan: spines first, then leaves, then hosts (opensm assigns its own
// LIDs; these only fill the comments ibnetdiscover's format carries).
func (s Shape) spineLID(i int) int { return i }
func (s Shape) leafLID(l int) int  { return s.Spines + l }
func (s Shape) hostLID(h int) int  { return s.Spines + s.Leaves + h }

// NetFile is the topology in ibnetdiscover's format, as ibsim -s reads it:
// both ends of each link, node descriptions and 4xHDR rates in the
// comments.
func (s Shape) NetFile() string {
	var b strings.Builder
	down := s.LeafPorts / 2
	for sp := 1; sp <= s.Spines; sp++ {
		fmt.Fprintf(&b, "Switch\t%d %q\t\t# %q base port 0 lid %d lmc 0\n", s.SpinePorts, spineName(sp), spineName(sp)[2:], s.spineLID(sp))
		for l := 1; l <= s.Leaves; l++ {
			fmt.Fprintf(&b, "[%d]\t%q[%d]\t\t# %q lid %d 4xHDR\n", l, leafName(l), down+sp, leafName(l)[2:], s.leafLID(l))
		}
		b.WriteString("\n")
	}
	for l := 1; l <= s.Leaves; l++ {
		fmt.Fprintf(&b, "Switch\t%d %q\t\t# %q base port 0 lid %d lmc 0\n", s.LeafPorts, leafName(l), leafName(l)[2:], s.leafLID(l))
		for p := 1; p <= down; p++ {
			h := (l-1)*down + p
			if h > s.Hosts {
				break
			}
			fmt.Fprintf(&b, "[%d]\t%q[1]\t\t# \"%s mlx5_0\" lid %d 4xHDR\n", p, hostName(h), hostName(h)[2:], s.hostLID(h))
		}
		for sp := 1; sp <= s.Spines; sp++ {
			fmt.Fprintf(&b, "[%d]\t%q[%d]\t\t# %q lid %d 4xHDR\n", down+sp, spineName(sp), l, spineName(sp)[2:], s.spineLID(sp))
		}
		b.WriteString("\n")
	}
	for h := 1; h <= s.Hosts; h++ {
		l, p := (h-1)/down+1, (h-1)%down+1
		fmt.Fprintf(&b, "Ca\t1 %q\t\t# \"%s mlx5_0\"\n[1]\t%q[%d]\t\t# lid %d lmc 0 %q lid %d 4xHDR\n\n",
			hostName(h), hostName(h)[2:], leafName(l), p, s.hostLID(h), leafName(l)[2:], s.leafLID(l))
	}
	return b.String()
}
