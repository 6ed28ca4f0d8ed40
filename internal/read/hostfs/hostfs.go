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
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// MaxFileSize bounds a file read whole. sysfs attributes are at most a
// page and the other procfs files we read whole are small. A table that
// grows with the host (/proc/interrupts: 23 MB on a 512-CPU, 4,096-IRQ
// host) is streamed with ReadLines instead, in bounded memory. Anything
// bigger read whole is not what we think it is.
const MaxFileSize = 16 << 20

// ErrTooLarge is returned for files larger than MaxFileSize.
var ErrTooLarge = errors.New("file larger than limit")

// ErrNotRegular is returned for a FIFO, device or socket where a regular
// file (a sysfs or procfs attribute, a log) is expected: reading one could
// block forever or never end.
var ErrNotRegular = errors.New("not a regular file")

// FS reads files, directories and symbolic links below a root. Names are
// slash-separated and relative to the root ("class/infiniband/mlx5_0/fw_ver").
type FS interface {
	ReadFile(name string) ([]byte, error)
	// ReadDir returns the entries of a directory sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// ReadLink returns the target of a symbolic link, unresolved.
	ReadLink(name string) (string, error)
}

// Dir returns an FS rooted at the host directory root. It keeps a registry
// of its reads in flight, so make one per root and share it: a read stuck
// in a wedged driver then costs one thread, not one per scrape (see
// ErrStuck and Stats).
func Dir(root string) FS {
	return &dirFS{root: filepath.Clean(root), reads: newRegistry()}
}

type dirFS struct {
	root  string
	reads *registry
	// hook, when set (by this package's tests only), runs inside every
	// read once it is registered as in flight: a read that blocks there
	// is a read stuck in the kernel.
	hook func(path string)
}

// Root returns the host directory that an FS made by Dir reads, and false
// for any other FS (test doubles). Code that must hand a path to a library
// that cannot take a root (rdmamap reads /sys by fixed paths) uses it to
// tell whether the FS is the live one.
func Root(f FS) (string, bool) {
	d, ok := f.(*dirFS)
	if !ok {
		return "", false
	}
	return d.root, true
}

func (d *dirFS) path(name string) string { return d.root + "/" + name }

// enter registers a read of p as in flight, or refuses it with a
// *StuckError when an earlier read of p has not returned for too long.
// The caller calls d.reads.end(p, start) when its read returns.
func (d *dirFS) enter(op, p string) (start time.Duration, err error) {
	start, err = d.reads.begin(op, p)
	if err == nil && d.hook != nil {
		d.hook(p)
	}
	return start, err
}

// ReadFile implements FS.
func (d *dirFS) ReadFile(name string) ([]byte, error) {
	p := d.path(name)
	start, err := d.enter("read", p)
	if err != nil {
		return nil, err
	}
	defer d.reads.end(p, start)
	return readFile(p)
}

// readFile reads with plain system calls into a small buffer: sysfs reports
// every attribute as 4096 bytes long, so os.ReadFile would allocate a page per
// attribute, and a scrape reads hundreds of them.
func readFile(p string) ([]byte, error) {
	var stack [128]byte
	buf, err := readInto(p, stack[:0], false)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(buf))
	copy(out, buf)
	return out, nil
}

// readInto reads p into buf, grown as needed. short ends the read at the
// first read() that returns less than the buffer holds (a sysfs attribute
// comes whole in one; Attr reads kept past the descriptor budget).
func readInto(p string, buf []byte, short bool) ([]byte, error) {
	fd, err := open(p)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer syscall.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			// Checked before growing: the buffer never holds more than
			// one byte past the limit.
			if len(buf) > MaxFileSize {
				return nil, &fs.PathError{Op: "read", Path: p, Err: ErrTooLarge}
			}
			buf = grow(buf)
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			// Only a FIFO, socket or device would block: the file
			// is not what it should be.
			return nil, special(fd, p, err)
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: p, Err: err}
		case n == 0 && len(buf) == 0:
			// Empty: a FIFO with no writer reads so too. Checked
			// only here, so a normal read costs no extra call.
			if err := special(fd, p, nil); err != nil {
				return nil, err
			}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if short && len(buf) < cap(buf) {
			return buf, nil
		}
	}
}

