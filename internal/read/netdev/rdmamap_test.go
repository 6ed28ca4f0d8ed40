// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// TestLiveMapperOnFixtures runs rdmamap (LiveMapper), which reads the live
// /sys, in a private user and mount namespace whose /sys is each fixture
// host's sys tree, and checks that it answers as SysfsMapper does reading
// the same tree through its path. What it covers: rdmamap's PCI-function
// and character-device lookups and our use of them, on every fixture
// layout. What it cannot: a kernel's own sysfs (no RDMA hardware here).
func TestLiveMapperOnFixtures(t *testing.T) {
	if !testenv.InChild(t.Name()) {
		t.Log(testenv.InNamespaces(t, t.Name(), "-m"))
		return
	}
	compared := 0
	for _, host := range fixtureHosts(t) {
		root, err := filepath.Abs(filepath.Join("../../../fixtures/hosts", host))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount(root+"/sys", "/sys", "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("bind %s over /sys: %v", host, err)
		}
		compared += compareMappers(t, host, root)
		if err := syscall.Unmount("/sys", syscall.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d character devices compared", compared)
	if compared < 20 {
		t.Errorf("only %d character devices compared", compared)
	}
}

func compareMappers(t *testing.T, host, root string) int {
	ref := hostfs.Host{Root: hostfs.Dir(root), Sys: hostfs.Dir(root + "/sys"), Proc: hostfs.Dir(root + "/proc")}
	live := hostfs.Host{Root: hostfs.Dir(root), Sys: hostfs.Dir("/sys"), Proc: hostfs.Dir(root + "/proc")}
	want := SysfsMapper{Sys: ref.Sys}
	got := LiveMapper{}

	pcis, _ := ref.Sys.ReadDir("bus/pci/devices")
	for _, e := range pcis {
		if g, w := got.DevicesForPCI(e.Name()), want.DevicesForPCI(e.Name()); !slices.Equal(g, w) {
			t.Errorf("%s: devices of %s: rdmamap %q, sysfs %q", host, e.Name(), g, w)
		}
	}
	compared := 0
	devs, _ := ref.Sys.ReadDir("class/infiniband")
	for _, e := range devs {
		g, w := got.CharDevices(e.Name()), want.CharDevices(e.Name())
		// rdmamap stops at the first entry of each kind; SysfsMapper lists
		// one umad/issm per port. So: every rdmamap answer is right, and it
		// has exactly one of each kind that exists.
		kinds := map[string]int{}
		for _, p := range w {
			kinds[kind(p)]++
		}
		for _, p := range g {
			if !slices.Contains(w, p) {
				t.Errorf("%s/%s: rdmamap %s, not in %q", host, e.Name(), p, w)
			}
			kinds[kind(p)] = -1
		}
		for k, n := range kinds {
			if n != -1 {
				t.Errorf("%s/%s: rdmamap has no %s device, sysfs has %d", host, e.Name(), k, n)
			}
		}
		compared += len(g)
	}

	// The whole snapshot: identical netdevs either way.
	a, err := Read(context.Background(), live, Options{Mapper: LiveMapper{}, CharDevices: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read(context.Background(), ref, Options{CharDevices: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Netdevs, b.Netdevs) {
		t.Errorf("%s: netdevs differ:\nrdmamap %+v\nsysfs   %+v", host, a.Netdevs, b.Netdevs)
	}
	if len(a.Errors) != len(b.Errors) {
		t.Errorf("%s: %d errors with rdmamap, %d without", host, len(a.Errors), len(b.Errors))
	}
	return compared
}

func kind(p string) string { return strings.TrimRight(strings.TrimPrefix(p, DevDir), "0123456789") }
