// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// A generated host is a fixture host whose RDMA devices are replaced by n
// clones of one of them. Everything that is not an RDMA PCI function (proc/,
// etc/, sys/devices/system, sys/devices/virtual, sys/kernel, sys/fs) is
// copied as it is, so every collector of both exporters finds the host it
// expects; the clones get new names, PCI addresses and GUIDs, in the
// kernel's layout (fixtures/README.md):
//
//	sys/devices/pci0000:RR/0000:RR:01.0/0000:BB:00.0/   the clone's PCI function
//	    infiniband/mlx5_<i>/ (device -> ../../../0000:BB:00.0), net/ibp<BB>s0/
//	sys/class/infiniband/mlx5_<i> -> ../../devices/pci0000:RR/.../infiniband/mlx5_<i>
//	sys/class/net/ibp<BB>s0       -> ../../devices/pci0000:RR/.../net/ibp<BB>s0
//	sys/bus/pci/devices/0000:BB:00.0 -> ../../../devices/pci0000:RR/...
//
// Left out of a clone: msi_irqs/ (the template's IRQ numbers belong to the
// template's /proc/interrupts rows, a clone has none) and infiniband_mad/,
// infiniband_verbs/ (no fixture has the umad device nodes sminfo needs).
type hostGen struct {
	template string // the fixture host's root
	device   string // the RDMA device cloned, e.g. mlx5_0
}

// cloneSkip are the PCI function subdirectories a clone leaves out.
var cloneSkip = map[string]bool{"msi_irqs": true, "infiniband_mad": true, "infiniband_verbs": true}

// generate writes a host of n clones into dst, which must not exist or be
// empty. With n 0 it is the host around the devices alone, its
// class/infiniband empty: what a scrape costs with no device.
func (g hostGen) generate(dst string, n int) error {
	if n < 0 || n > 80 {
		return fmt.Errorf("generate %d devices: want 0 to 80 (one PCI bus each)", n)
	}
	pciRel, err := g.templatePCI()
	if err != nil {
		return err
	}
	if err := copyBase(g.template, dst); err != nil {
		return fmt.Errorf("copy the host around the devices: %w", err)
	}
	for i := range n {
		if err := g.clone(dst, pciRel, i); err != nil {
			return fmt.Errorf("clone %s as device %d: %w", g.device, i, err)
		}
	}
	return nil
}

// templatePCI is the template device's PCI function path below sys/devices
// ("pci0000:19/0000:19:01.0/0000:1a:00.0"), from its class link.
func (g hostGen) templatePCI() (string, error) {
	link := filepath.Join(g.template, "sys/class/infiniband", g.device)
	target, err := os.Readlink(link)
	if err != nil {
		return "", fmt.Errorf("template device: %w", err)
	}
	rel, ok := strings.CutPrefix(target, "../../devices/")
	suffix := "/infiniband/" + g.device
	if !ok || !strings.HasSuffix(rel, suffix) {
		return "", fmt.Errorf("template device %s links to %q, not ../../devices/<pci path>%s", link, target, suffix)
	}
	return strings.TrimSuffix(rel, suffix), nil
}

// isPCILink reports whether the symlink at rel (relative to the root)
// points into sys/devices/pci*: such links name the template's devices.
func isPCILink(rel, target string) bool {
	resolved := path.Join(path.Dir(rel), target)
	return strings.HasPrefix(resolved, "sys/devices/pci")
}

// copyBase copies the host tree at src to dst without its PCI devices and
// the links to them.
func copyBase(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() && strings.HasPrefix(rel, "sys/devices/pci") {
			return filepath.SkipDir
		}
		out := filepath.Join(dst, filepath.FromSlash(rel))
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if isPCILink(rel, target) {
				return nil
			}
			return os.Symlink(target, out)
		case d.Type().IsRegular():
			return copyFile(p, out)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, info.Mode().Perm())
}

// clone is the i-th clone's identity.
type clone struct {
	name, bdf, pciRel, netdev, guid string
}

