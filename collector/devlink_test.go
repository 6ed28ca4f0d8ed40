// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
)

// devlinkKernel answers as a kernel whose mlx5 functions are those of the
// numa-remote fixture: mlx5_0 (0000:98:00.0) healthy with the real
// ConnectX-7 versions of Jiri Pirko's mlx5 devlink info patch (netdev,
// 2025-03-20: running and stored 28.41.1000), mlx5_1 (0000:c8:00.0) with
// its tx reporter on port 1 in error and a flashed image not activated.
type devlinkKernel struct{}

func (devlinkKernel) Execute(_ context.Context, cmd uint8, _ netlink.HeaderFlags, attrs []byte) ([][]byte, error) {
	enc := func(f func(ae *netlink.AttributeEncoder)) []byte {
		ae := netlink.NewAttributeEncoder()
		f(ae)
		b, _ := ae.Encode()
		return b
	}
	rep := func(dev string, port bool, name string, state uint8, errs, recs uint64) []byte {
		return enc(func(ae *netlink.AttributeEncoder) {
			ae.String(unix.DEVLINK_ATTR_BUS_NAME, "pci")
			ae.String(unix.DEVLINK_ATTR_DEV_NAME, dev)
			if port {
				ae.Uint32(unix.DEVLINK_ATTR_PORT_INDEX, 1)
			}
			ae.Nested(unix.DEVLINK_ATTR_HEALTH_REPORTER, func(n *netlink.AttributeEncoder) error {
				n.String(unix.DEVLINK_ATTR_HEALTH_REPORTER_NAME, name)
				n.Uint8(unix.DEVLINK_ATTR_HEALTH_REPORTER_STATE, state)
				n.Uint64(unix.DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT, errs)
				n.Uint64(unix.DEVLINK_ATTR_HEALTH_REPORTER_RECOVER_COUNT, recs)
				return nil
			})
		})
	}
	switch cmd {
	case unix.DEVLINK_CMD_HEALTH_REPORTER_GET:
		return [][]byte{rep("0000:98:00.0", false, "fw", 0, 0, 0), rep("0000:c8:00.0", true, "tx", 1, 3, 2)}, nil
	case unix.DEVLINK_CMD_INFO_GET:
		ad, _ := netlink.NewAttributeDecoder(attrs)
		var dev string
		for ad.Next() {
			if ad.Type() == unix.DEVLINK_ATTR_DEV_NAME {
				dev = ad.String()
			}
		}
		stored := "28.41.1000"
		if dev == "0000:c8:00.0" {
			stored = "28.43.1014"
		}
		return [][]byte{enc(func(ae *netlink.AttributeEncoder) {
			ae.String(unix.DEVLINK_ATTR_BUS_NAME, "pci")
			ae.String(unix.DEVLINK_ATTR_DEV_NAME, dev)
			ver := func(typ uint16, v string) {
				ae.Nested(typ, func(n *netlink.AttributeEncoder) error {
					n.String(unix.DEVLINK_ATTR_INFO_VERSION_NAME, "fw.version")
					n.String(unix.DEVLINK_ATTR_INFO_VERSION_VALUE, v)
					return nil
				})
			}
			ver(unix.DEVLINK_ATTR_INFO_VERSION_RUNNING, "28.41.1000")
			ver(unix.DEVLINK_ATTR_INFO_VERSION_STORED, stored)
		})}, nil
	}
	return nil, unix.EOPNOTSUPP
}

func TestDevlinkCollector(t *testing.T) {
	env := hostEnv(t, "../fixtures/hosts/numa-remote", func(o *host.Options) { o.Devlink = devlinkKernel{} })
	g := gatherOne(t, "devlink", on(env, NewDevlinkCollector(env)))
	want := `
# HELP rdma_device_firmware_pending 1 when the firmware component's stored version differs from the running one (burned, not activated), 0 when equal.
# TYPE rdma_device_firmware_pending gauge
rdma_device_firmware_pending{component="fw.version",device="mlx5_0"} 0
rdma_device_firmware_pending{component="fw.version",device="mlx5_1"} 1
# HELP rdma_devlink_health_reporter_errors_total Errors the driver reported to the health reporter since it was registered (driver load).
# TYPE rdma_devlink_health_reporter_errors_total counter
rdma_devlink_health_reporter_errors_total{device="mlx5_0",reporter="fw"} 0
rdma_devlink_health_reporter_errors_total{device="mlx5_1",reporter="tx"} 3
# HELP rdma_devlink_health_reporter_state 1 when the device's devlink health reporter is healthy, 0 in error (mlx5 fw, fw_fatal, tx, rx, vnic).
# TYPE rdma_devlink_health_reporter_state gauge
rdma_devlink_health_reporter_state{device="mlx5_0",reporter="fw"} 1
rdma_devlink_health_reporter_state{device="mlx5_1",reporter="tx"} 0
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_device_firmware_pending", "rdma_devlink_health_reporter_state", "rdma_devlink_health_reporter_errors_total"); err != nil {
		t.Error(err)
	}
	n, err := testutil.GatherAndCount(g, "rdma_devlink_health_reporter_recovers_total", "rdma_device_firmware_version_info", "rdma_devlink_requests", "rdma_devlink_skipped_values")
	if err != nil || n != 2+2+2+2 {
		t.Errorf("recovers, version info, requests, skipped: %d series (%v), want 8", n, err)
	}
}

// A fixture tree: no devlink series, and no error.
func TestDevlinkCollectorNotLive(t *testing.T) {
	env := hostEnv(t, "../fixtures/hosts/numa-remote")
	g := gatherOne(t, "devlink", on(env, NewDevlinkCollector(env)))
	n, err := testutil.GatherAndCount(g, "rdma_devlink_health_reporter_state", "rdma_device_firmware_pending", "rdma_devlink_requests")
	if err != nil || n != 0 {
		t.Errorf("%d devlink series on a fixture tree (%v)", n, err)
	}
	if err := testutil.GatherAndCompare(g, strings.NewReader("# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).\n# TYPE rdma_scrape_collector_success gauge\nrdma_scrape_collector_success{collector=\"devlink\"} 1\n"), "rdma_scrape_collector_success"); err != nil {
		t.Error(err)
	}
}

// A live host without RDMA (plain-vm: no /sys/class/infiniband) has no
// device to ask devlink about: no series and success 1, as the infiniband
// collector on the same host (issue 36: a failing devlink collector paged
// every node without RDMA of a mixed cluster).
func TestDevlinkCollectorNoRDMA(t *testing.T) {
	env := hostEnv(t, "../fixtures/hosts/plain-vm", func(o *host.Options) { o.Devlink = devlinkKernel{} })
	g := gatherOne(t, "devlink", on(env, NewDevlinkCollector(env)))
	n, err := testutil.GatherAndCount(g, "rdma_devlink_health_reporter_state", "rdma_device_firmware_pending", "rdma_devlink_requests")
	if err != nil || n != 0 {
		t.Errorf("%d devlink series on a host without RDMA (%v)", n, err)
	}
	if err := testutil.GatherAndCompare(g, strings.NewReader("# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).\n# TYPE rdma_scrape_collector_success gauge\nrdma_scrape_collector_success{collector=\"devlink\"} 1\n"), "rdma_scrape_collector_success"); err != nil {
		t.Error(err)
	}
}
