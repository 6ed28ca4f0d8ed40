// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func dgx(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../fixtures/hosts/dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestGenerate(t *testing.T) {
	tmpl := dgx(t)
	dst := t.TempDir()
	const n = 3
	if err := (hostGen{template: tmpl, device: "mlx5_0"}).generate(dst, n); err != nil {
		t.Fatal(err)
	}
	class := filepath.Join(dst, "sys/class/infiniband")
	entries, err := os.ReadDir(class)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != n {
		t.Fatalf("%d devices, want %d: %v", len(entries), n, entries)
	}
	guids := map[string]bool{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(class, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(target, "../../devices/pci") || !strings.HasSuffix(target, "/infiniband/"+e.Name()) {
			t.Errorf("%s -> %s, not the kernel's layout", e.Name(), target)
		}
		dev := filepath.Join(class, e.Name())
		guid, err := os.ReadFile(filepath.Join(dev, "node_guid"))
		if err != nil {
			t.Fatal(err)
		}
		guids[string(guid)] = true
		// The device link names the clone's own function.
		fn, err := filepath.EvalSymlinks(filepath.Join(dev, "device"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(target, "/"+filepath.Base(fn)+"/") {
			t.Errorf("%s/device resolves to %s, not its function", e.Name(), fn)
		}
		sameFiles(t, filepath.Join(tmpl, "sys/class/infiniband/mlx5_0/ports/1/counters"), filepath.Join(dev, "ports/1/counters"))
		sameFiles(t, filepath.Join(tmpl, "sys/class/infiniband/mlx5_0/ports/1/hw_counters"), filepath.Join(dev, "ports/1/hw_counters"))
	}
	if len(guids) != n {
		t.Errorf("GUIDs not unique: %v", guids)
	}
	for _, dir := range []string{"sys/bus/pci/devices", "sys/class/net"} {
		for _, e := range mustReadDir(t, filepath.Join(dst, dir)) {
			if _, err := os.Stat(filepath.Join(dst, dir, e.Name())); err != nil {
				t.Errorf("%s/%s: %v", dir, e.Name(), err)
			}
		}
	}
	if got := len(mustReadDir(t, filepath.Join(dst, "sys/bus/pci/devices"))); got != n {
		t.Errorf("%d PCI functions, want %d", got, n)
	}
	// The rest of the host is the template's.
	sameFiles(t, filepath.Join(tmpl, "proc/sys/kernel"), filepath.Join(dst, "proc/sys/kernel"))
	checkLinks(t, dst)
}

// checkLinks fails on a symlink that is absolute, dangles or leaves dst.
func checkLinks(t *testing.T, dst string) {
	t.Helper()
	err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		if rel == "proc/self" {
			return nil // the fixture's own link to a pid directory
		}
		resolved := path.Join(path.Dir(filepath.ToSlash(rel)), target)
		if path.IsAbs(target) || strings.HasPrefix(resolved, "../") {
			t.Errorf("%s -> %s leaves the tree", rel, target)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s -> %s dangles", rel, target)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func sameFiles(t *testing.T, want, got string) {
	t.Helper()
	entries := mustReadDir(t, want)
	if len(entries) == 0 {
		t.Fatalf("%s is empty", want)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		a, err := os.ReadFile(filepath.Join(want, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("%s/%s = %q, template has %q", got, e.Name(), b, a)
		}
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestGenerateBounds(t *testing.T) {
	g := hostGen{template: dgx(t), device: "mlx5_0"}
	for _, n := range []int{-1, 81} {
		if err := g.generate(t.TempDir(), n); err == nil {
			t.Errorf("%d devices accepted", n)
		}
	}
	// None: the host around the devices, an empty class and no PCI
	// function of the template's.
	dst := t.TempDir()
	if err := g.generate(dst, 0); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(filepath.Join(dst, "sys/class/infiniband")); err != nil || len(entries) != 0 {
		t.Errorf("0 devices: class/infiniband %v, %v", entries, err)
	}
	if pci, _ := filepath.Glob(filepath.Join(dst, "sys/devices/pci*")); len(pci) != 0 {
		t.Errorf("0 devices: %v", pci)
	}
	if err := (hostGen{template: dgx(t), device: "nope"}).generate(t.TempDir(), 1); err == nil {
		t.Error("a missing template device was accepted")
	}
}

func TestIPoIBAddress(t *testing.T) {
	got := ipoibAddress("00:00:10:47:fe:80:00:00:00:00:00:00:94:6d:ae:03:00:cd:e7:2c\n", "946dae0300be1001")
	if want := "00:00:10:47:fe:80:00:00:00:00:00:00:94:6d:ae:03:00:be:10:01"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestListFloor(t *testing.T) {
	l, err := listFloor(filepath.Join(dgx(t), "sys"))
	if err != nil {
		t.Fatal(err)
	}
	// dgx-h100: 9 devices of one port each.
	if len(l.devices) != 9 || l.ports != 9 {
		t.Fatalf("%d devices, %d ports", len(l.devices), l.ports)
	}
	want := map[string]bool{"node_guid": false, "state": false, "link_downed": false, "out_of_buffer": false, "dev_port": false}
	for _, files := range l.devices {
		for _, f := range files {
			if _, ok := want[filepath.Base(f)]; ok {
				want[filepath.Base(f)] = true
			}
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("no %s in the list", name)
		}
	}
	if _, n, err := l.read(); err != nil || n == 0 {
		t.Errorf("read %d bytes: %v", n, err)
	}
}
