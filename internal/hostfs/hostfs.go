// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package hostfs is the one way rdma_doctor reads host state. Every path is
// relative to a root (the host's /sys, /proc or / below --path.rootfs), so the
// same code reads a real host, a fixture tree, or a test double that injects
// faults.
package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MaxFileSize bounds a single read. sysfs attributes are at most a page; the
// largest procfs file we read (/proc/interrupts on a 512-CPU host) is a few
// MiB. Anything bigger is not what we think it is.
const MaxFileSize = 16 << 20

// ErrTooLarge is returned for files larger than MaxFileSize.
var ErrTooLarge = errors.New("file larger than limit")

// FS reads files, directories and symbolic links below a root. Names are
// slash-separated and relative to the root ("class/infiniband/mlx5_0/fw_ver").
type FS interface {
	ReadFile(name string) ([]byte, error)
	// ReadDir returns the entries of a directory sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// ReadLink returns the target of a symbolic link, unresolved.
	ReadLink(name string) (string, error)
}

// Dir returns an FS rooted at the host directory root.
func Dir(root string) FS { return dirFS(filepath.Clean(root)) }

type dirFS string

// Root returns the host directory that an FS made by Dir reads, and false
// for any other FS (test doubles). Code that must hand a path to a library
// that cannot take a root (rdmamap reads /sys by fixed paths) uses it to
// tell whether the FS is the live one.
func Root(f FS) (string, bool) {
	d, ok := f.(dirFS)
	return string(d), ok
}

func (d dirFS) path(name string) string { return string(d) + "/" + name }

// ReadFile reads with plain system calls into a small buffer: sysfs reports
// every attribute as 4096 bytes long, so os.ReadFile would allocate a page per
// attribute, and a scrape reads hundreds of them.
func (d dirFS) ReadFile(name string) ([]byte, error) {
	p := d.path(name)
	fd, err := open(p)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer syscall.Close(fd)

	var stack [128]byte
	buf := stack[:0]
	for {
		if len(buf) > MaxFileSize {
			return nil, &fs.PathError{Op: "read", Path: p, Err: ErrTooLarge}
		}
		if len(buf) == cap(buf) {
			// Double: /proc/interrupts on a large host is megabytes, and
			// append's gentler growth for big slices would copy it many
			// times over.
			grown := make([]byte, len(buf), 2*cap(buf))
			copy(grown, buf)
			buf = grown
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	out := make([]byte, len(buf))
	copy(out, buf)
	return out, nil
}

func open(p string) (int, error) {
	for {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func (d dirFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(d.path(name)) }

func (d dirFS) ReadLink(name string) (string, error) { return os.Readlink(d.path(name)) }

// Paths are the host roots from --path.rootfs, --path.sysfs and --path.procfs.
type Paths struct {
	Rootfs string
	Sysfs  string
	Procfs string
}

// Resolve fills Sysfs and Procfs from Rootfs where they were not given and
// checks that every root is a directory, so a typo stops start-up instead of
// producing an empty scrape.
func (p Paths) Resolve() (Paths, error) {
	if p.Rootfs == "" {
		p.Rootfs = "/"
	}
	if p.Sysfs == "" {
		p.Sysfs = filepath.Join(p.Rootfs, "sys")
	}
	if p.Procfs == "" {
		p.Procfs = filepath.Join(p.Rootfs, "proc")
	}
	fi, err := os.Stat(p.Rootfs)
	if err != nil {
		return p, fmt.Errorf("--path.rootfs: %w", err)
	}
	if !fi.IsDir() {
		return p, fmt.Errorf("--path.rootfs: %s is not a directory", p.Rootfs)
	}
	// sys and proc may legitimately be missing below a fixture root (a host
	// tree with only /sys), but a path that exists and is not a directory is
	// a mistake.
	for flag, dir := range map[string]string{"--path.sysfs": p.Sysfs, "--path.procfs": p.Procfs} {
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			return p, fmt.Errorf("%s: %s is not a directory", flag, dir)
		}
	}
	return p, nil
}

// Host is the set of file systems a collector, check or action reads.
type Host struct {
	Root FS
	Sys  FS
	Proc FS
}

// Open returns the Host for resolved paths.
func (p Paths) Open() Host {
	return Host{Root: Dir(p.Rootfs), Sys: Dir(p.Sysfs), Proc: Dir(p.Procfs)}
}

// TailReader is an FS that reads the end of a file without reading the
// rest. Dir's FS is one.
type TailReader interface {
	ReadTail(name string, n int64) ([]byte, error)
}

// ReadTail returns the end of a file, at most n bytes, starting at a line:
// a log grows without bound and only its end is news. An FS that is not a
// TailReader (a test double) is read whole and cut the same way.
func ReadTail(f FS, name string, n int64) ([]byte, error) {
	if t, ok := f.(TailReader); ok {
		return t.ReadTail(name, n)
	}
	b, err := f.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) <= n {
		return b, nil
	}
	// One byte more: a cut right after a newline keeps its whole line.
	return fromLine(b[int64(len(b))-n-1:]), nil
}

// fromLine drops a cut first line: everything up to the first newline.
func fromLine(b []byte) []byte {
	for i, c := range b {
		if c == '\n' {
			return b[i+1:]
		}
	}
	return nil
}

// ReadTail implements TailReader.
func (d dirFS) ReadTail(name string, n int64) ([]byte, error) {
	p := d.path(name)
	if n <= 0 {
		return nil, fmt.Errorf("read tail of %s: %d bytes asked", p, n)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: errors.New("not a regular file")}
	}
	// One byte before the n: a cut right after a newline keeps its line.
	off := fi.Size() - n - 1
	if off < 0 {
		off = 0
	}
	// The file may grow between the stat and the read: read what was
	// there at the stat, never more than n.
	buf := make([]byte, fi.Size()-off)
	m, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	buf = buf[:m]
	if off > 0 {
		buf = fromLine(buf)
	}
	return buf, nil
}
