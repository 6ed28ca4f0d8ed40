// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfstest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// CopyTree copies a fixture host tree to dst, recreating its relative
// symlinks as links (the class entries point into sys/devices), so a test
// can change files without touching the fixture.
func CopyTree(tb testing.TB, src, dst string) {
	tb.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case e.IsDir():
			return os.MkdirAll(target, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// Reregister does to a copied host tree what the kernel does when it
// re-registers an RDMA device (driver reload, firmware reset): device_del
// removes its class link and its directory, device_add makes both anew.
// Here the new ones are made before the old ones go, so that the file
// system cannot hand them the old inodes. It returns the new directory, a
// copy of the old one.
func Reregister(tb testing.TB, sys, device string) string {
	tb.Helper()
	link := filepath.Join(sys, "class/infiniband", device)
	rel, err := os.Readlink(link)
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := filepath.EvalSymlinks(link)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		tb.Fatal(err)
	}
	CopyTree(tb, dir+".old", dir)
	if err := os.Symlink(rel, link+".new"); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(link+".new", link); err != nil {
		tb.Fatal(err)
	}
	if err := os.RemoveAll(dir + ".old"); err != nil {
		tb.Fatal(err)
	}
	return dir
}
