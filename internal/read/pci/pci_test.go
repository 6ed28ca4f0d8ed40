// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pci

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

func TestParseLinkSpeed(t *testing.T) {
	for _, tc := range []struct {
		in      string
		gts     float64
		known   bool
		wantErr bool
	}{
		{in: "16.0 GT/s PCIe\n", gts: 16, known: true},
		{in: "32.0 GT/s PCIe", gts: 32, known: true},
		{in: "2.5 GT/s PCIe", gts: 2.5, known: true},
		{in: "64.0 GT/s PCIe", gts: 64, known: true},
		{in: "8 GT/s", gts: 8, known: true}, // before 4.20
		{in: "2.5 GT/s", gts: 2.5, known: true},
		{in: "Unknown", known: false},
		{in: "Unknown speed\n", known: false},
		{in: "16.0 Gb/s", wantErr: true},
		{in: "GT/s", wantErr: true},
		{in: " GT/s PCIe", wantErr: true},
		{in: "-8 GT/s", wantErr: true},
		{in: "0 GT/s", wantErr: true},
		{in: "NaN GT/s", wantErr: true},
		{in: "1e9 GT/s", wantErr: true},
		{in: "", wantErr: true},
		{in: "fast", wantErr: true},
	} {
		got, err := ParseLinkSpeed(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseLinkSpeed(%q) = %+v, want error", tc.in, got)
			}
			continue
		}
		if err != nil || got.GTs != tc.gts || got.Known != tc.known {
			t.Errorf("ParseLinkSpeed(%q) = %+v, %v; want %v %v", tc.in, got, err, tc.gts, tc.known)
		}
	}
}

