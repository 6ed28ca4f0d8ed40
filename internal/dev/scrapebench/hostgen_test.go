// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrapebench

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// template is the fixture device the generated host is cloned from: an
// NDR InfiniBand ConnectX-7 with the full mlx5 counters/ and hw_counters/
// sets.
const (
	templateHost   = "dgx-h100"
	templateDevice = "mlx5_0"
)

// generateHost writes a host root with devices RDMA devices of ports ports
// each into dir and returns dir. The layout is the kernel's, as in the
// fixture hosts:
//
//	sys/class/infiniband/<dev>  -> ../../devices/pci<D>:<B>/<D>:<B>:01.0/<BDF>/infiniband/<dev>
//	sys/class/net/<netdev>      -> ../../devices/.../<BDF>/net/<netdev>
//	sys/bus/pci/devices/<BDF>   -> ../../../devices/.../<BDF>
//	<BDF>/infiniband/<dev>/device, <BDF>/net/<netdev>/device -> ../../../<BDF>
//
// Every device attribute, PCI attribute, netdev attribute and every file of
// ports/N (counters/, hw_counters/, gids/, pkeys/ and the port attributes)
// is taken from the template fixture device; GUIDs, node descriptions, LIDs
// and dev_port are made unique per device and port.
func generateHost(tb testing.TB, dir string, devices, ports int) string {
	tb.Helper()
	tmplRoot := fixtureRoot(tb, templateHost)
	devDir, err := filepath.EvalSymlinks(filepath.Join(tmplRoot, "sys/class/infiniband", templateDevice))
	if err != nil {
		tb.Fatal(err)
	}
	pciDir := filepath.Dir(filepath.Dir(devDir)) // .../<BDF>/infiniband/<dev> -> .../<BDF>
	devAttrs := regularFiles(tb, devDir)
	pciAttrs := regularFiles(tb, pciDir)
	netDirs, err := os.ReadDir(filepath.Join(pciDir, "net"))
	if err != nil || len(netDirs) == 0 {
		tb.Fatalf("template %s has no netdev: %v", pciDir, err)
	}
	netAttrs := regularFiles(tb, filepath.Join(pciDir, "net", netDirs[0].Name()))
	portTree := fileTree(tb, filepath.Join(devDir, "ports", "1"))

	sys := filepath.Join(dir, "sys")
	for i := range devices {
		rootBus := 0x10 + i*0x0f
		bus := rootBus + 1
		bdf := fmt.Sprintf("0000:%02x:00.0", bus)
		pciRel := fmt.Sprintf("devices/pci0000:%02x/0000:%02x:01.0/%s", rootBus, rootBus, bdf)
		pci := filepath.Join(sys, pciRel)
		name := fmt.Sprintf("mlx5_%d", i)
		guid := fmt.Sprintf("946d:ae03:00cd:%04x", 0xe700+i)

		writeFiles(tb, pci, pciAttrs, nil)
		symlink(tb, "../../../"+pciRel, filepath.Join(sys, "bus/pci/devices", bdf))

		for p := range ports {
			netdev := fmt.Sprintf("ibp%ds0", bus)
			if p > 0 {
				netdev += fmt.Sprintf("d%d", p)
			}
			nd := filepath.Join(pci, "net", netdev)
			writeFiles(tb, nd, netAttrs, map[string]string{"dev_port": fmt.Sprint(p), "dev_id": fmt.Sprintf("0x%x", p)})
			symlink(tb, "../../../"+bdf, filepath.Join(nd, "device"))
			symlink(tb, "../../"+pciRel+"/net/"+netdev, filepath.Join(sys, "class/net", netdev))
		}

		dev := filepath.Join(pci, "infiniband", name)
		writeFiles(tb, dev, devAttrs, map[string]string{
			"node_guid":      guid,
			"sys_image_guid": guid,
			"node_desc":      "bench-host " + name,
		})
		symlink(tb, "../../../"+bdf, filepath.Join(dev, "device"))
		for p := 1; p <= ports; p++ {
			writeFiles(tb, filepath.Join(dev, "ports", fmt.Sprint(p)), portTree, map[string]string{
				"lid": fmt.Sprintf("0x%x", 0x100+i*ports+p),
			})
		}
		symlink(tb, "../../"+pciRel+"/infiniband/"+name, filepath.Join(sys, "class/infiniband", name))
	}
	return dir
}

// fixtureRoot is the root of a fixture host, relative to this package.
func fixtureRoot(tb testing.TB, host string) string {
	tb.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", "fixtures", "hosts", host))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(root); err != nil {
		tb.Fatal(err)
	}
	return root
}

// regularFiles returns the regular files directly in dir, by name.
func regularFiles(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// fileTree returns every regular file below dir, by slash-separated path.
func fileTree(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// writeFiles writes files below dir; override replaces the content of the
// named files (a trailing newline is added, as sysfs does).
func writeFiles(tb testing.TB, dir string, files, override map[string]string) {
	tb.Helper()
	for name, content := range files {
		if v, ok := override[name]; ok {
			content = v + "\n"
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for name := range override {
		if _, ok := files[name]; !ok && !strings.Contains(name, "/") {
			tb.Fatalf("template has no %s to override in %s", name, dir)
		}
	}
}

func symlink(tb testing.TB, target, link string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		tb.Fatal(err)
	}
}
