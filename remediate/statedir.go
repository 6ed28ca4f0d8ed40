// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The state directory (StateDir: the lock, the journal) is reached from
// the root one directory at a time, each opened with O_NOFOLLOW relative
// to the one before: a symbolic link anywhere on the way is refused
// before anything is opened through it, and a directory swapped for a
// link after it was checked is never followed either.
//
// The directories of StateDir that do not exist are made all at once: in
// a directory of a random name beside the first missing one, with a
// record of which directories they are (CreatedRecord) in the last, then
// renamed into place. A kill leaves either nothing but that skeleton,
// which the next apply or rollback removes, or the directories with their
// record, which the unlock of the rollback removes. Directories that
// existed before are never removed.

// CreatedRecord, in StateDir, lists one a line the state directories
// remediate made (slash-separated, below the root, outermost first):
// those rollback removes.
const CreatedRecord = ".remediate-created-dirs"

// skeletonPrefix names the directory the missing state directories are
// made in before they are renamed into place; a random suffix follows.
const skeletonPrefix = ".rdma-doctor-state."

// stateParts are StateDir's components.
var stateParts = strings.Split(StateDir, "/")

// stateChain is the open chain of directories from the root to the
// deepest existing one of StateDir: fds[0] the root, fds[i] the directory
// stateParts[:i].
type stateChain struct {
	root string
	fds  []int
}

func (c *stateChain) close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

// rootLock takes (LOCK_EX) or drops (LOCK_UN) a flock on the root
// directory. It is held only while the state directories are made or
// removed and the lock file is opened, created, taken or removed: a run
// that removes them when it ends cannot then race one that opens the
// lock file in them, and one that makes them cannot race one that
// removes what a killed run left. A killed run's flock dies with it.
func (c *stateChain) rootLock(how int) error {
	for {
		err := unix.Flock(c.fds[0], how)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				return &fs.PathError{Op: "flock", Path: c.root, Err: err}
			}
			return nil
		}
	}
}

// complete reports whether the whole of StateDir is open.
func (c *stateChain) complete() bool { return len(c.fds) == len(stateParts)+1 }

// last is the deepest directory open.
func (c *stateChain) last() int { return c.fds[len(c.fds)-1] }

// rel is the path of level i below the root, for messages.
func (c *stateChain) abs(i int) string {
	return filepath.Join(c.root, filepath.FromSlash(strings.Join(stateParts[:i], "/")))
}

// openDirAt opens name in dir as a directory without following a link;
// a link is a *SymlinkError naming it.
func openDirAt(dir int, name, abs string) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			var st unix.Stat_t
			if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return -1, symlinkError(abs)
			}
			return -1, &fs.PathError{Op: "open", Path: abs, Err: unix.ENOTDIR}
		default:
			return -1, &fs.PathError{Op: "open", Path: abs, Err: err}
		}
	}
}

// openState opens the root, takes its flock (rootLock), and opens each
// existing directory of StateDir below it, stopping at the first
// missing one. The flock is held until the chain is closed or unlocked.
func (w DirWriter) openState() (*stateChain, error) {
	root, err := unix.Open(w.Roots.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: w.Roots.Root, Err: err}
	}
	c := &stateChain{root: w.Roots.Root, fds: []int{root}}
	if err := c.rootLock(unix.LOCK_EX); err != nil {
		c.close()
		return nil, err
	}
	for i, part := range stateParts {
		fd, err := openDirAt(c.last(), part, c.abs(i+1))
		if errors.Is(err, fs.ErrNotExist) {
			return c, nil
		}
		if err != nil {
			c.close()
			return nil, err
		}
		c.fds = append(c.fds, fd)
	}
	return c, nil
}

// CleanState implements Writer.
func (w DirWriter) CleanState() (bool, error) {
	c, err := w.openState()
	if err != nil {
		return false, err
	}
	defer c.close()
	if c.complete() {
		return true, nil
	}
	return false, w.removeSkeletons(c)
}

// step is the test seam of a kill: it runs before each change to the
// tree that making the state directories does; an error stops there, and
// nothing is cleaned up, as a killed process would not.
func (w DirWriter) step(what string) error {
	if w.stateStep == nil {
		return nil
	}
	if err := w.stateStep(what); err != nil {
		return fmt.Errorf("%w (%s): %w", errStep, what, err)
	}
	return nil
}

// errStep marks an error of the test seam step: nothing is cleaned up.
var errStep = errors.New("stopped by the test seam")

