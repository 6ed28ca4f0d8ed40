// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/hostfs/hostfstest"
)

func fixtureSys(host string) hostfs.FS {
	return hostfs.Dir("../../fixtures/hosts/" + host + "/sys")
}

func readClass(t *testing.T, sys hostfs.FS, keep func(string) bool) *Class {
	t.Helper()
	c, err := Read(context.Background(), sys, keep)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func device(t *testing.T, c *Class, name string) *Device {
	t.Helper()
	for i := range c.Devices {
		if c.Devices[i].Name == name {
			return &c.Devices[i]
		}
	}
	t.Fatalf("no device %s", name)
	return nil
}

func counterValue(cs []Counter, name string) (uint64, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

func TestReadDGX(t *testing.T) {
	c := readClass(t, fixtureSys("dgx-h100"), nil)
	if len(c.Devices) != 9 {
		t.Fatalf("%d devices, want 9", len(c.Devices))
	}
	if errs := c.Errors(); len(errs) != 0 {
		t.Fatalf("errors on a healthy host: %v", errs)
	}
	d := device(t, c, "mlx5_1")
	if d.HCAType.V != "MT4129" || d.BoardID.V != "MT_0000000838" || d.FirmwareVer.V != "28.41.1000" {
		t.Errorf("mlx5_1 attributes: %+v", d)
	}
	if !d.NodeType.OK || d.NodeType.V.Value != NodeTypeCA || !strings.HasPrefix(d.NodeGUID.V, "0x") {
		t.Errorf("mlx5_1 node type/GUID: %+v %+v", d.NodeType, d.NodeGUID)
	}
	if d.PCIAddress == "" {
		t.Error("no PCI address from the device link")
	}
	p := d.Ports[0]
	if p.Num != 1 || p.State.V.Value != StateActive || p.PhysState.V.Value != PhysStateLinkUp {
		t.Errorf("port: %+v", p)
	}
	if p.Rate.V != (Rate{Gbps: 400, Width: 4, Speed: "NDR"}) {
		t.Errorf("rate %+v", p.Rate)
	}
	// Real values recorded in leptonai/gpud PR #943.
	if v, ok := counterValue(p.Counters, "link_downed"); !ok || v != 255 {
		t.Errorf("link_downed = %d, %v; want 255", v, ok)
	}
	if v, ok := counterValue(p.Counters, "port_rcv_data"); !ok || v != 205128687774249 {
		t.Errorf("port_rcv_data = %d, %v", v, ok)
	}
	if _, ok := counterValue(p.HWCounters, "lifespan"); ok {
		t.Error("hw_counters/lifespan is a cache setting, not a counter")
	}
	if _, ok := counterValue(p.HWCounters, "out_of_sequence"); !ok {
		t.Error("hw counter out_of_sequence missing")
	}
	if !p.Extended() {
		t.Error("CX-7 has the extended PMA counters")
	}
	if p.Netdev == "" {
		t.Error("IPoIB netdev not mapped")
	}
	bond := device(t, c, "mlx5_bond_0")
	if bond.Ports[0].LinkLayer.V != "Ethernet" || bond.Ports[0].Netdev != "bond0" {
		t.Errorf("bond port: %+v", bond.Ports[0])
	}
}

func TestReadNoPMA(t *testing.T) {
	c := readClass(t, fixtureSys("iwarp-i40iw"), nil)
	d := device(t, c, "i40iw0")
	if errs := c.Errors(); len(errs) != 0 {
		t.Errorf("N/A (no PMA) counters must be absent, not errors: %v", errs)
	}
	if n := len(d.Ports[0].Counters); n != 0 {
		t.Errorf("%d counters read from a device without PMA, want none", n)
	}
	if d.NodeType.V.Value != NodeTypeRNIC || d.Ports[0].Rate.V.Speed != "SDR" {
		t.Errorf("i40iw0: %+v %+v", d.NodeType, d.Ports[0].Rate)
	}
}

func TestReadFilter(t *testing.T) {
	sys := &hostfstest.Faulty{Base: fixtureSys("dgx-h100")}
	c := readClass(t, sys, func(n string) bool { return n != "mlx5_4" })
	if len(c.Devices) != 8 {
		t.Errorf("%d devices, want 8", len(c.Devices))
	}
	if n := sys.Reads(ClassDir + "/mlx5_4/fw_ver"); n != 0 {
		t.Errorf("excluded device was read %d times", n)
	}
}

func TestReadNoClass(t *testing.T) {
	_, err := Read(context.Background(), hostfs.Dir(t.TempDir()), nil)
	if !errors.Is(err, ErrNoClass) {
		t.Errorf("err = %v, want ErrNoClass", err)
	}
}

// TestReadFaults injects the kernel's failure modes through the FS seam:
// every fault leaves its own value absent, names the file in an error, and
// leaves everything else intact.
func TestReadFaults(t *testing.T) {
	dev := ClassDir + "/mlx5_0"
	port := dev + "/ports/1"
	for _, tc := range []struct {
		name    string
		errs    map[string]error
		content map[string][]byte
		check   func(t *testing.T, d *Device)
	}{
		{"EIO on a counter", map[string]error{port + "/counters/symbol_error": syscall.EIO}, nil, func(t *testing.T, d *Device) {
			if _, ok := counterValue(d.Ports[0].Counters, "symbol_error"); ok {
				t.Error("symbol_error present")
			}
			if _, ok := counterValue(d.Ports[0].Counters, "link_downed"); !ok {
				t.Error("link_downed lost")
			}
		}},
		{"EINVAL on a hw counter", map[string]error{port + "/hw_counters/out_of_sequence": syscall.EINVAL}, nil, func(t *testing.T, d *Device) {
			if _, ok := counterValue(d.Ports[0].HWCounters, "out_of_sequence"); ok {
				t.Error("out_of_sequence present")
			}
		}},
		{"EACCES on rate", map[string]error{port + "/rate": syscall.EACCES}, nil, func(t *testing.T, d *Device) {
			if d.Ports[0].Rate.OK || !d.Ports[0].State.OK {
				t.Errorf("rate %+v state %+v", d.Ports[0].Rate, d.Ports[0].State)
			}
		}},
		{"counter vanished after listing", map[string]error{port + "/counters/port_xmit_wait": fs.ErrNotExist}, nil, func(t *testing.T, d *Device) {
			if _, ok := counterValue(d.Ports[0].Counters, "port_xmit_wait"); ok {
				t.Error("port_xmit_wait present")
			}
		}},
		{"ports directory unreadable", map[string]error{dev + "/ports": syscall.ENOTDIR}, nil, func(t *testing.T, d *Device) {
			if len(d.Ports) != 0 || !d.FirmwareVer.OK {
				t.Errorf("ports %d, fw %+v", len(d.Ports), d.FirmwareVer)
			}
		}},
		{"garbage", nil, map[string][]byte{port + "/state": []byte("garbage\n"), dev + "/node_guid": []byte("zzzz\n")}, func(t *testing.T, d *Device) {
			if d.Ports[0].State.OK || d.NodeGUID.OK || !d.SysImageGUID.OK {
				t.Errorf("state %+v guid %+v", d.Ports[0].State, d.NodeGUID)
			}
		}},
		{"empty fw_ver", nil, map[string][]byte{dev + "/fw_ver": {}}, func(t *testing.T, d *Device) {
			if d.FirmwareVer.OK {
				t.Error("empty fw_ver accepted")
			}
		}},
		// qib, rxe and siw: empty by design, a value and no error.
		{"fw_ver holding only a newline", nil, map[string][]byte{dev + "/fw_ver": []byte("\n")}, func(t *testing.T, d *Device) {
			if d.FirmwareVer != some("") {
				t.Errorf("fw_ver %+v, want present and empty", d.FirmwareVer)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := &hostfstest.Faulty{Base: fixtureSys("dgx-h100"), Errors: tc.errs, Contents: tc.content}
			c := readClass(t, sys, nil)
			d := device(t, c, "mlx5_0")
			tc.check(t, d)
			want := len(tc.errs) + len(tc.content)
			if strings.Contains(tc.name, "only a newline") {
				want = 0
			}
			if len(d.Errors) != want {
				t.Fatalf("%d errors, want %d: %v", len(d.Errors), want, d.Errors)
			}
			for path := range tc.errs {
				if !strings.Contains(d.Errors[0].Error(), path) {
					t.Errorf("error %q does not name %s", d.Errors[0], path)
				}
			}
			for i := range c.Devices {
				if c.Devices[i].Name != "mlx5_0" && len(c.Devices[i].Errors) != 0 {
					t.Errorf("fault spread to %s: %v", c.Devices[i].Name, c.Devices[i].Errors)
				}
			}
		})
	}
}

func TestReadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, fixtureSys("dgx-h100"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