func newClone(i int) clone {
	bus := 0x10 + 3*i // room for a root port bus below each
	root := bus - 1
	bdf := fmt.Sprintf("0000:%02x:00.0", bus)
	return clone{
		name:   fmt.Sprintf("mlx5_%d", i),
		bdf:    bdf,
		pciRel: fmt.Sprintf("pci0000:%02x/0000:%02x:01.0/%s", root, root, bdf),
		netdev: fmt.Sprintf("ibp%ds0", bus),
		guid:   fmt.Sprintf("946d:ae03:00be:%04x", 0x1000+i),
	}
}

func (g hostGen) clone(dst, templatePCI string, i int) error {
	c := newClone(i)
	from := filepath.Join(g.template, "sys/devices", templatePCI)
	to := filepath.Join(dst, "sys/devices", c.pciRel)
	oldBDF := path.Base(templatePCI)
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() && cloneSkip[rel] {
			return filepath.SkipDir
		}
		out := filepath.Join(to, filepath.FromSlash(c.rename(g.device, rel)))
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			// device -> ../../../<BDF> names the function itself.
			if path.Base(target) == oldBDF {
				target = path.Join(path.Dir(target), c.bdf)
			}
			return os.Symlink(target, out)
		case d.Type().IsRegular():
			return c.writeAttr(p, out, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.link(dst)
}

// rename maps a path inside the template function to the clone's: the
// device and netdev directories get the clone's names.
func (c clone) rename(device, rel string) string {
	parts := strings.Split(rel, "/")
	if len(parts) >= 2 && parts[0] == "infiniband" && parts[1] == device {
		parts[1] = c.name
	}
	if len(parts) >= 2 && parts[0] == "net" {
		parts[1] = c.netdev
	}
	return strings.Join(parts, "/")
}

// writeAttr copies one attribute, giving the clone its own identity where
// the template's would collide: GUIDs, node description, GID 0 and the
// IPoIB hardware address (whose last 8 bytes are the port GUID).
func (c clone) writeAttr(src, dst, rel string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	hex := strings.ReplaceAll(c.guid, ":", "")
	base := path.Base(rel)
	switch {
	case base == "node_guid" || base == "sys_image_guid":
		b = []byte(c.guid + "\n")
	case base == "node_desc":
		b = []byte("bench " + c.name + "\n")
	case strings.HasSuffix(rel, "/gids/0"):
		b = []byte("fe80:0000:0000:0000:" + c.guid + "\n")
	case strings.HasPrefix(rel, "net/") && base == "address":
		b = []byte(ipoibAddress(string(b), hex) + "\n")
	}
	return os.WriteFile(dst, b, 0o644)
}

// ipoibAddress replaces the last 8 bytes of a 20-byte IPoIB address
// ("00:00:10:47:fe:80:...:94:6d:ae:03:00:cd:e7:2c") with the GUID's.
func ipoibAddress(addr, guidHex string) string {
	parts := strings.Split(strings.TrimSpace(addr), ":")
	if len(parts) != 20 || len(guidHex) != 16 {
		return strings.TrimSpace(addr)
	}
	for k := range 8 {
		parts[12+k] = guidHex[2*k : 2*k+2]
	}
	return strings.Join(parts, ":")
}

// link makes the clone's class and bus entries, relative as the kernel's.
func (c clone) link(dst string) error {
	links := []struct{ at, target string }{
		{"sys/class/infiniband/" + c.name, "../../devices/" + c.pciRel + "/infiniband/" + c.name},
		{"sys/class/net/" + c.netdev, "../../devices/" + c.pciRel + "/net/" + c.netdev},
		{"sys/bus/pci/devices/" + c.bdf, "../../../devices/" + c.pciRel},
	}
	for _, l := range links {
		at := filepath.Join(dst, filepath.FromSlash(l.at))
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(l.target, at); err != nil {
			return err
		}
	}
	return nil
}