// makeState creates the missing directories of StateDir below the
// deepest existing one of c, as one rename; the caller opens the chain
// again.
func (w DirWriter) makeState(c *stateChain) error {
	if err := w.removeSkeletons(c); err != nil {
		return err
	}
	have := len(c.fds) - 1
	missing := stateParts[have:]
	parent := c.last()
	tmp := skeletonPrefix + randomSuffix()
	if err := w.step("mkdir " + tmp); err != nil {
		return err
	}
	if err := unix.Mkdirat(parent, tmp, 0o700); err != nil {
		return &fs.PathError{Op: "mkdir", Path: filepath.Join(c.abs(have), tmp), Err: err}
	}
	// Held (flock) until the rename, so that another run does not take
	// it for what a killed one left (removeSkeletons). One that removed
	// it before the flock makes this run try again.
	fd, err := openDirAt(parent, tmp, filepath.Join(c.abs(have), tmp))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if ok, err := flockFD(fd); err != nil || !ok {
		return err
	}
	var record strings.Builder
	for i := range missing {
		record.WriteString(strings.Join(stateParts[:have+i+1], "/") + "\n")
	}
	if err := w.buildSkeleton(fd, tmp, missing[1:], record.String(), c.abs(have)); err != nil {
		if !errors.Is(err, errStep) {
			w.removeSkeleton(parent, tmp, have+1)
		}
		return err
	}
	if err := w.step("rename " + tmp); err != nil {
		return err
	}
	err = unix.Renameat2(parent, tmp, parent, missing[0], unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without RENAME_NOREPLACE: a plain rename, when
		// nothing is there (a rename would replace an empty directory).
		var st unix.Stat_t
		if err = unix.Fstatat(parent, missing[0], &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			err = unix.Renameat(parent, tmp, parent, missing[0])
		} else if err == nil {
			err = unix.EEXIST
		}
	}
	if err != nil {
		// Made meanwhile by another run: ours goes, theirs is used.
		w.removeSkeleton(parent, tmp, have+1)
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return &fs.PathError{Op: "rename", Path: c.abs(have + 1), Err: err}
	}
	return unix.Fsync(parent)
}

// buildSkeleton makes the directories below the skeleton tmp in parent,
// each with DirMode whatever the umask, and the record in the last.
func (w DirWriter) buildSkeleton(top int, tmp string, below []string, record, where string) error {
	fds := []int{top}
	defer func() {
		for _, fd := range fds[1:] {
			unix.Close(fd)
		}
	}()
	for _, part := range below {
		if err := w.step("mkdir " + part); err != nil {
			return err
		}
		cur := fds[len(fds)-1]
		if err := unix.Mkdirat(cur, part, 0o700); err != nil {
			return &fs.PathError{Op: "mkdir", Path: filepath.Join(where, tmp, part), Err: err}
		}
		fd, err := openDirAt(cur, part, filepath.Join(where, tmp, part))
		if err != nil {
			return err
		}
		fds = append(fds, fd)
	}
	if err := w.step("record"); err != nil {
		return err
	}
	last := fds[len(fds)-1]
	rfd, err := unix.Openat(last, CreatedRecord, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "create", Path: CreatedRecord, Err: err}
	}
	f := os.NewFile(uintptr(rfd), CreatedRecord)
	if err := writeSynced(f, []byte(record), 0o600); err != nil {
		return err
	}
	for _, fd := range fds {
		if err := unix.Fchmod(fd, uint32(DirMode)); err != nil {
			return err
		}
		if err := unix.Fsync(fd); err != nil {
			return err
		}
	}
	return nil
}

// removeSkeletons removes, in the deepest existing directory of c, the
// skeletons a run killed before their rename left: directories named
// skeletonPrefix and a hex suffix that hold nothing but the directories
// of StateDir still missing and the record. Anything else is not ours
// and is left alone.
func (w DirWriter) removeSkeletons(c *stateChain) error {
	parent, have := c.last(), len(c.fds)-1
	// Listed through a descriptor of its own, so the chain's offset is
	// untouched.
	d, err := unix.Openat(parent, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: c.abs(have), Err: err}
	}
	f := os.NewFile(uintptr(d), c.abs(have))
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", f.Name(), err)
	}
	for _, n := range names {
		if !isSkeleton(n) {
			continue
		}
		if err := w.removeLeftSkeleton(parent, n, have+1); err != nil {
			return err
		}
	}
	return nil
}

