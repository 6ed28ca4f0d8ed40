// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
)

func netdevOn(t *testing.T, host string, with ...func(*rdmahost.Options)) Collector {
	t.Helper()
	env := hostEnv(t, "../fixtures/hosts/"+host, append(with, func(o *rdmahost.Options) { o.Ethtool = &netdev.Ethtool{} })...)
	return on(env, NewNetdevCollector(env))
}

// Enhanced IPoIB in datagram mode with MTU 4092 and a pkey child.
func TestNetdevIPoIBEnhanced(t *testing.T) {
	g := gatherOne(t, "netdev", netdevOn(t, "ipoib-enhanced"))
	want := `
# HELP rdma_netdev_info A netdev carrying IPoIB, RoCE or iWARP and the RDMA device and port it belongs to; always 1.
# TYPE rdma_netdev_info gauge
rdma_netdev_info{device="mlx5_0",kind="ipoib",netdev="ib0",pci_address="0000:17:00.0",port="1"} 1
rdma_netdev_info{device="mlx5_0",kind="ipoib",netdev="ib0.8001",pci_address="0000:17:00.0",port="1"} 1
# HELP rdma_netdev_ipoib_connected_mode 1 when the IPoIB interface runs connected mode, 0 datagram.
# TYPE rdma_netdev_ipoib_connected_mode gauge
rdma_netdev_ipoib_connected_mode{netdev="ib0"} 0
rdma_netdev_ipoib_connected_mode{netdev="ib0.8001"} 0
# HELP rdma_netdev_ipoib_connected_mode_supported 1 when the IPoIB interface can run connected mode (IPOIB_FLAGS_RC in its hardware address); 0 on enhanced IPoIB.
# TYPE rdma_netdev_ipoib_connected_mode_supported gauge
rdma_netdev_ipoib_connected_mode_supported{netdev="ib0"} 0
rdma_netdev_ipoib_connected_mode_supported{netdev="ib0.8001"} 0
# HELP rdma_netdev_ipoib_enhanced 1 on enhanced IPoIB (mlx5, ConnectX-4 or later), where connected mode does not exist.
# TYPE rdma_netdev_ipoib_enhanced gauge
rdma_netdev_ipoib_enhanced{netdev="ib0"} 1
rdma_netdev_ipoib_enhanced{netdev="ib0.8001"} 1
# HELP rdma_netdev_ipoib_info IPoIB interface attributes: partition key, and the parent of a pkey child interface (empty for a parent); always 1.
# TYPE rdma_netdev_ipoib_info gauge
rdma_netdev_ipoib_info{netdev="ib0",parent="",pkey="0xffff"} 1
rdma_netdev_ipoib_info{netdev="ib0.8001",parent="ib0",pkey="0x8001"} 1
# HELP rdma_netdev_mtu_bytes Netdev MTU.
# TYPE rdma_netdev_mtu_bytes gauge
rdma_netdev_mtu_bytes{netdev="ib0"} 4092
rdma_netdev_mtu_bytes{netdev="ib0.8001"} 4092
# HELP rdma_netdev_up 1 when the netdev's operstate is up.
# TYPE rdma_netdev_up gauge
rdma_netdev_up{netdev="ib0"} 1
rdma_netdev_up{netdev="ib0.8001"} 1
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_netdev_info", "rdma_netdev_ipoib_connected_mode",
		"rdma_netdev_ipoib_connected_mode_supported", "rdma_netdev_ipoib_enhanced", "rdma_netdev_ipoib_info", "rdma_netdev_mtu_bytes", "rdma_netdev_up"); err != nil {
		t.Error(err)
	}
	// uverbs0, umad0, issm0 of mlx5_0; no ethtool series (the kernel here
	// has no ib0 with that ifindex)
	if n, _ := testutil.GatherAndCount(g, "rdma_device_char_device_info"); n != 3 {
		t.Errorf("%d char device series, want 3", n)
	}
	if n, _ := testutil.GatherAndCount(g, "rdma_netdev_ethtool_info", "rdma_netdev_ethtool_stat_total", "rdma_netdev_speed_bytes_per_second"); n != 0 {
		t.Errorf("%d ethtool series on a fixture", n)
	}
}

func TestNetdevRoCEAndLegacy(t *testing.T) {
	for _, tc := range []struct {
		host, want string
		metrics    []string
	}{
		{"roce-cx6dx", `
# HELP rdma_netdev_roce_gids GID table entries of the RDMA port naming this netdev, by GID type (RoCE v1, RoCE v2).
# TYPE rdma_netdev_roce_gids gauge
rdma_netdev_roce_gids{device="mlx5_0",gid_type="RoCE v1",netdev="enp59s0f0np0",port="1"} 2
rdma_netdev_roce_gids{device="mlx5_0",gid_type="RoCE v2",netdev="enp59s0f0np0",port="1"} 2
rdma_netdev_roce_gids{device="mlx5_1",gid_type="RoCE v1",netdev="enp59s0f1np1",port="1"} 2
rdma_netdev_roce_gids{device="mlx5_1",gid_type="RoCE v2",netdev="enp59s0f1np1",port="1"} 2
`, []string{"rdma_netdev_roce_gids"}},
		{"mlx4-qdr", `
# HELP rdma_netdev_ipoib_connected_mode 1 when the IPoIB interface runs connected mode, 0 datagram.
# TYPE rdma_netdev_ipoib_connected_mode gauge
rdma_netdev_ipoib_connected_mode{netdev="ib0"} 0
rdma_netdev_ipoib_connected_mode{netdev="ib1"} 1
# HELP rdma_netdev_ipoib_enhanced 1 on enhanced IPoIB (mlx5, ConnectX-4 or later), where connected mode does not exist.
# TYPE rdma_netdev_ipoib_enhanced gauge
rdma_netdev_ipoib_enhanced{netdev="ib0"} 0
rdma_netdev_ipoib_enhanced{netdev="ib1"} 0
# HELP rdma_netdev_ipv6_disabled 1 when IPv6 is disabled on the netdev (net.ipv6.conf.<if>.disable_ipv6); a site policy, not a requirement.
# TYPE rdma_netdev_ipv6_disabled gauge
rdma_netdev_ipv6_disabled{netdev="ib0"} 1
rdma_netdev_ipv6_disabled{netdev="ib1"} 1
`, []string{"rdma_netdev_ipoib_connected_mode", "rdma_netdev_ipoib_enhanced", "rdma_netdev_ipv6_disabled"}},
	} {
		t.Run(tc.host, func(t *testing.T) {
			if err := testutil.GatherAndCompare(gatherOne(t, "netdev", netdevOn(t, tc.host)), strings.NewReader(tc.want), tc.metrics...); err != nil {
				t.Error(err)
			}
		})
	}
}

// Broken host: ibbad0's garbled files lose their series, ibp26s0 is whole.
func TestNetdevBroken(t *testing.T) {
	g := gatherOne(t, "netdev", netdevOn(t, "broken"))
	want := `
# HELP rdma_netdev_mtu_bytes Netdev MTU.
# TYPE rdma_netdev_mtu_bytes gauge
rdma_netdev_mtu_bytes{netdev="ibp26s0"} 4092
# HELP rdma_netdev_carrier Netdev carrier (1 link detected); absent while the interface is down.
# TYPE rdma_netdev_carrier gauge
rdma_netdev_carrier{netdev="ibp26s0"} 1
# HELP rdma_netdev_ipoib_connected_mode 1 when the IPoIB interface runs connected mode, 0 datagram.
# TYPE rdma_netdev_ipoib_connected_mode gauge
rdma_netdev_ipoib_connected_mode{netdev="ibp26s0"} 0
# HELP rdma_netdev_info A netdev carrying IPoIB, RoCE or iWARP and the RDMA device and port it belongs to; always 1.
# TYPE rdma_netdev_info gauge
rdma_netdev_info{device="",kind="ipoib",netdev="ibbad0",pci_address="",port=""} 1
rdma_netdev_info{device="mlx5_0",kind="ipoib",netdev="ibp26s0",pci_address="0000:1a:00.0",port="1"} 1
# HELP rdma_scrape_collector_errors Read and parse errors a collector met in this scrape; their series are left out.
# TYPE rdma_scrape_collector_errors gauge
rdma_scrape_collector_errors{collector="netdev"} 4
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_netdev_mtu_bytes", "rdma_netdev_carrier",
		"rdma_netdev_ipoib_connected_mode", "rdma_netdev_info", "rdma_scrape_collector_errors", "rdma_netdev_ipv6_disabled"); err != nil {
		t.Error(err)
	}
}

