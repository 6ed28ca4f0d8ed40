// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package ibsimtest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The switch counts the issue measured its fabrics with (issue 28: 1000
// hosts on 74 switches, 4000 on 241).
func TestFatTreeShape(t *testing.T) {
	for _, c := range []struct{ hosts, leaves, switches int }{
		{1, 1, 19}, {18, 1, 19}, {19, 2, 20}, {1000, 56, 74}, {4000, 223, 241},
	} {
		s := FatTreeShape(c.hosts)
		if s.Leaves != c.leaves || s.Switches() != c.switches {
			t.Errorf("%d hosts: %d leaves, %d switches; want %d, %d", c.hosts, s.Leaves, s.Switches(), c.leaves, c.switches)
		}
		if s.SpinePorts < s.Leaves {
			t.Errorf("%d hosts: spines of %d ports cannot reach %d leaves", c.hosts, s.SpinePorts, s.Leaves)
		}
	}
}

var (
	nodeLine = regexp.MustCompile(`^(Switch|Ca)\t(\d+) "([^"]+)"`)
	linkLine = regexp.MustCompile(`^\[(\d+)\]\t"([^"]+)"\[(\d+)\]`)
)

// Every link of the file is listed from both ends, every port number is
// within its node, and the counts match the shape.
func TestNetFileLinksBothEnds(t *testing.T) {
	for _, s := range []Shape{
		FatTreeShape(100), // 6 leaves, the last one partly filled
		// e2e's small tree: 8-port switches, up ports 7-8 unplugged.
		{Hosts: 16, Leaves: 4, Spines: 2, LeafPorts: 8, SpinePorts: 8},
	} {
		t.Run(fmt.Sprintf("%dx%d", s.Leaves, s.LeafPorts), func(t *testing.T) { netFileLinksBothEnds(t, s) })
	}
}

func netFileLinksBothEnds(t *testing.T, s Shape) {
	ends := map[string]string{}
	ports := map[string]int{}
	var node string
	for _, l := range strings.Split(s.NetFile(), "\n") {
		if m := nodeLine.FindStringSubmatch(l); m != nil {
			node = m[3]
			ports[node], _ = strconv.Atoi(m[2])
			continue
		}
		if m := linkLine.FindStringSubmatch(l); m != nil {
			a := fmt.Sprintf("%s[%s]", node, m[1])
			b := fmt.Sprintf("%s[%s]", m[2], m[3])
			if _, dup := ends[a]; dup {
				t.Fatalf("port %s cabled twice", a)
			}
			ends[a] = b
		}
	}
	for a, b := range ends {
		if ends[b] != a {
			t.Errorf("%s -> %s, but %s -> %q", a, b, b, ends[b])
		}
		var n string
		var p int
		if _, err := fmt.Sscanf(strings.Replace(a, "[", " ", 1), "%s %d]", &n, &p); err != nil || p < 1 || p > ports[n] {
			t.Errorf("%s: port outside its node's %d ports (%v)", a, ports[n], err)
		}
	}
	hostLinks := s.Hosts
	uplinks := s.Leaves * s.Spines
	if want := 2 * (hostLinks + uplinks); len(ends) != want {
		t.Errorf("%d cabled port ends, want %d", len(ends), want)
	}
	if len(ports) != s.Switches()+s.Hosts {
		t.Errorf("%d nodes, want %d", len(ports), s.Switches()+s.Hosts)
	}
}
