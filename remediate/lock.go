// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	p, err := w.path(AreaRoot, LockPath)
	if err != nil {
		return nil, err
	}
	for range lockTries {
		if err := w.makeStateDirs(); err != nil {
			return nil, err
		}
		f, err := openNoFollow(p, os.O_RDWR|os.O_CREATE, 0o600)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a finishing run removed the directory meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("open lock /%s: %w", LockPath, err)
		}
		held, err := flockNB(f)
		if err != nil {
			f.Close()
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
			f.Close()
			return nil, &LockedError{PID: pid}
		}
		// The holder before us removes the file before it unlocks: a
		// lock on a file no longer at the path guards nothing.
		if !stillAt(f, p) {
			f.Close()
			continue
		}
		if err := writePID(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock /%s: %w", LockPath, err)
		}
		return func() error { return w.unlock(f, p) }, nil
	}
	return nil, fmt.Errorf("lock /%s: replaced %d times while taking it", LockPath, lockTries)
}

// unlock removes the lock file while still holding it, then the state
// directories when no journal is left in them, then releases the lock.
func (w DirWriter) unlock(f *os.File, p string) error {
	err := os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if ok, jerr := w.Exists(AreaRoot, JournalPath); jerr == nil && !ok {
		w.removeEmptyStateDirs()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unlock /%s: %w", LockPath, err)
	}
	return nil
}

// makeStateDirs creates var/lib/rdma_doctor below the root as needed.
func (w DirWriter) makeStateDirs() error {
	dir := ""
	for _, part := range strings.Split(StateDir, "/") {
		dir = strings.TrimPrefix(dir+"/"+part, "/")
		ok, err := w.Exists(AreaRoot, dir)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		if err := w.Mkdir(AreaRoot, dir); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create /%s: %w", dir, err)
		}
	}
	return nil
}

// removeEmptyStateDirs removes var/lib/rdma_doctor, var/lib and var where
// they are empty: on a tree that had none, they were the journal's own.
func (w DirWriter) removeEmptyStateDirs() {
	parts := strings.Split(StateDir, "/")
	for i := len(parts); i > 0; i-- {
		if err := w.Remove(AreaRoot, strings.Join(parts[:i], "/")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return // not empty: someone else's too
		}
	}
}

// flockNB takes an exclusive flock without waiting; false when another
// open file description holds it.
func flockNB(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
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

// stillAt reports whether the open file is still the one at path p.
func stillAt(f *os.File, p string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(p)
	return err == nil && os.SameFile(a, b)
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