// An excluded device's netdev stays listed, unmapped; its char devices go.
func TestNetdevExclude(t *testing.T) {
	g := gatherOne(t, "netdev", netdevOn(t, "ipoib-enhanced", excluding(t, "mlx5_0")))
	want := `
# HELP rdma_netdev_info A netdev carrying IPoIB, RoCE or iWARP and the RDMA device and port it belongs to; always 1.
# TYPE rdma_netdev_info gauge
rdma_netdev_info{device="",kind="ipoib",netdev="ib0",pci_address="0000:17:00.0",port=""} 1
rdma_netdev_info{device="",kind="ipoib",netdev="ib0.8001",pci_address="0000:17:00.0",port=""} 1
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_netdev_info", "rdma_device_char_device_info"); err != nil {
		t.Error(err)
	}
}

func benchEnv(b *testing.B, host string) Env { return hostEnv(b, "../fixtures/hosts/"+host) }

// benchCollector measures one collector on a snapshot per iteration, as
// /metrics runs it.
func benchCollector(b *testing.B, c Collector) {
	inner, h := unwrap(c)
	for b.Loop() {
		if err := inner.Update(context.Background(), h.Snapshot(), &sink{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScrapeNetdev(b *testing.B) {
	env := hostEnv(b, "../fixtures/hosts/dgx-h100", func(o *rdmahost.Options) { o.Ethtool = &netdev.Ethtool{} })
	benchCollector(b, on(env, NewNetdevCollector(env)))
}

// The carrier counters are live: a flap between two scrapes shows in the
// second. No fixture has them (no recorded listing of an RDMA netdev), so a
// copied host gets them: all three on one netdev, only carrier_changes
// (kernels before 4.16) on the other.
func TestNetdevCarrierCounters(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, hostfstest.FixtureDir(t, "roce-cx6dx"), root)
	write := func(netdev, file, value string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "sys/class/net", netdev, file), []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("enp59s0f0np0", "carrier_changes", "1")
	write("enp59s0f0np0", "carrier_up_count", "1")
	write("enp59s0f0np0", "carrier_down_count", "0")
	write("enp59s0f1np1", "carrier_changes", "1")
	env := hostEnv(t, root)
	g := gatherOne(t, "netdev", on(env, NewNetdevCollector(env)))
	names := []string{"rdma_netdev_carrier_changes_total", "rdma_netdev_carrier_up_total", "rdma_netdev_carrier_down_total"}
	head := `
# HELP rdma_netdev_carrier_changes_total Carrier transitions (up or down) the kernel counted since the netdev was registered.
# TYPE rdma_netdev_carrier_changes_total counter
rdma_netdev_carrier_changes_total{netdev="enp59s0f0np0"} %s
rdma_netdev_carrier_changes_total{netdev="enp59s0f1np1"} 1
# HELP rdma_netdev_carrier_down_total Carrier down transitions since the netdev was registered (carrier_down_count, Linux 4.16+); absent on older kernels.
# TYPE rdma_netdev_carrier_down_total counter
rdma_netdev_carrier_down_total{netdev="enp59s0f0np0"} %s
# HELP rdma_netdev_carrier_up_total Carrier up transitions since the netdev was registered (carrier_up_count, Linux 4.16+); absent on older kernels.
# TYPE rdma_netdev_carrier_up_total counter
rdma_netdev_carrier_up_total{netdev="enp59s0f0np0"} %s
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(fmt.Sprintf(head, "1", "0", "1")), names...); err != nil {
		t.Error(err)
	}
	write("enp59s0f0np0", "carrier_changes", "3")
	write("enp59s0f0np0", "carrier_up_count", "2")
	write("enp59s0f0np0", "carrier_down_count", "1")
	if err := testutil.GatherAndCompare(g, strings.NewReader(fmt.Sprintf(head, "3", "1", "2")), names...); err != nil {
		t.Errorf("after a flap: %v", err)
	}

	// The fixtures have no such files: no series, no error.
	g = gatherOne(t, "netdev", netdevOn(t, "roce-cx6dx"))
	if n, _ := testutil.GatherAndCount(g, names...); n != 0 {
		t.Errorf("%d carrier counter series on a fixture without the files", n)
	}
}
