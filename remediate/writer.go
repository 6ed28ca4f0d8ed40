// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Area names the root a journaled path is relative to: the host's root
// (--path.rootfs), its sysfs or its procfs (--path.sysfs, --path.procfs).
type Area string

// The areas a change can write to.
const (
	AreaRoot Area = "root"
	AreaSys  Area = "sys"
	AreaProc Area = "proc"
	// AreaRDMA is no directory: the running kernel's optional counters
	// of each RDMA port (DEVICE/PORT), read and written through RDMA
	// netlink (DirWriter.Counters) like an attribute written in place.
	AreaRDMA Area = "rdma"
)

// Writer is the one seam every change goes through: all writes land below
// the roots it was built with, so tests apply to copies of fixture trees
// and inject failures. Paths are slash-separated and relative to the area.
type Writer interface {
	ReadFile(a Area, name string) ([]byte, error)
	// Exists reports whether name exists (any kind).
	Exists(a Area, name string) (bool, error)
	// Lstat describes name.
	Lstat(a Area, name string) (fs.FileInfo, error)
	// WriteInPlace opens an existing file and writes data (sysfs and
	// procfs attributes cannot be replaced by a rename).
	WriteInPlace(a Area, name string, data []byte) error
	// WriteAtomic replaces or creates a regular file: temp file, fsync,
	// rename, fsync of the directory, so a crash leaves old or new.
	WriteAtomic(a Area, name string, data []byte, perm fs.FileMode) error
	Remove(a Area, name string) error
	Mkdir(a Area, name string) error
	// WriteRecord writes one record (line) of a kernel attribute that
	// takes one record per write and prints all of them back, keyed by
	// the record's first field: rdma.max takes "mlx5_0 hca_handle=8
	// hca_object=max" and leaves the other devices' lines alone.
	WriteRecord(a Area, name, key string, line []byte) error
	// Lock takes the exclusive lock of the tree's journal for an apply or
	// rollback, or fails at once with a *LockedError naming the holder.
	// release unlocks it, removing the state directories it made when no
	// journal is left in them.
	Lock() (release func() error, err error)
	// CleanState reports whether the state directory exists, after
	// removing what a run killed while it made the state directories
	// left; a symbolic link on the way is a *SymlinkError.
	CleanState() (exists bool, err error)
	// RemoveTemps removes the temp files a WriteAtomic of name killed
	// before its rename left.
	RemoveTemps(a Area, name string) error
	// Tree identifies the tree (its root) the journal belongs to.
	Tree() (TreeID, error)
}

// Roots are the directories the areas resolve to.
type Roots struct{ Root, Sys, Proc string }

// DirWriter writes below Roots.
type DirWriter struct {
	Roots Roots
	// Counters is AreaRDMA: the running kernel's optional counters; nil
	// on a tree that is not the running kernel's, where AreaRDMA refuses.
	Counters Counters
	// kernelFS reports whether a path is on a kernel filesystem; nil
	// means statfs. Tests set it to see what the kernel would be sent.
	kernelFS func(path string) (bool, error)
	// stateStep, when set, runs before each change making the state
	// directories does; tests stop there as a kill would (statedir.go).
	stateStep func(what string) error
}

func (w DirWriter) path(a Area, name string) (string, error) {
	var root string
	switch a {
	case AreaRoot:
		root = w.Roots.Root
	case AreaSys:
		root = w.Roots.Sys
	case AreaProc:
		root = w.Roots.Proc
	case AreaRDMA:
		return "", fmt.Errorf("%s:%s: the optional counters of a port are read and written in place, never as a file", a, name)
	default:
		return "", fmt.Errorf("unknown area %q", a)
	}
	clean := filepath.Clean("/" + filepath.FromSlash(name))
	if clean == "/" || strings.Contains(name, "..") {
		return "", fmt.Errorf("%s:%s: not a path below the root", a, name)
	}
	return filepath.Join(root, clean), nil
}

// ErrSymlink is the error of a read or write that would go through a
// symbolic link: a link where remediate writes its own file would send the
// write (and the mode of the file it makes) wherever the link points.
var ErrSymlink = errors.New("is a symbolic link: remediate never reads or writes through one; make it a regular file (or remove it) and plan again")

// SymlinkError names the link and where it points.
type SymlinkError struct{ Path, Target string }

func (e *SymlinkError) Error() string {
	return fmt.Sprintf("%s (-> %s) %v", e.Path, e.Target, ErrSymlink)
}

// Unwrap makes errors.Is(err, ErrSymlink) hold.
func (e *SymlinkError) Unwrap() error { return ErrSymlink }

// ErrNotRegular is the error of a read or write of something that is not
// a regular file: a FIFO or device there would block or do something else.
var ErrNotRegular = errors.New("is not a regular file")

func symlinkError(p string) error {
	target, _ := os.Readlink(p)
	return &SymlinkError{Path: p, Target: target}
}