func TestParseLinkWidthAndNUMA(t *testing.T) {
	for in, want := range map[string]int{"16\n": 16, "8": 8, "0": 0, "1": 1, "32": 32} {
		if got, err := ParseLinkWidth(in); err != nil || got != want {
			t.Errorf("ParseLinkWidth(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "x16", "-1", "+4", "65", "16 lanes", "garbage"} {
		if got, err := ParseLinkWidth(in); err == nil {
			t.Errorf("ParseLinkWidth(%q) = %d, want error", in, got)
		}
	}
	for in, want := range map[string]int{"0\n": 0, "1": 1, "-1\n": -1, "7": 7} {
		if got, err := ParseNUMANode(in); err != nil || got != want {
			t.Errorf("ParseNUMANode(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "-2", "garbage", "node0", "1.0", "99999999"} {
		if got, err := ParseNUMANode(in); err == nil {
			t.Errorf("ParseNUMANode(%q) = %d, want error", in, got)
		}
	}
}

func TestIsAddress(t *testing.T) {
	for in, want := range map[string]bool{
		"0000:5e:00.0": true, "8b76:00:02.0": true, "10000:e0:00.0": true, "0000:01:00.7": true,
		"0000:01:00.8": false, "0000:5E:00.0": false, "000:5e:00.0": false, "0000:5e:00": false,
		"0000:5e:00.0x": false, "mlx5_0": false, "": false, "0000-5e-00.0": false, "0000:5e:0g.0": false,
	} {
		if got := IsAddress(in); got != want {
			t.Errorf("IsAddress(%q) = %v", in, got)
		}
	}
}

func fixtureHost(t testing.TB, name string) hostfs.Host { return hostfstest.Fixture(t, name) }

// summary renders a function's facts; "?" for an absent value.
func summary(f Function) string {
	o := func(ok bool, v any) string {
		if !ok {
			return "?"
		}
		return fmt.Sprint(v)
	}
	deg, ok := f.LinkDegraded()
	return fmt.Sprintf("%s numa=%s cpus=%s link=%s/%s x%s/%s degraded=%s msi=%d", f.Address,
		o(f.NUMANode.OK, f.NUMANode.V), o(f.LocalCPUs.OK, f.LocalCPUs.V), o(f.LinkSpeed.OK, f.LinkSpeed.V),
		o(f.MaxLinkSpeed.OK, f.MaxLinkSpeed.V), o(f.LinkWidth.OK, f.LinkWidth.V), o(f.MaxLinkWidth.OK, f.MaxLinkWidth.V),
		o(ok, deg), len(f.MSIIRQs))
}

func TestReadDevicesFixtures(t *testing.T) {
	for _, tc := range []struct {
		host string
		want map[string]string
		errs []string
	}{
		{host: "dgx-h100", want: map[string]string{
			"mlx5_0":      "0000:1a:00.0 numa=0 cpus=0-55,112-167 link=32/32 x16/16 degraded=false msi=17",
			"mlx5_9":      "0000:dc:00.0 numa=1 cpus=56-111,168-223 link=32/32 x16/16 degraded=false msi=17",
			"mlx5_bond_0": "0000:9d:00.0 numa=1 cpus=56-111,168-223 link=32/32 x16/16 degraded=false msi=17",
		}},
		{host: "numa-remote", want: map[string]string{
			"mlx5_0": "0000:98:00.0 numa=1 cpus=16-31,48-61 link=32/32 x16/16 degraded=false msi=17",
			"mlx5_1": "0000:c8:00.0 numa=1 cpus=16-31,48-61 link=16/32 x16/16 degraded=true msi=17",
		}},
		{host: "iwarp-i40iw", want: map[string]string{
			"i40iw0": "0000:09:00.0 numa=-1 cpus=0-15 link=8/8 x4/4 degraded=false msi=10",
		}},
		{host: "mlx4-qdr", want: map[string]string{
			"mlx4_0": "0000:81:00.0 numa=1 cpus=8-15,24-31 link=8/8 x8/8 degraded=false msi=9",
		}},
		{host: "broken", want: map[string]string{
			"mlx5_0": "0000:1a:00.0 numa=0 cpus=0-55,112-167 link=32/32 x16/16 degraded=false msi=17",
			"mlx5_2": "0000:4d:00.0 numa=? cpus=0-55,112-167 link=32/32 x16/16 degraded=false msi=17",
			"mlx5_3": "0000:5e:00.0 numa=0 cpus=0-55,112-167 link=?/32 x16/16 degraded=? msi=17",
			"mlx5_4": " numa=? cpus=? link=?/? x?/? degraded=? msi=0", // dangling: no function
		}, errs: []string{`mlx5_2/device/numa_node: numa_node "garbage"`}},
	} {
		t.Run(tc.host, func(t *testing.T) {
			devs, err := ReadDevices(context.Background(), fixtureHost(t, tc.host).Sys, nil)
			if err != nil {
				t.Fatal(err)
			}
			var errs []error
			for _, d := range devs {
				errs = append(errs, d.PCI.Errors...)
				want, ok := tc.want[d.Name]
				if !ok {
					continue
				}
				if got := summary(d.PCI); got != want {
					t.Errorf("%s:\n got %s\nwant %s", d.Name, got, want)
				}
				delete(tc.want, d.Name)
			}
			if len(tc.want) > 0 {
				t.Errorf("devices not read: %v", tc.want)
			}
			if len(errs) != len(tc.errs) || !strings.Contains(fmt.Sprint(errs), strings.Join(tc.errs, "")) {
				t.Errorf("errors %v, want %v", errs, tc.errs)
			}
		})
	}
}

func TestReadDevicesFaults(t *testing.T) {
	h := fixtureHost(t, "numa-remote")
	sys := &hostfstest.Faulty{Base: h.Sys, Errors: map[string]error{
		"class/infiniband/mlx5_0/device/current_link_speed": syscall.EIO,    // unreadable: error
		"class/infiniband/mlx5_0/device/max_link_width":     syscall.ENOENT, // not PCIe: no error
		"class/infiniband/mlx5_0/device/msi_irqs":           syscall.ENOENT,
		"class/infiniband/mlx5_1/device":                    syscall.EACCES, // the link itself
	}}
	devs, err := ReadDevices(context.Background(), sys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(devs[0].PCI); got != "0000:98:00.0 numa=1 cpus=16-31,48-61 link=?/32 x16/? degraded=? msi=0" {
		t.Errorf("mlx5_0 %s", got)
	}
	if len(devs[0].PCI.Errors) != 1 || !errors.Is(devs[0].PCI.Errors[0], syscall.EIO) {
		t.Errorf("mlx5_0 errors %v", devs[0].PCI.Errors)
	}
	if devs[1].PCI.Address != "" || len(devs[1].PCI.Errors) != 1 || !errors.Is(devs[1].PCI.Errors[0], syscall.EACCES) {
		t.Errorf("mlx5_1 %+v", devs[1].PCI)
	}
	sys.Errors = map[string]error{"class/infiniband": syscall.ENOENT}
	if _, err := ReadDevices(context.Background(), sys, nil); !errors.Is(err, infiniband.ErrNoClass) {
		t.Errorf("err %v, want ErrNoClass", err)
	}
}

func TestReadTopology(t *testing.T) {
	for host, want := range map[string]string{
		"numa-remote": "online=0-61 node0=0-15,32-47 node1=16-31,48-61 nodeOf(50)=1 nodeOf(62)=-1",
		"dgx-h100":    "online=0-223 node0=0-55,112-167 node1=56-111,168-223 nodeOf(50)=0 nodeOf(62)=1",
		"iwarp-i40iw": "online=0-15 node0=0-15 nodeOf(50)=-1 nodeOf(62)=-1",
	} {
		topo := ReadTopology(fixtureHost(t, host).Sys)
		got := "online=" + topo.Online.V.String()
		for _, n := range topo.Nodes {
			got += fmt.Sprintf(" node%d=%s", n.ID, n.CPUs)
		}
		got += fmt.Sprintf(" nodeOf(50)=%d nodeOf(62)=%d", topo.NodeOf(50), topo.NodeOf(62))
		if got != want || len(topo.Errors) != 0 {
			t.Errorf("%s: %s (errors %v), want %s", host, got, topo.Errors, want)
		}
		if cpus, ok := topo.Node(0); !ok || cpus.Empty() {
			t.Errorf("%s: no node 0", host)
		}
	}
	sys := &hostfstest.Faulty{Base: fixtureHost(t, "numa-remote").Sys, Contents: map[string][]byte{
		"devices/system/node/node1/cpulist": []byte("16-x\n")}, Errors: map[string]error{"devices/system/cpu/online": syscall.EIO}}
	topo := ReadTopology(sys)
	if topo.Online.OK || len(topo.Nodes) != 1 || len(topo.Errors) != 2 {
		t.Errorf("faulty topology %+v", topo)
	}
}

func addFixtureSeeds(f *testing.F, pattern string) {
	hostfstest.Seeds(f, "*/sys/devices/pci*/"+pattern)
}

func FuzzParseLinkSpeed(f *testing.F) {
	addFixtureSeeds(f, "*/*/current_link_speed")
	addFixtureSeeds(f, "*/*/*/*/*/max_link_speed")
	f.Add("Unknown speed")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseLinkSpeed(s)
		if err == nil && v.Known && !(v.GTs > 0 && v.GTs < 1e4) {
			t.Fatalf("%q: %+v", s, v)
		}
	})
}

func FuzzParseNUMANode(f *testing.F) {
	addFixtureSeeds(f, "*/*/numa_node")
	addFixtureSeeds(f, "*/*/current_link_width")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseNUMANode(s); err == nil && n < -1 {
			t.Fatalf("%q: %d", s, n)
		}
		if n, err := ParseLinkWidth(s); err == nil && (n < 0 || n > 64) {
			t.Fatalf("%q: width %d", s, n)
		}
	})
}

func TestErrorsFor(t *testing.T) {
	sys := &hostfstest.Faulty{Base: fixtureHost(t, "numa-remote").Sys,
		Errors: map[string]error{
			"class/infiniband/mlx5_0/device/local_cpulist": syscall.EIO,
			"class/infiniband/mlx5_0/device/msi_irqs":      syscall.EACCES,
		},
		Contents: map[string][]byte{"class/infiniband/mlx5_0/device/numa_node": []byte("x\n")}}
	f := ReadFunction(sys, "class/infiniband/mlx5_0/device")
	if len(f.Errors) != 3 {
		t.Fatalf("errors %v", f.Errors)
	}
	if got := f.ErrorsFor("local_cpulist"); len(got) != 1 || !errors.Is(got[0], syscall.EIO) {
		t.Errorf("local_cpulist: %v", got)
	}
	if got := f.ErrorsFor("numa_node", "msi_irqs"); len(got) != 2 {
		t.Errorf("numa_node, msi_irqs: %v", got)
	}
	if got := f.ErrorsFor("device"); len(got) != 0 {
		t.Errorf("device: %v", got)
	}
}
