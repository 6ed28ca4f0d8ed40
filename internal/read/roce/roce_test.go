// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package roce

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

func write(t *testing.T, root, p, v string) {
	t.Helper()
	p = filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

// dcbConn answers DCB requests with EOPNOTSUPP, as a driver without
// dcbnl_ops does.
type dcbConn struct{ asked []string }

func (c *dcbConn) Exec(_ context.Context, proto int, _ uint16, _ int, body []byte, _ func([]byte) bool) error {
	c.asked = append(c.asked, string(body[8:]))
	return unix.EOPNOTSUPP
}

func TestRead(t *testing.T) {
	root := t.TempDir()
	for p := range Priorities {
		v := "0\n"
		if p == 3 {
			v = "1\n"
		}
		write(t, root, "class/net/eth0/ecn/roce_np/enable/"+string(rune('0'+p)), v)
		write(t, root, "class/net/eth0/ecn/roce_rp/enable/"+string(rune('0'+p)), v)
	}
	// Where MLNX_OFED's en_sysfs.c puts them (roce_np itself); eth1 has
	// the params/ form NVIDIA's ECN page writes.
	write(t, root, "class/net/eth0/ecn/roce_np/cnp_802p_prio", "6\n")
	write(t, root, "class/net/eth0/ecn/roce_np/cnp_dscp", "48\n")
	write(t, root, "class/net/eth1/ecn/roce_np/params/cnp_dscp", "26\n")
	// An iWARP netdev's ecn tree is never read as RoCE (a cxgb4 port has
	// none, but the kind alone must decide).
	write(t, root, "class/net/iw0/ecn/roce_np/enable/0", "1\n")
	write(t, root, "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos", "106\n")
	write(t, root, "class/net/eth1/ecn/roce_np/enable/0", "garbage\n")

	nds := []netdev.Netdev{
		{Name: "eth0", Kind: netdev.KindRoCE, Device: "mlx5_0", Port: 1, IfIndex: sysattr.Some(uint64(4))},
		{Name: "eth1", Kind: netdev.KindRoCE, Device: "mlx5_1", Port: 1, IfIndex: sysattr.Some(uint64(5))},
		{Name: "ib0", Kind: netdev.KindIPoIB, Device: "mlx5_2", Port: 1},
		{Name: "iw0", Kind: netdev.KindIWARP, Device: "cxgb4_0", Port: 1},
	}
	conn := &dcbConn{}
	s := Read(context.Background(), hostfs.Dir(root), nds, Options{
		Conn:  conn,
		Pause: func(string) (Pause, error) { return Pause{RX: true, TX: true}, nil },
		// The kernel has eth0 under another ifindex (a fixture tree read on
		// some host) and eth1 as in the tree.
		Interfaces: func() (map[string]int, error) { return map[string]int{"eth0": 9, "eth1": 5}, nil },
	})
	if len(s.Netdevs) != 2 {
		t.Fatalf("netdevs %+v", s.Netdevs)
	}
	e0, e1 := s.Netdevs[0], s.Netdevs[1]
	if np := e0.ECN[PointNP]; !np[3].OK || !np[3].V || !np[0].OK || np[0].V {
		t.Errorf("eth0 np %+v", np)
	}
	if _, ok := e0.ECN[PointRP]; !ok {
		t.Error("eth0 no rp")
	}
	if e0.CNPPriority.V != 6 || e0.CNPDSCP.V != 48 || !e0.DefaultToS.OK || e0.DefaultToS.V != 106 {
		t.Errorf("eth0 %+v", e0)
	}
	if e0.Live || e0.DCBStatus != "" || e0.Pause != nil {
		t.Errorf("eth0 asked the kernel under another ifindex: %+v", e0)
	}
	if !e1.Live || e1.DCBStatus != rdmanl.StatusUnsupported || e1.Pause == nil || !e1.Pause.RX {
		t.Errorf("eth1 %+v", e1)
	}
	if _, ok := e1.ECN[PointRP]; ok || e1.DefaultToS.OK || e1.CNPPriority.OK {
		t.Errorf("eth1 has what its tree lacks: %+v", e1)
	}
	if !e1.CNPDSCP.OK || e1.CNPDSCP.V != 26 {
		t.Errorf("eth1 params/cnp_dscp: %+v", e1.CNPDSCP)
	}
	if len(conn.asked) != 1 {
		t.Errorf("dcb asked %q", conn.asked)
	}
	if len(s.Errors) != 1 {
		t.Errorf("errors %v, want the garbage enable file", s.Errors)
	}
	if ToSPriority(e0.DefaultToS.V) != 3 {
		t.Errorf("ToS 106 -> priority %d", ToSPriority(106))
	}
}

func TestPrioStat(t *testing.T) {
	for in, want := range map[string][3]any{
		"rx_prio3_pause":          {"rx", 3, "pause"},
		"tx_prio0_pause_duration": {"tx", 0, "pause_duration"},
		"rx_prio7_discards":       {"rx", 7, "discards"},
	} {
		d, p, r, ok := PrioStat(in)
		if !ok || d != want[0] || p != want[1] || r != want[2] {
			t.Errorf("%s: %s %d %s %v", in, d, p, r, ok)
		}
	}
	for _, in := range []string{"rx_pause_ctrl_phy", "rx_prio8_pause", "rx_prio3", "xx_prio3_pause", "rx_prio33_pause"} {
		if _, _, _, ok := PrioStat(in); ok {
			t.Errorf("%s parsed", in)
		}
	}
}

// TestLivePauseLoopback asks the running kernel for lo's pause
// parameters: lo has no get_pauseparam, EOPNOTSUPP.
func TestLivePauseLoopback(t *testing.T) {
	_, err := EthtoolPause("lo")
	if st := rdmanl.Classify(err); st != rdmanl.StatusUnsupported {
		t.Errorf("lo pause: %v (%s)", err, st)
	}
}

// TestLiveVeth runs Read against the running kernel for a veth the test
// creates in a private user and network namespace, named in the netdev
// list as a RoCE netdev with the kernel's ifindex: the kernel lookup
// (SIOCGIFINDEX), the real DCB_CMD_IEEE_GET and ETHTOOL_GPAUSEPARAM. veth
// has neither dcbnl_ops nor get_pauseparam: both outcomes unsupported,
// no DCB, no pause, and no error, as on any netdev whose driver lacks
// DCB. A second entry whose tree ifindex is not the kernel's is never
// asked about.
func TestLiveVeth(t *testing.T) {
	if !testenv.InChild(t.Name()) {
		testenv.RequireTool(t, "ip", "ip (iproute2) not installed")
		t.Log(testenv.InNamespaces(t, t.Name(), "-n"))
		return
	}
	testenv.Run(t, "ip", "link", "add", "rdroce0", "type", "veth", "peer", "name", "rdroce1")
	testenv.Run(t, "ip", "link", "set", "rdroce0", "up")
	testenv.Run(t, "ip", "link", "set", "rdroce1", "up")
	var idx [2]uint64
	for i, nd := range []string{"rdroce0", "rdroce1"} {
		ifi, err := net.InterfaceByName(nd)
		if err != nil {
			t.Fatal(err)
		}
		idx[i] = uint64(ifi.Index)
	}
	nds := []netdev.Netdev{
		{Name: "rdroce0", Kind: netdev.KindRoCE, Device: "rxe0", Port: 1, IfIndex: sysattr.Some(idx[0])},
		{Name: "rdroce1", Kind: netdev.KindRoCE, Device: "rxe1", Port: 1, IfIndex: sysattr.Some(idx[1] + 100)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := Read(ctx, hostfs.Dir(t.TempDir()), nds, Options{Conn: rdmanl.Live{}, Pause: EthtoolPause})
	if len(s.Errors) != 0 || len(s.Netdevs) != 2 {
		t.Fatalf("errors %v, netdevs %+v", s.Errors, s.Netdevs)
	}
	v := s.Netdevs[0]
	if !v.Live || v.DCBStatus != rdmanl.StatusUnsupported || v.DCB != nil || v.PauseStatus != rdmanl.StatusUnsupported || v.Pause != nil {
		t.Errorf("veth: %+v; want live, dcb and pause unsupported, neither present", v)
	}
	// An upstream-like netdev: no ecn directory, no configfs entry.
	if v.ECN != nil || v.CNPPriority.OK || v.DefaultToS.OK {
		t.Errorf("veth has sysfs state its tree lacks: %+v", v)
	}
	if o := s.Netdevs[1]; o.Live || o.DCBStatus != "" || o.PauseStatus != "" {
		t.Errorf("netdev under another ifindex asked the kernel: %+v", o)
	}
}

// TestDefaultStatsPerPriority: every per-priority pause, discard and
// ECN-marked statistic mlx5 names (drivers/net/ethernet/mellanox/mlx5/
// core/en_stats.c: pport_per_prio_pfc_stats_desc with "prio%d",
// pport_per_prio_traffic_stats_desc, pport_per_tc_prio_stats_desc,
// pport_per_tc_congest_prio_stats_desc) is selected by the default
// ethtool-stats regexp and splits into a direction and a priority, so it
// is exported as rdma_netdev_priority_stat_total; the per-priority byte
// and packet counters are not selected.
func TestDefaultStatsPerPriority(t *testing.T) {
	def := regexp.MustCompile("^(?:" + netdev.DefaultStats + ")$")
	for _, f := range []string{"rx_prio%d_pause", "rx_prio%d_pause_duration", "tx_prio%d_pause", "tx_prio%d_pause_duration",
		"rx_prio%d_pause_transition", "rx_prio%d_discards", "rx_prio%d_buf_discard", "rx_prio%d_cong_discard", "rx_prio%d_marked"} {
		for p := range Priorities {
			name := fmt.Sprintf(f, p)
			if !def.MatchString(name) {
				t.Errorf("%s not in the default selection", name)
			}
			if d, prio, rest, ok := PrioStat(name); !ok || d != name[:2] || prio != p || rest == "" {
				t.Errorf("%s: %s %d %q %v", name, d, prio, rest, ok)
			}
		}
	}
	for _, name := range []string{"rx_prio0_bytes", "rx_prio0_packets", "tx_prio7_bytes", "tx_prio7_packets", "rx_global_pause"} {
		if def.MatchString(name) {
			t.Errorf("%s in the default selection", name)
		}
	}
}
