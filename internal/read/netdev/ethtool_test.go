// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// TestEthtoolVeth runs the ethtool path against real kernel netdevs: a veth
// pair the test creates in a private network namespace (unshare -r -n).
// What it covers: the SIOCETHTOOL calls (driver info, GSET speed, string
// set and statistics), the statistic filter, the unknown-interface error,
// and Read's ifindex check that decides whether the kernel's netdev is the
// one the sysfs tree describes. What it cannot: mlx5 or IPoIB statistics
// (veth has only peer_ifindex and per-queue XDP counters), firmware
// versions or bus addresses (veth has none).
func TestEthtoolVeth(t *testing.T) {
	if !testenv.InChild(t.Name()) {
		if _, err := os.Stat("/usr/sbin/ip"); err != nil {
			if _, err := os.Stat("/sbin/ip"); err != nil {
				testenv.SkipOrFail(t, "ip (iproute2) not installed")
			}
		}
		t.Log(testenv.InNamespaces(t, t.Name(), "-n"))
		return
	}
	testenv.Run(t, "ip", "link", "add", "rdtest0", "type", "veth", "peer", "name", "rdtest1")
	testenv.Run(t, "ip", "link", "set", "rdtest0", "up")
	testenv.Run(t, "ip", "link", "set", "rdtest1", "up")
	peer, err := net.InterfaceByName("rdtest1")
	if err != nil {
		t.Fatal(err)
	}

	e := &Ethtool{Stats: regexp.MustCompile(`^(?:peer_ifindex|rx_queue_0_xdp_packets)$`)}
	info, err := e.Query("rdtest0")
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "veth" || info.DriverVersion == "" || info.FirmwareVersion != "" || info.BusInfo != "" {
		t.Errorf("driver info %+v", info)
	}
	// veth reports a fixed 10 Gb/s.
	if !info.SpeedMbps.OK || info.SpeedMbps.V != 10000 {
		t.Errorf("speed %v, want 10000 Mb/s", info.SpeedMbps)
	}
	stats := map[string]uint64{}
	for _, s := range info.Stats {
		stats[s.Name] = s.Value
	}
	if len(stats) != 2 || stats["peer_ifindex"] != uint64(peer.Index) {
		t.Errorf("stats %v, want peer_ifindex %d and rx_queue_0_xdp_packets", stats, peer.Index)
	}
	// The link state over ethtool netlink: veth reports its carrier and no
	// extended state (it has no get_link_ext_state), and no FEC (no
	// get_fecparam: EOPNOTSUPP, which is absence, not an error).
	if l := info.Link; l == nil || !l.Link.OK || !l.Link.V || l.ExtState.OK || l.ExtSubstate.OK {
		t.Errorf("link state of an up veth: %+v", l)
	}
	if info.FEC != nil {
		t.Errorf("FEC statistics on veth: %+v", info.FEC)
	}
	testenv.Run(t, "ip", "link", "set", "rdtest1", "down")
	if down, err := e.Query("rdtest0"); err != nil || down.Link == nil || !down.Link.Link.OK || down.Link.Link.V {
		t.Errorf("link state with the peer down: %+v, %v", down.Link, err)
	}
	testenv.Run(t, "ip", "link", "set", "rdtest1", "up")

	// The default selection names mlx5 counters only: nothing on veth.
	def := &Ethtool{Stats: regexp.MustCompile("^(?:" + DefaultStats + ")$")}
	if info, err := def.Query("rdtest0"); err != nil || len(info.Stats) != 0 {
		t.Errorf("default stats on veth: %v, %v", info.Stats, err)
	}
	if _, err := e.Query("rdnone0"); !errors.Is(err, syscall.ENODEV) {
		t.Errorf("unknown interface: %v, want ENODEV", err)
	}

	// Read queries only a netdev whose sysfs ifindex is the kernel's: a
	// RoCE netdev named rdtest0 in a small tree, once with the right
	// ifindex, once with another.
	self, _ := net.InterfaceByName("rdtest0")
	for _, tc := range []struct {
		ifindex int
		queried bool
	}{{self.Index, true}, {self.Index + 100, false}} {
		root := t.TempDir()
		for f, v := range map[string]string{
			"sys/class/infiniband/rxe0/ports/1/link_layer":        "Ethernet",
			"sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0": "rdtest0",
			"sys/class/infiniband/rxe0/ports/1/gid_attrs/types/0": "RoCE v2",
			"sys/class/net/rdtest0/type":                          "1",
			"sys/class/net/rdtest0/ifindex":                       strconv.Itoa(tc.ifindex),
			"sys/class/net/rdtest0/mtu":                           "1500",
		} {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		h := hostfs.Host{Root: hostfs.Dir(root), Sys: hostfs.Dir(root + "/sys"), Proc: hostfs.Dir(root + "/proc")}
		s, err := Read(context.Background(), h, Options{Ethtool: e})
		if err != nil || len(s.Errors) != 0 || len(s.Netdevs) != 1 {
			t.Fatalf("ifindex %d: %+v, %v", tc.ifindex, s, err)
		}
		nd := s.Netdevs[0]
		if (nd.Ethtool != nil) != tc.queried || nd.Device != "rxe0" || nd.GIDTypes[GIDRoCEv2] != 1 {
			t.Errorf("ifindex %d (kernel %d): ethtool %+v, %s", tc.ifindex, self.Index, nd.Ethtool, summary(nd))
		}
	}
}
