// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"errors"
	"io/fs"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listed is one entry of a directory List lists: its name and the
// identity of the entry itself (a link's, not its target's; HasID false
// when it cannot be told).
type Listed struct {
	Name  string
	ID    Identity
	HasID bool
}

// List returns the entries of directory name below f, sorted by name,
// each with its identity: read with getdents and each entry's identity
// taken with fstatat relative to the directory's descriptor, without
// following a link, since ReadDir and a stat of each entry would walk the
// whole path of each entry and of its link's target
// (docs/measurements.md#hostfs). The directory is opened for each List:
// keeping it open and rewinding it saves no measurable CPU
// (docs/caches.md). An FS that is not Dir's is listed with its ReadDir, without
// identities.
func List(f FS, name string) ([]Listed, error) {
	d, ok := f.(*dirFS)
	if !ok {
		return listFS(f, name)
	}
	p := d.path(name)
	start, err := d.enter("readdir", p)
	if err != nil {
		return nil, err
	}
	defer d.reads.end(p, start)
	return listPath(p)
}

// listFS lists name with f's ReadDir.
func listFS(f FS, name string) ([]Listed, error) {
	entries, err := f.ReadDir(name)
	if err != nil {
		return nil, err
	}
	out := make([]Listed, len(entries))
	for i, e := range entries {
		out[i] = Listed{Name: e.Name()}
	}
	return out, nil
}

// listPath lists p with a descriptor of its own.
func listPath(p string) ([]Listed, error) {
	fd, err := openDir(p)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	return listFD(fd, p, make([]byte, 4096))
}

// openDir opens a directory; O_DIRECTORY: a FIFO in its place fails
// (ENOTDIR) instead of blocking the open.
func openDir(p string) (int, error) {
	for {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_DIRECTORY, 0)
		if err == nil {
			return fd, nil
		}
		if err != syscall.EINTR {
			return -1, &fs.PathError{Op: "open", Path: p, Err: err}
		}
	}
}

// listFD reads a directory open at fd from where it is, with buf, and
// takes each entry's identity.
func listFD(fd int, p string, buf []byte) ([]Listed, error) {
	var names []string
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdirent", Path: p, Err: err}
		}
		if n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
	slices.Sort(names)
	out := make([]Listed, len(names))
	for i, name := range names {
		out[i].Name = name
		var st unix.Stat_t
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		for errors.Is(err, syscall.EINTR) {
			err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err == nil {
			out[i].ID = Identity{Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano()}
			out[i].HasID = true
		}
	}
	return out, nil
}
