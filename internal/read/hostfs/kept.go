// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"errors"
	"io/fs"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Attr is one attribute file kept open and re-read in place with pread at
// offset 0: one system call per scrape instead of open, read and close.
// sysfs and procfs produce the content anew on every read at offset 0
// (seq_file resets its iterator there), so nothing is served stale; a
// file whose kernel object went away answers ENODEV and is reopened by
// path once, which fails when it is really gone. A file that did not
// exist stays absent without a system call until the Attr is replaced
// (its device's static attributes are re-read).
//
// An Attr of an FS that is not Dir's reads with its ReadFile. Safe for
// concurrent use; reads of one Attr take turns. Close it when done: Dir's
// FS counts its reads in flight (ReadStats) until then.
type Attr struct {
	fs   FS
	name string
	// reg is Dir's FS's registry, where the Attr is listed until closed.
	// The host path (the FS's root and name) is not kept: it is needed
	// to open and in errors only, and a 64-device host has thousands of
	// Attrs (docs/measurements.md#hostfs).
	reg *registry
	// toEOF reads until end of file: a procfs table (seq_file with many
	// records) may read short before its end. A sysfs attribute is one
	// record and comes whole in the first read.
	toEOF bool
	// retryMissing opens a missing file again on every read (Kept's files
	// come and go with their netdevs) instead of remembering it absent.
	retryMissing bool

	// The Attr's own stuck-read guard, in place of the FS's registry of
	// paths: n is the reads in flight (those waiting their turn
	// included), since the start (mono()+1; 0: none) of the one inside
	// the kernel now. Atomic, so a read is refused at once while another
	// is stuck holding mu.
	n     atomic.Int32
	since atomic.Int64
	// closed is set by Close, which does not wait for a read in flight
	// (one stuck in the kernel holds mu forever): that read releases
	// the descriptor when it returns.
	closed atomic.Bool

	mu      sync.Mutex
	fd      int // -1: not open
	missing error
	// refusedErr is the answer of a driver that refuses the attribute
	// for good; later reads return it as a RefusedError.
	refusedErr error
}

// ErrRefused marks an attribute the driver refused on an earlier read
// (EINVAL, EACCES, EPERM, EOPNOTSUPP, EISDIR) and that is not asked again:
// a restricted function or a counter the firmware does not implement. It
// is no new failure: collectors count it apart from their errors.
var ErrRefused = errors.New("refused by the driver on an earlier read, not asked again")