// removeLeftSkeleton removes the skeleton name when no live run holds it
// (its flock died with the run that made it).
func (w DirWriter) removeLeftSkeleton(parent int, name string, depth int) error {
	fd, err := openDirAt(parent, name, name)
	if err != nil {
		return nil // gone, or not a directory: not ours
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if ok, err := flockFD(fd); err != nil || !ok {
		return nil // a run making it now
	}
	if !skeletonOK(parent, name, depth, false) {
		return nil
	}
	if err := w.step("remove " + name); err != nil {
		return err
	}
	skeletonOK(parent, name, depth, true)
	return nil
}

func isSkeleton(name string) bool { return randomNamed(name, skeletonPrefix) }

// removeSkeleton removes the skeleton name in parent that stands for
// StateDir's part at level depth, when it holds only what makeState
// puts there.
func (w DirWriter) removeSkeleton(parent int, name string, depth int) {
	if skeletonOK(parent, name, depth, false) {
		skeletonOK(parent, name, depth, true)
	}
}

// skeletonOK reports whether name in dir holds nothing but the parts of
// StateDir from level depth on and, in the last, a regular file named
// CreatedRecord; with remove it removes them, deepest first.
func skeletonOK(dir int, name string, depth int, remove bool) bool {
	fd, err := openDirAt(dir, name, name)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	ents, err := f.Readdirnames(-1)
	if err != nil {
		return false
	}
	for _, e := range ents {
		switch {
		case e == CreatedRecord:
			var st unix.Stat_t
			if unix.Fstatat(fd, e, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				return false
			}
			if remove && unix.Unlinkat(fd, e, 0) != nil {
				return false
			}
		case depth < len(stateParts) && e == stateParts[depth]:
			if !skeletonOK(fd, e, depth+1, remove) {
				return false
			}
		default:
			return false // not ours
		}
	}
	return !remove || unix.Unlinkat(dir, name, unix.AT_REMOVEDIR) == nil
}

// heldLock is the lock of an apply or rollback, with the chain of
// directories it was reached through.
type heldLock struct {
	chain *stateChain
	f     *os.File
}

// abandon closes the lock as a killed process would: the flock goes, the
// file and the state directories stay.
func (h *heldLock) abandon() {
	h.f.Close()
	h.chain.close()
}

// release removes the lock file while still holding it, then, when no
// journal is left, the record and the state directories remediate made
// (a directory someone else put something in stays), then unlocks.
func (h *heldLock) release() error {
	defer h.chain.close()
	if err := h.chain.rootLock(unix.LOCK_EX); err != nil {
		h.f.Close()
		return err
	}
	state := h.chain.last()
	err := unix.Unlinkat(state, path.Base(LockPath), 0)
	if errors.Is(err, unix.ENOENT) {
		err = nil
	}
	var st unix.Stat_t
	if jerr := unix.Fstatat(state, path.Base(JournalPath), &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(jerr, unix.ENOENT) {
		if rerr := h.removeCreated(); err == nil {
			err = rerr
		}
	}
	if cerr := h.f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unlock /%s: %w", LockPath, err)
	}
	return nil
}

// removeCreated removes the directories the record names, deepest first.
func (h *heldLock) removeCreated() error {
	state := h.chain.last()
	fd, err := unix.Openat(state, CreatedRecord, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // the state directories were there before
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: "/" + StateDir + "/" + CreatedRecord, Err: err}
	}
	f := os.NewFile(uintptr(fd), CreatedRecord)
	b := make([]byte, len(StateDir)*len(stateParts)+len(stateParts))
	n, _ := f.Read(b)
	f.Close()
	created, ok := parseCreated(string(b[:n]))
	if !ok {
		return fmt.Errorf("/%s/%s: not a list of state directories (%q); left alone", StateDir, CreatedRecord, b[:n])
	}
	if err := unix.Unlinkat(state, CreatedRecord, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: "/" + StateDir + "/" + CreatedRecord, Err: err}
	}
	for i := len(stateParts); i > len(stateParts)-created; i-- {
		err := unix.Unlinkat(h.chain.fds[i-1], stateParts[i-1], unix.AT_REMOVEDIR)
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return nil // someone else's now too, and stays
		}
		if err != nil {
			return &fs.PathError{Op: "remove", Path: h.chain.abs(i), Err: err}
		}
		if err := unix.Fsync(h.chain.fds[i-1]); err != nil {
			return err
		}
	}
	return nil
}

// parseCreated reads the record: the last n directories of StateDir,
// outermost first, one a line.
func parseCreated(s string) (n int, ok bool) {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	n = len(lines)
	if n == 0 || n > len(stateParts) {
		return 0, false
	}
	for i, l := range lines {
		if l != strings.Join(stateParts[:len(stateParts)-n+i+1], "/") {
			return 0, false
		}
	}
	return n, true
}

// randomSuffix is 16 hex digits: a temporary name no existing entry has
// by chance, and one each run makes with O_EXCL anyway.
func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// randomNamed reports whether name is prefix followed by a randomSuffix:
// one of the names this package makes, and so may remove.
func randomNamed(name, prefix string) bool {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok || len(s) != 16 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
