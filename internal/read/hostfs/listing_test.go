// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"testing/fstest"
)

func listedNames(t *testing.T, f FS, name string) []string {
	t.Helper()
	got, err := List(f, name)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
	}
	return names
}

// A listing follows the directory: entries that come and go, a link made
// anew (a re-registered device) with a new identity, and the whole
// directory replaced (ib_core reloaded), all seen by the next List, which
// keeps no descriptor.
func TestListingFollowsDirectory(t *testing.T) {
	root := t.TempDir()
	class := filepath.Join(root, "class")
	for _, d := range []string{"class", "devices/a", "devices/b", "devices/c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(name string) {
		t.Helper()
		if err := os.Symlink("../devices/"+name, filepath.Join(class, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("b")
	link("a")
	keptBefore := keptCount()
	l := Dir(root)
	first, err := List(l, "class")
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].Name != "a" || first[1].Name != "b" || !first[0].HasID || !first[1].HasID {
		t.Fatalf("first list %+v, want a and b, sorted, with identities", first)
	}
	if first[0].ID == first[1].ID {
		t.Error("two links have one identity")
	}

	link("c")
	if got := listedNames(t, l, "class"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after adding c: %v", got)
	}
	if err := os.Remove(filepath.Join(class, "c")); err != nil {
		t.Fatal(err)
	}
	if got := listedNames(t, l, "class"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after removing c: %v", got)
	}
	// a made anew, to the same target: a new identity, where the
	// target's would be the same. (Made before the old one goes, so
	// that the file system cannot give it the old one's inode.)
	if err := os.Symlink("../devices/a", filepath.Join(class, ".a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(class, ".a"), filepath.Join(class, "a")); err != nil {
		t.Fatal(err)
	}
	again, err := List(l, "class")
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 || again[0].Name != "a" || again[0].ID == first[0].ID {
		t.Errorf("a made anew: %+v, first %+v; want a new identity", again, first[0])
	}
	if again[1].ID != first[1].ID {
		t.Errorf("b unchanged but its identity changed: %+v then %+v", first[1], again[1])
	}

	// The directory replaced by a new one (ib_core reloaded).
	if err := os.RemoveAll(class); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(class, 0o755); err != nil {
		t.Fatal(err)
	}
	link("c")
	if got := listedNames(t, l, "class"); !slices.Equal(got, []string{"c"}) {
		t.Errorf("after the directory was replaced: %v", got)
	}
	if err := os.RemoveAll(class); err != nil {
		t.Fatal(err)
	}
	if _, err := List(l, "class"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory gone: %v, want not exist", err)
	}
	if n := keptCount() - keptBefore; n != 0 {
		t.Errorf("%d descriptors kept, want 0", n)
	}
}

// On a real kernel directory, generated on every read as sysfs's are,
// each List lists what is there now: /proc/self/fd gains and loses an
// entry as a file is opened and closed. The file is moved to a high
// descriptor: List's own descriptor of the directory takes the lowest
// free one, which it lists too.
func TestListingRereadsRealKernelDirectory(t *testing.T) {
	l := Dir("/proc/self")
	before := listedNames(t, l, "fd")
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	const high = 1000
	if err := syscall.Dup3(int(f.Fd()), high, syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fd := strconv.Itoa(high)
	if slices.Contains(before, fd) {
		t.Fatalf("fd %s listed before it was opened: %v", fd, before)
	}
	if got := listedNames(t, l, "fd"); !slices.Contains(got, fd) {
		t.Errorf("fd %s not listed once open: %v", fd, got)
	}
	syscall.Close(high)
	if got := listedNames(t, l, "fd"); slices.Contains(got, fd) {
		t.Errorf("fd %s still listed once closed: %v", fd, got)
	}
}

// An FS that is not Dir's is listed with its ReadDir, without identities.
func TestListingOtherFS(t *testing.T) {
	f := fsFS{fstest.MapFS{"class/b/x": {}, "class/a/x": {}}}
	got, err := List(f, "class")
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || got[0].HasID {
		t.Errorf("got %+v, %v; want a and b without identities", got, err)
	}
	if _, err := List(f, "none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
}

// fsFS is an io/fs.FS as an FS (a test double).
type fsFS struct{ fs.FS }

func (f fsFS) ReadFile(name string) ([]byte, error)       { return fs.ReadFile(f.FS, name) }
func (f fsFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(f.FS, name) }
func (f fsFS) ReadLink(name string) (string, error)       { return "", fs.ErrInvalid }
