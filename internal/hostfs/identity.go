// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"io/fs"
	"syscall"
)

// Identity tells one incarnation of a directory from the next: the
// kernel gives a re-registered device (driver reload, firmware reset,
// hot-plug) a new sysfs directory, with a new inode.
type Identity struct {
	Dev, Ino uint64
	Ctime    int64
}

// Identifier is an FS that can tell a directory's identity. Dir's FS is
// one; an FS that is not (a test double) gives no identity, and caches
// keyed on it fall back to their age bound.
type Identifier interface {
	Identity(name string) (Identity, error)
}

// IdentityOf returns name's identity (following symbolic links), and
// false when the FS cannot tell.
func IdentityOf(f FS, name string) (Identity, bool, error) {
	i, ok := f.(Identifier)
	if !ok {
		return Identity{}, false, nil
	}
	id, err := i.Identity(name)
	return id, err == nil, err
}

// Identity implements Identifier.
func (d *dirFS) Identity(name string) (Identity, error) {
	var st syscall.Stat_t
	p := d.path(name)
	for {
		err := syscall.Stat(p, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return Identity{}, &fs.PathError{Op: "stat", Path: p, Err: err}
		}
		return Identity{Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano()}, nil
	}
}