// RefusedError is a remembered refusal: the first answer, and ErrRefused.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() + " (refused before: not asked again)" }
func (e *RefusedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRefused) true (a single Unwrap keeps it one
// error where errors.Join trees are flattened).
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// NewAttr returns the Attr of a sysfs attribute name below f; nothing is
// opened yet.
func NewAttr(f FS, name string) *Attr { return newAttr(f, name, false) }

// NewTable returns the Attr of a file of many records (a procfs table such
// as /proc/interrupts), read until end of file every time.
func NewTable(f FS, name string) *Attr { return newAttr(f, name, true) }

func newAttr(f FS, name string, toEOF bool) *Attr {
	a := &Attr{fs: f, name: name, fd: -1, toEOF: toEOF}
	if d, ok := f.(*dirFS); ok {
		a.reg = d.reads
		a.reg.addAttr(a)
	}
	return a
}

// Name is the attribute's name below its FS root.
func (a *Attr) Name() string { return a.name }

// Read reads the attribute into buf (grown as needed) and returns the
// filled part, valid until buf is reused.
func (a *Attr) Read(buf []byte) ([]byte, error) {
	d, ok := a.fs.(*dirFS)
	if !ok {
		return readAttrFS(a.fs, a.name, buf)
	}
	return d.readKept(a, buf)
}

// Close closes the file, or has the read in flight close it when it
// returns; it never waits for a read. A later Read reads without keeping
// the file open.
func (a *Attr) Close() {
	if a.closed.Swap(true) {
		return
	}
	if a.reg != nil {
		a.reg.removeAttr(a)
	}
	if a.mu.TryLock() {
		a.release()
		a.mu.Unlock()
	}
}

// inFlight reports the Attr's reads in flight and, when one is inside
// the kernel, when it started.
func (a *Attr) inFlight() (n int, start time.Duration, busy bool) {
	n = int(a.n.Load())
	s := a.since.Load()
	return n, time.Duration(s - 1), n > 0 && s != 0
}

// release closes the descriptor and returns it to the FS's budget. The
// caller holds mu.
func (a *Attr) release() {
	if a.fd >= 0 {
		syscall.Close(a.fd)
		a.fd = -1
		kept.Add(-1)
	}
}

// MaxKept is the budget of descriptors the process keeps open, over every
// FS (Attrs and listed directories alike): each pins a few KiB of kernel
// memory outside the process's RSS (the open file, and on sysfs the
// kernfs open file with its seq_file and the page-sized buffer of its
// first read, kept until close), so the budget bounds that memory while
// still keeping every file of a 64-device host
// (docs/measurements.md#hostfs). Past it, a file is read with open, read
// and close, the same value at a few more system calls. KeptFiles says
// how many are kept now (rdma_host_kept_descriptors).
const MaxKept = 4096

// keptMax is the budget: MaxKept, or a quarter of the soft RLIMIT_NOFILE
// when that is less (Go raises it to the hard limit at start; the rest is
// for sockets and everything else). A variable for tests.
var keptMax = sync.OnceValue(func() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 256
	}
	return int64(min(rl.Cur/4, MaxKept))
})

func (d *dirFS) readKept(a *Attr, buf []byte) ([]byte, error) {
	if cap(buf) < 64 {
		buf = make([]byte, 0, 4096)
	}
	// Asked before a.mu is taken: a read stuck in the kernel holds a.mu,
	// and the next one must not wait for it.
	now := mono()
	if _, start, busy := a.inFlight(); busy && now-start >= d.reads.after() {
		d.reads.refused.Add(1)
		return nil, &StuckError{Op: "read", Path: d.path(a.name), Since: epoch.Add(start), For: now - start}
	}
	a.n.Add(1)
	a.mu.Lock()
	a.since.Store(int64(now) + 1)
	if d.hook != nil {
		d.hook(d.path(a.name))
	}
	b, err := a.readLocked(d, buf)
	a.since.Store(0)
	closed := a.closed.Load()
	if closed {
		a.release()
	}
	a.mu.Unlock()
	a.n.Add(-1)
	if !closed && a.closed.Load() && a.mu.TryLock() {
		// Close came while this read held mu and left the descriptor
		// to it.
		a.release()
		a.mu.Unlock()
	}
	return b, err
}

// readLocked reads the attribute; the caller holds a.mu.
func (a *Attr) readLocked(d *dirFS, buf []byte) ([]byte, error) {
	if a.refusedErr != nil {
		return nil, &RefusedError{Err: a.refusedErr}
	}
	if a.missing != nil {
		if !a.retryMissing {
			return nil, a.missing
		}
		a.missing = nil
	}
	if a.fd < 0 {
		if closed := a.closed.Load(); closed || kept.Add(1) > keptMax() {
			if !closed {
				kept.Add(-1)
			}
			return readInto(d.path(a.name), buf, !a.toEOF)
		}
		if err := a.open(d.path(a.name)); err != nil {
			return nil, err
		}
	}
	b, err := preadInto(a.fd, d, a.name, buf, a.toEOF)
	if err != nil && refused(err) {
		// The driver refuses this attribute on every read (restricted
		// ConnectX-7 functions answer EINVAL and log a kernel error each
		// time): remember the answer until the Attr is replaced (its
		// device's static attributes are re-read), so the host is not
		// asked again on every scrape. The error is still reported.
		a.refusedErr = err
		a.release()
		return nil, err
	}
	if err != nil && reopen(err) {
		// The kernel object behind the descriptor went away (a driver
		// reload): open the path again, which fails if it is gone.
		a.release()
		kept.Add(1)
		if err := a.open(d.path(a.name)); err != nil {
			return nil, err
		}
		b, err = preadInto(a.fd, d, a.name, buf, a.toEOF)
	}
	return b, err
}