// resolve is path, and below the root area (where remediate writes its
// drop-ins and the journal) it refuses a directory on the way that is a
// symbolic link: writing below it would land wherever it points. sysfs
// paths go through links by design (class/net/ib0), so there only the
// last component is refused, when it is opened.
func (w DirWriter) resolve(a Area, name string) (string, error) {
	p, err := w.path(a, name)
	if err != nil || a != AreaRoot {
		return p, err
	}
	parts := strings.Split(strings.Trim(path.Clean("/"+name), "/"), "/")
	dir := w.Roots.Root
	for _, part := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil // nothing below exists either
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", symlinkError(dir)
		}
	}
	return p, nil
}

// openNoFollow opens p without following a symbolic link at its end,
// without blocking on a FIFO, and only if it is a regular file.
func openNoFollow(p string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(p, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, symlinkError(p)
		}
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s %w (%v)", p, ErrNotRegular, fi.Mode().Type())
	}
	return f, nil
}

func readRegular(p string) ([]byte, error) {
	f, err := openNoFollow(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return b, nil
}

// ReadFile implements Writer.
func (w DirWriter) ReadFile(a Area, name string) ([]byte, error) {
	if a == AreaRDMA {
		return w.readCounters(name)
	}
	p, err := w.resolve(a, name)
	if err != nil {
		return nil, err
	}
	return readRegular(p)
}

// Exists implements Writer.
func (w DirWriter) Exists(a Area, name string) (bool, error) {
	if a == AreaRDMA {
		return w.countersExist(name)
	}
	p, err := w.path(a, name)
	if err != nil {
		return false, err
	}
	_, err = os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Lstat implements Writer.
func (w DirWriter) Lstat(a Area, name string) (fs.FileInfo, error) {
	p, err := w.path(a, name)
	if err != nil {
		return nil, err
	}
	return os.Lstat(p)
}

// WriteInPlace implements Writer. It never creates the file: a vanished
// attribute (an IRQ gone, a netdev renamed) is an error, not a new file.
func (w DirWriter) WriteInPlace(a Area, name string, data []byte) error {
	if a == AreaRDMA {
		return w.writeCounters(name, data)
	}
	p, err := w.resolve(a, name)
	if err != nil {
		return err
	}
	f, err := openNoFollow(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	return f.Close()
}

// tempPrefix begins the name of each temp file WriteAtomic writes name
// through; 16 random hex digits follow (isTemp). The name is made with
// O_EXCL, so an entry already there is never written nor removed; the
// prefix lets rollback find the temp files a killed run left beside a
// journaled path (RemoveTemps).
func tempPrefix(name string) string {
	return "." + path.Base(name) + ".rdma-doctor-tmp."
}

// isTemp reports whether entry is a temp file name of name.
func isTemp(name, entry string) bool { return randomNamed(entry, tempPrefix(name)) }

// tempTries bounds the random names tried when one exists already.
const tempTries = 8

// WriteAtomic implements Writer. The mode is set on the temp file, so
// the file never has another one, whatever the umask. A symbolic link at
// name is replaced, never followed (the rename replaces the link itself).
func (w DirWriter) WriteAtomic(a Area, name string, data []byte, perm fs.FileMode) error {
	p, err := w.resolve(a, name)
	if err != nil {
		return err
	}
	var f *os.File
	var tmp string
	for range tempTries {
		tmp = filepath.Join(filepath.Dir(p), tempPrefix(name)+randomSuffix())
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	if err := writeSynced(f, data, perm); err != nil {
		os.Remove(tmp) // ours: made with O_EXCL
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(p))
}

// writeSynced writes data, sets the mode, fsyncs and closes f.
func writeSynced(f *os.File, data []byte, perm fs.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// RemoveTemps implements Writer: the regular files beside name whose
// name is one of its temp names.
func (w DirWriter) RemoveTemps(a Area, name string) error {
	p, err := w.resolve(a, name)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(filepath.Dir(p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !isTemp(name, e.Name()) || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(filepath.Dir(p), e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// TreeID identifies a tree by its root: the journal keeps it, and is
// refused on another tree (ErrOtherTree).
type TreeID struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// Same reports whether t and o are one tree: the same inode, and the same
// device or, when the device was renumbered (a reboot), the same path.
func (t TreeID) Same(o TreeID) bool {
	return t.Ino == o.Ino && (t.Dev == o.Dev || t.Path == o.Path)
}

// Tree implements Writer.
func (w DirWriter) Tree() (TreeID, error) {
	abs, err := filepath.Abs(w.Roots.Root)
	if err != nil {
		return TreeID{}, err
	}
	var st unix.Stat_t
	if err := unix.Stat(abs, &st); err != nil {
		return TreeID{}, &fs.PathError{Op: "stat", Path: abs, Err: err}
	}
	return TreeID{Path: abs, Dev: st.Dev, Ino: st.Ino}, nil
}

// Remove implements Writer. A symbolic link at name is removed itself.
func (w DirWriter) Remove(a Area, name string) error {
	p, err := w.resolve(a, name)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

// DirMode is the mode of every directory remediate creates, whatever the
// umask: drop-in directories are read by services and logins.
const DirMode fs.FileMode = 0o755

// Mkdir implements Writer.
func (w DirWriter) Mkdir(a Area, name string) error {
	p, err := w.resolve(a, name)
	if err != nil {
		return err
	}
	if err := os.Mkdir(p, DirMode); err != nil {
		return err
	}
	return os.Chmod(p, DirMode)
}

// ErrNoRecord is WriteRecord's error for a key the file has no record of
// (the kernel's ENODEV for an unknown device).
var ErrNoRecord = errors.New("no record with that key")

// WriteRecord implements Writer. On a kernel filesystem (cgroupfs, sysfs,
// procfs) the line alone is written and the kernel merges it. On any other
// filesystem, a copy of a host tree, the line replaces the record with the
// same key and the file is rewritten: the content the kernel would show
// afterwards. A key the file has no record of is ErrNoRecord there, as the
// kernel refuses an unknown device.
func (w DirWriter) WriteRecord(a Area, name, key string, line []byte) error {
	p, err := w.resolve(a, name)
	if err != nil {
		return err
	}
	isKernel := w.kernelFS
	if isKernel == nil {
		isKernel = onKernelFS
	}
	kernel, err := isKernel(p)
	if err != nil {
		return err
	}
	if kernel {
		return w.WriteInPlace(a, name, line)
	}
	old, err := readRegular(p)
	if err != nil {
		return err
	}
	merged, ok := replaceRecord(string(old), key, strings.TrimRight(string(line), "\n"))
	if !ok {
		return fmt.Errorf("%s: %s: %w", p, key, ErrNoRecord)
	}
	return w.WriteInPlace(a, name, []byte(merged))
}

// onKernelFS reports whether path is on a filesystem the kernel serves
// attributes from, where a write is a command rather than content.
func onKernelFS(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	switch int64(st.Type) {
	case unix.CGROUP2_SUPER_MAGIC, unix.CGROUP_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.PROC_SUPER_MAGIC:
		return true, nil
	}
	return false, nil
}

// RecordLine returns the line of content whose first field is key.
func RecordLine(content, key string) (string, bool) {
	for _, l := range strings.Split(content, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == key {
			return l, true
		}
	}
	return "", false
}

// replaceRecord replaces the line whose first field is key, keeping every
// other byte of content.
func replaceRecord(content, key, line string) (string, bool) {
	lines := strings.Split(content, "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == key {
			lines[i] = line
			return strings.Join(lines, "\n"), true
		}
	}
	return content, false
}

// ErrInjected is the failure Faulty injects.
var ErrInjected = errors.New("injected write failure")

// Faulty wraps a Writer and fails the write after FailAfter successful
// ones, and every write after it, as a process killed half-way would.
// Reads always pass. For tests of interrupted applies.
type Faulty struct {
	W         Writer
	FailAfter int

	mu     sync.Mutex
	writes int
}

func (f *Faulty) count() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writes >= f.FailAfter {
		return ErrInjected
	}
	f.writes++
	return nil
}

// Writes is the number of writes that went through.
func (f *Faulty) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// ReadFile implements Writer.
func (f *Faulty) ReadFile(a Area, name string) ([]byte, error) { return f.W.ReadFile(a, name) }

// Exists implements Writer.
func (f *Faulty) Exists(a Area, name string) (bool, error) { return f.W.Exists(a, name) }

// Lstat implements Writer.
func (f *Faulty) Lstat(a Area, name string) (fs.FileInfo, error) { return f.W.Lstat(a, name) }

// WriteInPlace implements Writer.
func (f *Faulty) WriteInPlace(a Area, name string, data []byte) error {
	if err := f.count(); err != nil {
		return err
	}
	return f.W.WriteInPlace(a, name, data)
}

// WriteAtomic implements Writer.
func (f *Faulty) WriteAtomic(a Area, name string, data []byte, perm fs.FileMode) error {
	if err := f.count(); err != nil {
		return err
	}
	return f.W.WriteAtomic(a, name, data, perm)
}

// Remove implements Writer.
func (f *Faulty) Remove(a Area, name string) error {
	if err := f.count(); err != nil {
		return err
	}
	return f.W.Remove(a, name)
}

// WriteRecord implements Writer.
func (f *Faulty) WriteRecord(a Area, name, key string, line []byte) error {
	if err := f.count(); err != nil {
		return err
	}
	return f.W.WriteRecord(a, name, key, line)
}

// Lock implements Writer. It is not a write of the apply's and never
// fails by injection.
func (f *Faulty) Lock() (func() error, error) { return f.W.Lock() }

// CleanState implements Writer; like Lock, it never fails by injection.
func (f *Faulty) CleanState() (bool, error) { return f.W.CleanState() }

// RemoveTemps implements Writer; it removes only what a killed write
// left and never fails by injection.
func (f *Faulty) RemoveTemps(a Area, name string) error { return f.W.RemoveTemps(a, name) }

// Tree implements Writer.
func (f *Faulty) Tree() (TreeID, error) { return f.W.Tree() }

// Mkdir implements Writer.
func (f *Faulty) Mkdir(a Area, name string) error {
	if err := f.count(); err != nil {
		return err
	}
	return f.W.Mkdir(a, name)
}