// grow doubles a full buffer: a file read whole may be megabytes, and
// append's gentler growth for big slices would copy it many times over. It stops at one byte past MaxFileSize, enough to tell a file
// that is too large.
func grow(buf []byte) []byte {
	c := min(2*cap(buf), MaxFileSize+1)
	grown := make([]byte, len(buf), c)
	copy(grown, buf)
	return grown
}

// special returns ErrNotRegular for an open file that is not a regular
// file, else readErr (nil: the regular file was fine).
func special(fd int, p string, readErr error) error {
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: p, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return &fs.PathError{Op: "read", Path: p, Err: ErrNotRegular}
	}
	if readErr != nil {
		return &fs.PathError{Op: "read", Path: p, Err: readErr}
	}
	return nil
}

// open opens a host file for reading without blocking: O_NONBLOCK makes a
// FIFO in place of an attribute open at once (and then read empty or
// EAGAIN) instead of waiting forever for a writer; it changes nothing for
// regular files. O_NOCTTY: a terminal in its place must not become ours.
func open(p string) (int, error) {
	for {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func fstat(fd int, st *syscall.Stat_t) error {
	for {
		err := syscall.Fstat(fd, st)
		if err != syscall.EINTR {
			return err
		}
	}
}

// ReadDir implements FS.
func (d *dirFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p := d.path(name)
	start, err := d.enter("readdir", p)
	if err != nil {
		return nil, err
	}
	defer d.reads.end(p, start)
	return readDir(p)
}

// readDir is os.ReadDir with O_DIRECTORY: a FIFO in place of a directory
// then fails to open (ENOTDIR) instead of blocking the open.
func readDir(p string) ([]fs.DirEntry, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// ReadLink implements FS.
func (d *dirFS) ReadLink(name string) (string, error) {
	p := d.path(name)
	start, err := d.enter("readlink", p)
	if err != nil {
		return "", err
	}
	defer d.reads.end(p, start)
	return os.Readlink(p)
}

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
	explicit := map[string]string{}
	if p.Sysfs != "" {
		explicit["--path.sysfs"] = p.Sysfs
	}
	if p.Procfs != "" {
		explicit["--path.procfs"] = p.Procfs
	}
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
	// tree with only /sys), but a path given explicitly must exist (a typo
	// would otherwise read as "RDMA core not loaded", a false diagnosis),
	// and one that exists must be a directory.
	for flag, dir := range map[string]string{"--path.sysfs": p.Sysfs, "--path.procfs": p.Procfs} {
		fi, err := os.Stat(dir)
		switch {
		case err != nil && explicit[flag] != "":
			return p, fmt.Errorf("%s: %w", flag, err)
		case err == nil && !fi.IsDir():
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
func (d *dirFS) ReadTail(name string, n int64) ([]byte, error) {
	p := d.path(name)
	if n <= 0 {
		return nil, fmt.Errorf("read tail of %s: %d bytes asked", p, n)
	}
	start, err := d.enter("read", p)
	if err != nil {
		return nil, err
	}
	defer d.reads.end(p, start)
	return readTail(p, n)
}

func readTail(p string, n int64) ([]byte, error) {
	fd, err := open(p)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: p, Err: err}
	}
	// A FIFO or device has no end to read from.
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, &fs.PathError{Op: "read", Path: p, Err: ErrNotRegular}
	}
	// One byte before the n: a cut right after a newline keeps its line.
	off := max(st.Size-n-1, 0)
	// The file may grow between the stat and the read: read what was
	// there at the stat, never more than n.
	buf := make([]byte, st.Size-off)
	m, err := preadFull(fd, buf, off)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	buf = buf[:m]
	if off > 0 {
		buf = fromLine(buf)
	}
	return buf, nil
}

// preadFull reads buf from off until it is full or the file ends (it may
// have shrunk since the stat).
func preadFull(fd int, buf []byte, off int64) (int, error) {
	m := 0
	for m < len(buf) {
		k, err := syscall.Pread(fd, buf[m:], off+int64(m))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return m, err
		}
		if k == 0 {
			break
		}
		m += k
	}
	return m, nil
}