// open opens p into a.fd; the caller has taken a budget slot, which a
// failure returns. A missing or refused file is remembered.
func (a *Attr) open(p string) error {
	fd, err := open(p)
	if err != nil {
		kept.Add(-1)
		perr := &fs.PathError{Op: "open", Path: p, Err: err}
		switch {
		case refused(err):
			a.refusedErr = perr
		case errors.Is(err, fs.ErrNotExist):
			a.missing = perr
		}
		return perr
	}
	a.fd = fd
	return nil
}

// IsRefusal reports an error of an attribute the driver or the kernel
// refuses for good (EINVAL, EACCES, EPERM, EOPNOTSUPP, EISDIR).
func IsRefusal(err error) bool { return refused(err) }

// refused reports the errors of an attribute the driver or the kernel
// refuses for good: asking again changes nothing and may flood the kernel
// log.
func refused(err error) bool {
	for _, e := range []error{syscall.EINVAL, syscall.EACCES, syscall.EPERM, syscall.EOPNOTSUPP, syscall.EISDIR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// reopen reports the errors of a descriptor whose file went away under
// it: sysfs answers ENODEV once its kobject is removed.
func reopen(err error) bool {
	return errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ESTALE) || errors.Is(err, syscall.EBADF)
}

// preadInto reads a whole file from offset 0 into buf, stopping at the
// first short read (an attribute comes whole in one) unless toEOF. An
// error names d's path of name.
func preadInto(fd int, d *dirFS, name string, buf []byte, toEOF bool) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > MaxFileSize {
				return nil, &fs.PathError{Op: "read", Path: d.path(name), Err: ErrTooLarge}
			}
			buf = grow(buf)
		}
		n, err := syscall.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN || err == syscall.ESPIPE:
			// A FIFO, socket or device: not a file to read in place.
			return nil, special(fd, d.path(name), err)
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: d.path(name), Err: err}
		case n == 0 && len(buf) == 0:
			if err := special(fd, d.path(name), nil); err != nil {
				return nil, err
			}
		}
		buf = buf[:len(buf)+n]
		if n == 0 || !toEOF && len(buf) < cap(buf) {
			return buf, nil
		}
	}
}

// kept counts the descriptors Attrs keep open in this process.
var kept atomic.Int64

// keptCount is the number of descriptors kept open (tests).
func keptCount() int64 { return kept.Load() }

// KeptFiles is the number of descriptors the process keeps open to read
// again in place (Attrs and listed directories, over every FS): at most
// MaxKept.
func KeptFiles() int { return int(kept.Load()) }

// Kept is f, but the files it reads are kept open as Attrs and re-read in
// place: for a small set of sysfs attributes read on every scrape (the
// netdevs' operstate, carrier, flags and MTU), named again and again. A
// missing file is tried again on every read: its netdev may come back.
// Directories and links are read as f reads them.
func Kept(f FS) FS {
	if _, ok := f.(*dirFS); !ok {
		return f
	}
	return &keptFS{FS: f, attrs: map[string]*Attr{}}
}

type keptFS struct {
	FS
	mu    sync.Mutex
	attrs map[string]*Attr
}

// ReadFile implements FS; the content is the caller's.
func (k *keptFS) ReadFile(name string) ([]byte, error) {
	k.mu.Lock()
	a := k.attrs[name]
	if a == nil {
		a = newAttr(k.FS, name, false)
		a.retryMissing = true
		k.attrs[name] = a
	}
	k.mu.Unlock()
	return a.Read(make([]byte, 0, 128))
}
