// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// This file is how the sweep opens and checks the files in its cache
// directory (the discovered cache, fabric.cache, thresholds). Whoever can
// write a --collector.fabric.cache-dir can plant something else at those
// names: a FIFO, whose open blocks until a writer comes (for ever, past
// every timeout, while the last sweep stays published), a device, or a
// symlink to a file of their choosing. So nothing there is followed or
// waited for: only a regular file of this process's user is read.

// openRegular opens path for reading without following a symlink and
// without blocking (O_NONBLOCK: a FIFO opens at once instead of waiting
// for a writer), and refuses anything but a regular file owned by this
// process's user. Reads of a regular file never block, so the flag does
// no harm after the check; the caller bounds how much it reads.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if isSymlink(path) {
			return nil, fmt.Errorf("%s: a symlink, not followed", path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regularOwn(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkRegular reports, without opening it, whether path is a regular
// file of this process's user (a symlink is not): the files the tools
// are handed by name are checked before each run. What is planted between
// the check and the tool's own open is bounded by the sweep's deadline.
func checkRegular(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return regularOwn(path, fi)
}

func regularOwn(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s), refused", path, fileType(fi.Mode()))
	}
	if !ownedByUs(fi, true) {
		return fmt.Errorf("%s: owned by uid %d, not this process's %d, refused", path, fi.Sys().(*syscall.Stat_t).Uid, os.Geteuid())
	}
	return nil
}

// ownedByUs reports whether fi belongs to this process's effective user;
// unknown is what a FileInfo without an owner (not from the OS) counts as.
func ownedByUs(fi fs.FileInfo, unknown bool) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return unknown
	}
	return int(st.Uid) == os.Geteuid()
}

// safeDir checks that dir is a directory owned by this process's user and
// writable by no one else.
func safeDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("the fabric cache directory: %w (set --collector.fabric.cache-dir to a writable directory)", err)
	}
	switch {
	case !fi.IsDir():
		return fmt.Errorf("refusing the fabric cache directory %s: not a directory", dir)
	case !ownedByUs(fi, false):
		return fmt.Errorf("refusing the fabric cache directory %s: it is not owned by the exporter's user (uid %d), who alone may write the threshold file and the fabric cache", dir, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("refusing the fabric cache directory %s: mode %v lets its group or others replace the threshold file and the fabric cache (chmod go-w it)", dir, fi.Mode().Perm())
	}
	return nil
}

func isSymlink(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// fileType names a non-regular file's type for the log line.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return m.Type().String()
}
