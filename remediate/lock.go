// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockPath is the file apply and rollback hold an exclusive flock on for
// their whole run, beside the journal. Two applies at once would each
// journal the other's new values as "old" and lose the real undo data.
// It holds the holder's pid, so the one refused can name it.
const LockPath = StateDir + "/remediate.lock"

// lockTries bounds the retries when the lock file is removed or replaced
// by a run that is finishing while this one opens it.
const lockTries = 16

// ErrLocked is the error of an apply or rollback that found another one
// running on the same tree.
var ErrLocked = errors.New("another remediate apply/rollback is running")

// LockedError is ErrLocked with the pid written by the holder.
type LockedError struct {
	// PID is 0 when the holder has not written it yet.
	PID int
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%v (pid %d)", ErrLocked, e.PID)
	}
	return fmt.Sprintf("%v (pid not yet written to /%s)", ErrLocked, LockPath)
}

// Unwrap makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock implements Writer. It never waits: a second apply refuses at once
// rather than applying a plan made before the first one changed the host.
func (w DirWriter) Lock() (release func() error, err error) {
	h, err := w.lock()
	if err != nil {
		return nil, err
	}
	return h.release, nil
}

// lock takes the lock through the state directories, made as needed,
// each opened without following a link (statedir.go).
func (w DirWriter) lock() (*heldLock, error) {
	name := path.Base(LockPath)
	for range lockTries {
		c, err := w.openState()
		if err != nil {
			return nil, err
		}
		if !c.complete() {
			err := w.makeState(c)
			c.close()
			if err != nil {
				return nil, fmt.Errorf("create /%s: %w", StateDir, err)
			}
			continue
		}
		if err := w.step("lock"); err != nil {
			c.close()
			return nil, err
		}
		fd, err := unix.Openat(c.last(), name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.ENOENT) {
			c.close()
			continue // a finishing run removed the directory meanwhile
		}
		if errors.Is(err, unix.ELOOP) {
			err = symlinkError(filepath.Join(c.abs(len(stateParts)), name))
		}
		if err != nil {
			c.close()
			return nil, fmt.Errorf("open lock /%s: %w", LockPath, err)
		}
		f := os.NewFile(uintptr(fd), "/"+LockPath)
		h := &heldLock{chain: c, f: f}
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			h.abandon()
			return nil, fmt.Errorf("lock /%s %w", LockPath, ErrNotRegular)
		}
		held, err := flockNB(f)
		if err != nil {
			h.abandon()
			return nil, fmt.Errorf("lock /%s: %w", LockPath, err)
		}
		if !held {
			// The holder writes its pid right after it takes the lock;
			// give it a moment (a loaded host) so the refusal can name it.
			pid := readPID(f)
			for i := 0; pid == 0 && i < 100; i++ {
				time.Sleep(5 * time.Millisecond)
				pid = readPID(f)
			}
			h.abandon()
			return nil, &LockedError{PID: pid}
		}
		// The holder before us removes the file before it unlocks: a
		// lock on a file no longer at the path guards nothing.
		if !stillAt(f, c.last(), name) {
			h.abandon()
			continue
		}
		if err := writePID(f); err != nil {
			h.abandon()
			return nil, fmt.Errorf("lock /%s: %w", LockPath, err)
		}
		if err := c.rootLock(unix.LOCK_UN); err != nil {
			h.abandon()
			return nil, err
		}
		return h, nil
	}
	return nil, fmt.Errorf("lock /%s: replaced %d times while taking it", LockPath, lockTries)
}

// flockNB takes an exclusive flock without waiting; false when another
// open file description holds it.
func flockNB(f *os.File) (bool, error) { return flockFD(int(f.Fd())) }

// flockFD is flockNB of a descriptor.
func flockFD(fd int) (bool, error) {
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		default:
			return false, err
		}
	}
}

// stillAt reports whether the open file is still the one at name in dir.
func stillAt(f *os.File, dir int, name string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Fstatat(dir, name, &b, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}
