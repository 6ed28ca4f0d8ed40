// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// fakeDevlink answers like a kernel with one mlx5 instance per PCI
// function of the numa-remote fixture, plus one the filter does not
// keep; the versions are the real ones of a ConnectX-7 PF (Jiri Pirko's
// mlx5 devlink info patch, netdev 2025-03-20), the stored one of
// 0000:c8:00.0 a burned image not activated.
type fakeDevlink struct{ infos, dumps int }

func encodeAttrs(f func(ae *netlink.AttributeEncoder)) []byte {
	ae := netlink.NewAttributeEncoder()
	f(ae)
	b, err := ae.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func reporterAttrs(dev, name string, state uint8, errs uint64) []byte {
	return encodeAttrs(func(ae *netlink.AttributeEncoder) {
		ae.String(unix.DEVLINK_ATTR_BUS_NAME, "pci")
		ae.String(unix.DEVLINK_ATTR_DEV_NAME, dev)
		ae.Nested(unix.DEVLINK_ATTR_HEALTH_REPORTER, func(n *netlink.AttributeEncoder) error {
			n.String(unix.DEVLINK_ATTR_HEALTH_REPORTER_NAME, name)
			n.Uint8(unix.DEVLINK_ATTR_HEALTH_REPORTER_STATE, state)
			n.Uint64(unix.DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT, errs)
			n.Uint64(unix.DEVLINK_ATTR_HEALTH_REPORTER_RECOVER_COUNT, 0)
			return nil
		})
	})
}

func (f *fakeDevlink) Execute(_ context.Context, cmd uint8, _ netlink.HeaderFlags, attrs []byte) ([][]byte, error) {
	switch cmd {
	case unix.DEVLINK_CMD_HEALTH_REPORTER_GET:
		f.dumps++
		return [][]byte{
			reporterAttrs("0000:98:00.0", "fw_fatal", 0, 0),
			reporterAttrs("0000:c8:00.0", "fw", 1, 7),
			reporterAttrs("0000:ff:00.0", "fw", 1, 1),
		}, nil
	case unix.DEVLINK_CMD_INFO_GET:
		f.infos++
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
		return [][]byte{encodeAttrs(func(ae *netlink.AttributeEncoder) {
			ae.String(unix.DEVLINK_ATTR_BUS_NAME, "pci")
			ae.String(unix.DEVLINK_ATTR_DEV_NAME, dev)
			for typ, v := range map[uint16]string{unix.DEVLINK_ATTR_INFO_VERSION_RUNNING: "28.41.1000", unix.DEVLINK_ATTR_INFO_VERSION_STORED: stored} {
				ae.Nested(typ, func(n *netlink.AttributeEncoder) error {
					n.String(unix.DEVLINK_ATTR_INFO_VERSION_NAME, "fw.version")
					n.String(unix.DEVLINK_ATTR_INFO_VERSION_VALUE, v)
					return nil
				})
			}
		})}, nil
	}
	return nil, unix.EOPNOTSUPP
}

func TestDevlinkJoinsByPCI(t *testing.T) {
	f := &fakeDevlink{}
	h, _, _, now := faultyHost(t, Options{Devlink: f, SlowRefresh: time.Minute})
	ctx := context.Background()
	dl, err := h.Snapshot().Devlink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(dl.Devices) != 2 {
		t.Fatalf("devices %+v", dl.Devices)
	}
	d0, d1 := dl.Devices[0], dl.Devices[1]
	if d0.Name != "mlx5_0" || d0.PCI != "0000:98:00.0" || len(d0.Reporters) != 1 || d0.Reporters[0].Name != "fw_fatal" {
		t.Errorf("mlx5_0: %+v", d0)
	}
	if d1.Name != "mlx5_1" || len(d1.Reporters) != 1 || d1.Reporters[0].Errors.V != 7 {
		t.Errorf("mlx5_1: %+v (the function no RDMA device sits on must not join)", d1)
	}
	if d0.Info == nil || d1.Info == nil || d1.Info.Stored[0].Value != "28.43.1014" || d0.Info.Handle.Device != "0000:98:00.0" {
		t.Errorf("infos %+v %+v", d0.Info, d1.Info)
	}
	// The reporters are live, the versions slow.
	if _, err := h.Snapshot().Devlink(ctx); err != nil {
		t.Fatal(err)
	}
	if f.dumps != 2 || f.infos != 2 {
		t.Errorf("after two snapshots: %d dumps, %d INFO_GETs; want 2 and 2 (one per device, cached)", f.dumps, f.infos)
	}
	*now = now.Add(2 * time.Minute)
	if _, err := h.Snapshot().Devlink(ctx); err != nil {
		t.Fatal(err)
	}
	if f.infos != 4 {
		t.Errorf("after the slow refresh: %d INFO_GETs, want 4", f.infos)
	}
}

func TestDevlinkNotLive(t *testing.T) {
	h, _, _, _ := faultyHost(t, Options{})
	if dl, err := h.Snapshot().Devlink(context.Background()); dl != nil || !errors.Is(err, ErrNotLive) {
		t.Errorf("fixture tree: %v, %v; want ErrNotLive", dl, err)
	}
}

// The device filter: an excluded device's function gets no INFO_GET.
func TestDevlinkHonoursFilter(t *testing.T) {
	f := &fakeDevlink{}
	filter, err := NewDeviceFilter("", "^mlx5_1$")
	if err != nil {
		t.Fatal(err)
	}
	h, _, _, _ := faultyHost(t, Options{Devlink: f, Devices: filter})
	dl, err := h.Snapshot().Devlink(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(dl.Devices) != 1 || dl.Devices[0].Name != "mlx5_0" || f.infos != 1 {
		t.Errorf("devices %+v, %d INFO_GETs", dl.Devices, f.infos)
	}
}
