// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

func fixtureSys(host string) hostfs.FS {
	return hostfs.Dir("../../../fixtures/hosts/" + host + "/sys")
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
		{"EIO on gids/0", map[string]error{port + "/gids/0": syscall.EIO}, nil, func(t *testing.T, d *Device) {
			if d.Ports[0].PortGUID.OK || !d.Ports[0].LinkLayer.OK {
				t.Errorf("port GUID %+v link layer %+v", d.Ports[0].PortGUID, d.Ports[0].LinkLayer)
			}
		}},
		// Every InfiniBand port has GID 0: missing is an error, not a port
		// without a GUID.
		{"gids/0 missing on an InfiniBand port", map[string]error{port + "/gids/0": fs.ErrNotExist}, nil, func(t *testing.T, d *Device) {
			if d.Ports[0].PortGUID.OK {
				t.Errorf("port GUID %+v", d.Ports[0].PortGUID)
			}
		}},
		{"zero GID 0", nil, map[string][]byte{port + "/gids/0": []byte("fe80:0000:0000:0000:0000:0000:0000:0000\n")}, func(t *testing.T, d *Device) {
			if d.Ports[0].PortGUID.OK {
				t.Errorf("port GUID %+v from a zero GID", d.Ports[0].PortGUID)
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

// recordedIbstat maps a fixture host to the recorded ibstat output it was
// built from (fixtures/recorded/README.md).
var recordedIbstat = map[string]string{
	"mlx4-ddr-polling":  "ibstat-mlx4-mt25418-ddr-port2-polling-archwiki.txt",
	"cx4lx-roce-cx6-ib": "ibstat-n013-cx4lx-cx6-nccl-tests-issue350.txt",
	"qib-qdr":           "ibstat-qib0-qle7340-tensorflow-chef.txt",
	"gb300-xdr":         "ibstat-cx8-mt4131-b300-host.txt",
	"irdma-e810":        "ibstat-irdma-e810-roce-mtl-rdma-doc.txt",
	"rxe-softroce":      "ibstat-rxe0-linux-rdma-2022-01-19.txt",
	"efa-aws":           "ibstat-efa_0-amzn-drivers-issue114.txt",
}

// ibstatPort is what a recorded ibstat printed for one port.
type ibstatPort struct{ guid, linkLayer string }

// parseRecordedIbstat reads a recorded ibstat: node GUID -> port -> its
// "Port GUID" and "Link layer". Lines may carry a comment prefix (the qib
// recording is a Chef recipe's comment).
func parseRecordedIbstat(t *testing.T, file string) map[string]map[int]ibstatPort {
	t.Helper()
	b, err := os.ReadFile("../../../fixtures/recorded/" + file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]ibstatPort{}
	var ports map[int]ibstatPort
	port := 0
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch {
		case k == "Node GUID":
			ports = map[int]ibstatPort{}
			out[v] = ports
			port = 0
		case ports == nil:
		case strings.HasPrefix(k, "Port ") && v == "":
			if n, err := strconv.Atoi(strings.TrimPrefix(k, "Port ")); err == nil {
				port = n
				ports[n] = ibstatPort{}
			}
		case port == 0:
		case k == "Port GUID":
			ports[port] = ibstatPort{guid: v, linkLayer: ports[port].linkLayer}
		case k == "Link layer":
			ports[port] = ibstatPort{guid: ports[port].guid, linkLayer: v}
		}
	}
	return out
}

// TestPortGUIDIsIbstats: on the fixture hosts built from a recorded ibstat,
// each InfiniBand port's GUID is the "Port GUID" ibstat printed for it (the
// devices are matched by node GUID: the fixtures rename some), and a
// RoCE or EFA port has none although ibstat prints one (its GID 0's low
// half is an address). TestIbstatAgrees (e2e) runs the real ibstat on
// every fixture host.
func TestPortGUIDIsIbstats(t *testing.T) {
	for host, file := range recordedIbstat {
		t.Run(host, func(t *testing.T) {
			rec := parseRecordedIbstat(t, file)
			c := readClass(t, fixtureSys(host), nil)
			compared := 0
			for _, d := range c.Devices {
				ports, ok := rec[d.NodeGUID.V]
				if !ok {
					continue
				}
				for _, p := range d.Ports {
					want, ok := ports[p.Num]
					if !ok {
						t.Errorf("%s/%d: not in %s", d.Name, p.Num, file)
						continue
					}
					if want.guid == "" || want.linkLayer == "" {
						t.Fatalf("%s port %d: no Port GUID or Link layer parsed: %+v", file, p.Num, want)
					}
					switch {
					case want.linkLayer != LinkLayerInfiniBand && p.PortGUID.OK:
						t.Errorf("%s/%d (%s): port GUID %q, want none", d.Name, p.Num, want.linkLayer, p.PortGUID.V)
					case want.linkLayer == LinkLayerInfiniBand && p.PortGUID != some(want.guid):
						t.Errorf("%s/%d: port GUID %+v, ibstat %q", d.Name, p.Num, p.PortGUID, want.guid)
					}
					compared++
				}
			}
			if compared == 0 {
				t.Fatalf("no device of %s is in %s", host, file)
			}
		})
	}
}

// TestPortGUIDDualPort: a dual-port mlx4's ports have GUIDs of their own,
// neither the node GUID. Port 1's is ibstat's "Port GUID" in
// shared/realdata/tools/ibstat-mlx4-qdr-advancedclustering.txt (node
// 0x0002c9030031fdc0); port 2's is the fixture's (fixtures/README.md).
func TestPortGUIDDualPort(t *testing.T) {
	c := readClass(t, fixtureSys("mlx4-qdr"), nil)
	d := device(t, c, "mlx4_0")
	if d.NodeGUID.V != "0x0002c9030031fdc0" || len(d.Ports) != 2 {
		t.Fatalf("node GUID %+v, %d ports", d.NodeGUID, len(d.Ports))
	}
	for i, want := range []string{"0x0002c9030031fdc1", "0x0002c9030031fdc2"} {
		if got := d.Ports[i].PortGUID; got != some(want) {
			t.Errorf("port %d GUID %+v, want %s", d.Ports[i].Num, got, want)
		}
	}
}

// TestPortGUIDOnlyInfiniBand: on every fixture host, a port has a port
// GUID exactly when it is an InfiniBand port of a CA (not RoCE, iWARP,
// EFA's "Unknown", nor i40iw's "InfiniBand" RNIC port), and reading it
// adds no error.
func TestPortGUIDOnlyInfiniBand(t *testing.T) {
	entries, err := os.ReadDir("../../../fixtures/hosts")
	if err != nil {
		t.Fatal(err)
	}
	ib := 0
	for _, e := range entries {
		c, err := Read(context.Background(), fixtureSys(e.Name()), nil)
		if errors.Is(err, ErrNoClass) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		for _, err := range c.Errors() {
			if strings.Contains(err.Error(), "gids/0") {
				t.Errorf("%s: %v", e.Name(), err)
			}
		}
		for _, d := range c.Devices {
			rnic := d.NodeType.OK && d.NodeType.V.Value == NodeTypeRNIC
			for _, p := range d.Ports {
				want := p.LinkLayer.V == LinkLayerInfiniBand && !rnic
				if p.PortGUID.OK != want {
					t.Errorf("%s %s/%d (%s, %s): port GUID %+v", e.Name(), d.Name, p.Num, p.LinkLayer.V, d.NodeType.V.Name, p.PortGUID)
				}
				if p.PortGUID.OK {
					ib++
				}
			}
		}
	}
	if ib == 0 {
		t.Fatal("no InfiniBand port in the fixtures")
	}
}
