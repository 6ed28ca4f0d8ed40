// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

func fixture(t testing.TB, name string) hostfs.Host { return hostfstest.Fixture(t, name) }

func fixtureHosts(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir("../../../fixtures/hosts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func read(t *testing.T, h hostfs.Host, opts Options) *Snapshot {
	t.Helper()
	s, err := Read(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// summary renders a netdev in one line for table comparisons.
func summary(n Netdev) string {
	o := func(v Opt[uint64]) string {
		if !v.OK {
			return "-"
		}
		return fmt.Sprint(v.V)
	}
	s := fmt.Sprintf("%s %s %s/%d mtu=%s", n.Name, n.Kind, n.Device, n.Port, o(n.MTU))
	if n.IPoIB != nil {
		ib := n.IPoIB
		s += fmt.Sprintf(" mode=%s pkey=%#x parent=%s cm=%v enhanced=%v", ib.Mode.V, ib.Pkey.V, ib.Parent, ib.ConnectedModeSupported.V, ib.Enhanced.V)
	}
	if n.GIDTypes != nil {
		s += fmt.Sprintf(" v1=%d v2=%d", n.GIDTypes[GIDRoCEv1], n.GIDTypes[GIDRoCEv2])
	}
	if n.IPv6Disabled.OK {
		s += fmt.Sprintf(" ipv6off=%v", n.IPv6Disabled.V)
	}
	return s
}

func TestReadFixtures(t *testing.T) {
	for host, want := range map[string][]string{
		"ipoib-enhanced": {
			"ib0 ipoib mlx5_0/1 mtu=4092 mode=datagram pkey=0xffff parent= cm=false enhanced=true ipv6off=false",
			"ib0.8001 ipoib mlx5_0/1 mtu=4092 mode=datagram pkey=0x8001 parent=ib0 cm=false enhanced=true ipv6off=false",
		},
		"mlx4-qdr": {
			"ib0 ipoib mlx4_0/1 mtu=2044 mode=datagram pkey=0xffff parent= cm=true enhanced=false ipv6off=true",
			"ib1 ipoib mlx4_0/2 mtu=65520 mode=connected pkey=0xffff parent= cm=true enhanced=false ipv6off=true",
		},
		"opa-hfi1": {"ib0 ipoib hfi1_0/1 mtu=65520 mode=connected pkey=0xffff parent= cm=true enhanced=false ipv6off=false"},
		"roce-cx6dx": {
			"enp59s0f0np0 roce mlx5_0/1 mtu=9000 v1=2 v2=2 ipv6off=false",
			"enp59s0f1np1 roce mlx5_1/1 mtu=9000 v1=2 v2=2 ipv6off=false",
		},
		// An RNIC's netdev is iWARP, even where the old kernel prints
		// link_layer InfiniBand.
		"iwarp-i40iw": {"enp9s0f0 iwarp i40iw0/1 mtu=1500 ipv6off=false"},
	} {
		t.Run(host, func(t *testing.T) {
			s := read(t, fixture(t, host), Options{})
			if len(s.Errors) != 0 {
				t.Errorf("errors: %v", s.Errors)
			}
			var got []string
			for _, n := range s.Netdevs {
				got = append(got, summary(n))
			}
			if !slices.Equal(got, want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

func TestReadDGX(t *testing.T) {
	s := read(t, fixture(t, "dgx-h100"), Options{CharDevices: true})
	if len(s.Errors) != 0 {
		t.Errorf("errors: %v", s.Errors)
	}
	if len(s.Netdevs) != 9 {
		t.Fatalf("%d netdevs, want 8 IPoIB + bond0", len(s.Netdevs))
	}
	for _, n := range s.Netdevs {
		switch n.Kind {
		case KindRoCE:
			// The RoCE LAG: a virtual bond (no PCI function) named by the GIDs.
			if summary(n) != "bond0 roce mlx5_bond_0/1 mtu=9000 v1=2 v2=2 ipv6off=false" || n.PCIAddress != "" {
				t.Errorf("bond: %s (pci %q)", summary(n), n.PCIAddress)
			}
		case KindIPoIB:
			if n.Port != 1 || !strings.HasPrefix(n.Device, "mlx5_") || !n.IPoIB.Enhanced.V || n.MTU.V != 4092 || !n.Carrier.V || n.OperState.V != "up" {
				t.Errorf("IPoIB %s", summary(n))
			}
		}
	}
	// one uverbs per device (9), one umad and one issm per IB port (8 each),
	// a umad for the RoCE port
	kinds := map[string]int{}
	for _, c := range s.CharDevices {
		kinds[strings.TrimRight(strings.TrimPrefix(c.Path, DevDir), "0123456789")]++
	}
	if kinds["uverbs"] != 9 || kinds["umad"] != 9 || kinds["issm"] != 8 || len(kinds) != 3 {
		t.Errorf("char devices %v", kinds)
	}
	if c := s.CharDevices[0]; c.Device != "mlx5_0" || c.Path != "/dev/infiniband/issm0" {
		t.Errorf("first char device %+v", c)
	}
}

// An excluded device is never read: its IPoIB netdev is still listed (it
// is a netdev of this host) but unmapped, and no char device of it shows.
func TestReadKeep(t *testing.T) {
	h := fixture(t, "dgx-h100")
	sys := &hostfstest.Faulty{Base: h.Sys}
	s := read(t, hostfs.Host{Root: h.Root, Sys: sys, Proc: h.Proc}, Options{CharDevices: true, Keep: func(d string) bool { return d != "mlx5_0" }})
	for _, n := range s.Netdevs {
		if n.Name == "ibp26s0" && n.Device != "" {
			t.Errorf("ibp26s0 mapped to excluded %s", n.Device)
		}
	}
	for _, c := range s.CharDevices {
		if c.Device == "mlx5_0" {
			t.Errorf("char device of an excluded device: %+v", c)
		}
	}
	if n := sys.Reads("class/infiniband/mlx5_0/ports"); n != 0 {
		t.Errorf("excluded device read %d times", n)
	}
}

// The broken host: ibbad0 (no PCI parent, unknown mode, empty mtu and
// carrier) loses exactly those values, ibp26s0 keeps everything except the
// garbled IPv6 switch.
func TestReadBroken(t *testing.T) {
	s := read(t, fixture(t, "broken"), Options{})
	var msgs []string
	for _, e := range s.Errors {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"ibbad0/mode", "ibbad0/mtu", "ibbad0/carrier", "conf/ibp26s0/disable_ipv6"} {
		if !strings.Contains(all, want) {
			t.Errorf("no error names %s:\n%s", want, all)
		}
	}
	if len(s.Errors) != 4 {
		t.Errorf("%d errors, want 4:\n%s", len(s.Errors), all)
	}
	var got []string
	for _, n := range s.Netdevs {
		got = append(got, summary(n))
	}
	// ibbad0 has no PCI function and no device: whether it is enhanced
	// IPoIB is unknown (enhanced=false here is the zero of an absent value).
	if s.Netdevs[0].IPoIB.Enhanced.OK {
		t.Error("ibbad0: enhanced known without a driver")
	}
	want := []string{
		"ibbad0 ipoib /0 mtu=- mode= pkey=0xffff parent= cm=false enhanced=false",
		"ibp26s0 ipoib mlx5_0/1 mtu=4092 mode=datagram pkey=0xffff parent= cm=false enhanced=true",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// The rdma_port_info netdev label (internal/read/infiniband) and this package
// agree on every host: a port's netdev is the one mapped to it that is not
// a pkey child.
func TestConsistentWithInfiniband(t *testing.T) {
	for _, host := range fixtureHosts(t) {
		t.Run(host, func(t *testing.T) {
			h := fixture(t, host)
			class, err := infiniband.Read(context.Background(), h.Sys, nil)
			if errors.Is(err, infiniband.ErrNoClass) {
				// plain-vm, a host without RDMA: no port to map.
				if s, err := Read(context.Background(), h, Options{}); err != nil || len(s.Netdevs) > 0 {
					t.Errorf("no RDMA: %v, %v", s, err)
				}
				return
			}
			if err != nil && class == nil {
				t.Fatal(err)
			}
			s := read(t, h, Options{})
			mapped := map[string]string{}
			for _, n := range s.Netdevs {
				if n.Device == "" || (n.IPoIB != nil && n.IPoIB.Parent != "") {
					continue
				}
				key := fmt.Sprintf("%s/%d", n.Device, n.Port)
				if _, dup := mapped[key]; !dup {
					mapped[key] = n.Name
				}
			}
			for _, d := range class.Devices {
				for _, p := range d.Ports {
					key := fmt.Sprintf("%s/%d", d.Name, p.Num)
					if d.NodeType.V.Value == infiniband.NodeTypeRNIC {
						continue // iWARP: not an IPoIB or RoCE netdev
					}
					if mapped[key] != p.Netdev {
						t.Errorf("%s: rdma_port_info netdev %q, netdev package %q", key, p.Netdev, mapped[key])
					}
				}
			}
		})
	}
}

func TestReadFaults(t *testing.T) {
	h := fixture(t, "roce-cx6dx")
	base := "class/infiniband/mlx5_0/ports/1/gid_attrs/"
	sys := &hostfstest.Faulty{Base: h.Sys, Errors: map[string]error{
		base + "ndevs/2":                   syscall.EINVAL, // an empty GID entry: no error
		base + "types/3":                   syscall.EIO,    // a read error: counted, entry's type unknown
		"class/net/enp59s0f1np1/carrier":   syscall.EINVAL, // interface down: no carrier, no error
		"class/net/enp59s0f1np1/mtu":       syscall.EACCES,
		"class/net/enp59s0f0np0/operstate": fs.ErrNotExist,
	}}
	s := read(t, hostfs.Host{Root: h.Root, Sys: sys, Proc: h.Proc}, Options{})
	if len(s.Errors) != 2 {
		t.Errorf("errors %v, want the EIO and the EACCES", s.Errors)
	}
	for _, e := range s.Errors {
		if !errors.Is(e, syscall.EIO) && !errors.Is(e, syscall.EACCES) {
			t.Errorf("unexpected %v", e)
		}
	}
	if len(s.Netdevs) != 2 {
		t.Fatalf("netdevs %v", s.Netdevs)
	}
	n0, n1 := s.Netdevs[0], s.Netdevs[1]
	if n0.GIDTypes[GIDRoCEv1] != 1 || n0.GIDTypes[GIDRoCEv2] != 1 || n0.OperState.OK || !n0.MTU.OK {
		t.Errorf("port 0: %s operstate %v", summary(n0), n0.OperState)
	}
	if n1.Carrier.OK || n1.MTU.OK || !n1.OperState.OK {
		t.Errorf("port 1: %s carrier %v", summary(n1), n1.Carrier)
	}
}

// A RoCE port whose GID table names no netdev (a kernel without
// gid_attrs) falls back to its PCI function's netdev, as rdma_port_info
// does.
func TestReadRoCEWithoutGIDAttrs(t *testing.T) {
	h := fixture(t, "roce-cx6dx")
	sys := &hostfstest.Faulty{Base: h.Sys, Errors: map[string]error{
		"class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs": fs.ErrNotExist,
	}}
	s := read(t, hostfs.Host{Root: h.Root, Sys: sys, Proc: h.Proc}, Options{})
	if len(s.Errors) != 0 || len(s.Netdevs) != 2 || summary(s.Netdevs[0]) != "enp59s0f0np0 roce mlx5_0/1 mtu=9000 ipv6off=false" {
		t.Errorf("errors %v netdevs %v", s.Errors, s.Netdevs)
	}
}

// carrierHost is a copy of roce-cx6dx whose first netdev has the three
// carrier counters of a kernel ≥ 4.16 and whose second has only
// carrier_changes, as kernels 3.15 to 4.15 do. No recorded listing of an
// RDMA netdev has them, so they live only here, not in the fixture.
func carrierHost(t *testing.T) (hostfs.Host, func(netdev, file, value string), string) {
	t.Helper()
	root := t.TempDir()
	hostfstest.CopyTree(t, hostfstest.FixtureDir(t, "roce-cx6dx"), root)
	write := func(netdev, file, value string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "sys/class/net", netdev, file), []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("enp59s0f0np0", "carrier_changes", "7")
	write("enp59s0f0np0", "carrier_up_count", "4")
	write("enp59s0f0np0", "carrier_down_count", "3")
	write("enp59s0f1np1", "carrier_changes", "1")
	p, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return p.Open(), write, root
}

func counts(c CarrierCounts) string {
	o := func(v Opt[uint64]) string {
		if !v.OK {
			return "-"
		}
		return fmt.Sprint(v.V)
	}
	return o(c.Changes) + "/" + o(c.Up) + "/" + o(c.Down)
}

func TestCarrierCounts(t *testing.T) {
	h, write, _ := carrierHost(t)
	s := read(t, h, Options{})
	if len(s.Errors) != 0 || len(s.Netdevs) != 2 {
		t.Fatalf("errors %v netdevs %v", s.Errors, s.Netdevs)
	}
	if got := counts(s.Netdevs[0].CarrierCounts) + " " + counts(s.Netdevs[1].CarrierCounts); got != "7/4/3 1/-/-" {
		t.Errorf("carrier counts %s, want 7/4/3 1/-/-", got)
	}

	// A flap between two scrapes, and a garbled counter: the refresh
	// reads the new values, the garbage is absent and counted.
	write("enp59s0f0np0", "carrier_changes", "9")
	write("enp59s0f0np0", "carrier_up_count", "5")
	write("enp59s0f0np0", "carrier_down_count", "4")
	write("enp59s0f1np1", "carrier_changes", "x")
	r, err := Refresh(context.Background(), h, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(r.Netdevs[0].CarrierCounts) + " " + counts(r.Netdevs[1].CarrierCounts); got != "9/5/4 -/-/-" {
		t.Errorf("refreshed carrier counts %s, want 9/5/4 -/-/-", got)
	}
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0].Error(), "enp59s0f1np1/carrier_changes") {
		t.Errorf("refresh errors %v, want the garbled carrier_changes", r.Errors)
	}
	if counts(s.Netdevs[0].CarrierCounts) != "7/4/3" {
		t.Error("Refresh changed its base")
	}
	// The refresh after that drops the old parse error: it is a live file.
	write("enp59s0f1np1", "carrier_changes", "2")
	if r2, _ := Refresh(context.Background(), h, r, nil, nil); len(r2.Errors) != 0 || counts(r2.Netdevs[1].CarrierCounts) != "2/-/-" {
		t.Errorf("second refresh errors %v counts %s", r2.Errors, counts(r2.Netdevs[1].CarrierCounts))
	}
}

// A live file that Read found missing (a kernel before 4.16 has no
// carrier_up_count) is not looked for by Refresh, on every scrape, again;
// the next Read (the slow refresh) finds it if it appeared. A file that
// was there and went away is absent at the next Refresh, not served stale.
func TestRefreshSkipsMissingLiveFiles(t *testing.T) {
	h, write, root := carrierHost(t)
	s := read(t, h, Options{})
	write("enp59s0f1np1", "carrier_up_count", "6")
	r, err := Refresh(context.Background(), h, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(r.Netdevs[1].CarrierCounts); got != "1/-/-" {
		t.Errorf("refresh after the file appeared: %s, want 1/-/- (not looked for until the next Read)", got)
	}
	r, err = Refresh(context.Background(), h, r, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(r.Netdevs[1].CarrierCounts); got != "1/-/-" {
		t.Errorf("second refresh: %s, want 1/-/- (the Read's memory carries over)", got)
	}
	s = read(t, h, Options{})
	if got := counts(s.Netdevs[1].CarrierCounts); got != "1/6/-" {
		t.Errorf("next Read: %s, want 1/6/-", got)
	}
	if err := os.Remove(filepath.Join(root, "sys/class/net/enp59s0f0np0/carrier_down_count")); err != nil {
		t.Fatal(err)
	}
	r, err = Refresh(context.Background(), h, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(r.Netdevs[0].CarrierCounts); got != "7/4/-" {
		t.Errorf("refresh after a file went away: %s, want 7/4/-", got)
	}
}

func TestReadNoRDMA(t *testing.T) {
	p, _ := hostfs.Paths{Rootfs: t.TempDir()}.Resolve()
	s := read(t, p.Open(), Options{CharDevices: true})
	if len(s.Netdevs) != 0 || len(s.CharDevices) != 0 || len(s.Errors) != 0 {
		t.Errorf("empty host: %+v", s)
	}
}

func BenchmarkReadDGX(b *testing.B) {
	h := fixture(b, "dgx-h100")
	for b.Loop() {
		if _, err := Read(context.Background(), h, Options{CharDevices: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// Node type and link layer decide together: the Ethernet netdev of an
// RNIC is iWARP (i40iw, whose old kernel prints link_layer "InfiniBand"),
// the Ethernet netdevs of a CA are RoCE.
func TestReadIWARPIsNotRoCE(t *testing.T) {
	for host, want := range map[string]string{
		"iwarp-i40iw": "enp9s0f0 iwarp i40iw0/1",
		"irdma-e810":  "ens8np0 roce irdma0/1",
	} {
		s := read(t, fixture(t, host), Options{})
		var got []string
		for _, n := range s.Netdevs {
			got = append(got, fmt.Sprintf("%s %s %s/%d", n.Name, n.Kind, n.Device, n.Port))
		}
		if !slices.Contains(got, want) {
			t.Errorf("%s: netdevs %q, want %q among them", host, got, want)
		}
	}
}

func TestPortKind(t *testing.T) {
	rnic := Opt[infiniband.Enum]{V: infiniband.Enum{Value: infiniband.NodeTypeRNIC, Name: "RNIC"}, OK: true}
	ca := Opt[infiniband.Enum]{V: infiniband.Enum{Value: infiniband.NodeTypeCA, Name: "CA"}, OK: true}
	for _, c := range []struct {
		nodeType Opt[infiniband.Enum]
		ll       string
		want     Kind
		eth      bool
	}{
		{rnic, "Ethernet", KindIWARP, true},
		{rnic, "InfiniBand", KindIWARP, true}, // i40iw on 4.x kernels
		{ca, "Ethernet", KindRoCE, true},
		{ca, "InfiniBand", "", false},
		{Opt[infiniband.Enum]{}, "Ethernet", KindRoCE, true},
		{ca, "Unknown", "", false}, // EFA
	} {
		k, eth := PortKind(c.nodeType, c.ll)
		if k != c.want || eth != c.eth {
			t.Errorf("PortKind(%v, %q) = %q, %v; want %q, %v", c.nodeType, c.ll, k, eth, c.want, c.eth)
		}
	}
}
