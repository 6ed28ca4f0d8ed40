// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// gate holds the first write made through it until proceed is closed,
// with the apply's lock held: a second apply then runs while the first
// is in the middle of its run, without any timing.
type gate struct {
	Writer
	once    sync.Once
	entered chan struct{}
	proceed chan struct{}
}

func newGate(w Writer) *gate {
	return &gate{Writer: w, entered: make(chan struct{}), proceed: make(chan struct{})}
}

func (g *gate) wait() {
	g.once.Do(func() {
		close(g.entered)
		<-g.proceed
	})
}

func (g *gate) WriteInPlace(a Area, name string, data []byte) error {
	g.wait()
	return g.Writer.WriteInPlace(a, name, data)
}

func (g *gate) WriteAtomic(a Area, name string, data []byte, perm fs.FileMode) error {
	g.wait()
	return g.Writer.WriteAtomic(a, name, data, perm)
}

// wantLocked fails unless err is a *LockedError naming this process.
func wantLocked(t *testing.T, what string, err error) {
	t.Helper()
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("%s: %v, want %v", what, err, ErrLocked)
	}
	if le.PID != os.Getpid() {
		t.Errorf("%s: names pid %d, the holder is %d (%v)", what, le.PID, os.Getpid(), err)
	}
}

// Two applies at once (High 2 of issue 15): the second, and a rollback,
// refuse while the first holds the lock, naming its pid, and change
// nothing; the first finishes, and one rollback restores the tree.
func TestRemediateSafetyLockTwoApplies(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	orig := tree(t, root)
	changes := plan(t, root, w, Actions()).Changes()
	if len(changes) == 0 {
		t.Fatal("numa-remote plans nothing")
	}
	g := newGate(w)
	done := make(chan error, 1)
	go func() {
		res, err := Apply(g, changes)
		if err == nil && len(res.Applied) != len(changes) {
			err = errors.New("first apply applied only part of the plan")
		}
		done <- err
	}()
	<-g.entered
	res, err := Apply(w, changes)
	wantLocked(t, "second apply", err)
	if len(res.Applied) != 0 || len(res.NotApplied) != len(changes) {
		t.Errorf("second apply: applied %d, not applied %d of %d", len(res.Applied), len(res.NotApplied), len(changes))
	}
	_, err = Rollback(w)
	wantLocked(t, "rollback during the apply", err)
	close(g.proceed)
	if err := <-done; err != nil {
		t.Fatalf("first apply: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, LockPath)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock file after the apply: %v", err)
	}
	// The second apply, run again now, finds everything applied.
	if _, err := Apply(w, plan(t, root, w, Actions()).Changes()); err != nil {
		t.Fatalf("apply after the first finished: %v", err)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	diffTrees(t, orig, tree(t, root))
}

// A lock held by someone else (here: this test) refuses apply and
// rollback before they read or write anything; once released, the state
// directories the lock needed are gone again.
func TestRemediateSafetyLockHeld(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	orig := tree(t, root)
	release, err := w.Lock()
	if err != nil {
		t.Fatal(err)
	}
	held := tree(t, root)
	_, err = Apply(w, plan(t, root, w, Actions()).Changes())
	wantLocked(t, "apply", err)
	_, err = Rollback(w)
	wantLocked(t, "rollback", err)
	diffTrees(t, held, tree(t, root))
	if err := release(); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))
}

// The lock file of a killed run (its flock died with it) does not block
// the next apply; rollback removes it with the rest.
func TestRemediateSafetyStaleLockFile(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	orig := tree(t, root)
	if err := os.MkdirAll(filepath.Join(root, StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, LockPath), []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(w, plan(t, root, w, Actions()).Changes()); err != nil {
		t.Fatalf("apply over a stale lock file: %v", err)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	diffTrees(t, orig, tree(t, root))
}

// writeJournal puts content where the journal goes.
func writeJournal(t *testing.T, root string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, JournalPath), content, 0o600); err != nil {
		t.Fatal(err)
	}
}

// governorJournal applies the governor action to a copy of numa-remote
// and returns the copy's root, the original tree, the changes and the
// journal the apply wrote.
func governorJournal(t *testing.T) (string, map[string]string, []Change, []byte) {
	t.Helper()
	root := copyHost(t, "numa-remote")
	w := writer(root)
	orig := tree(t, root)
	changes := plan(t, root, w, []Action{governorAction{}}).Changes()
	if len(changes) < 4 {
		t.Fatalf("numa-remote plans %d governor changes, want 4 or more", len(changes))
	}
	if _, err := Apply(w, changes); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, JournalPath))
	if err != nil {
		t.Fatal(err)
	}
	return root, orig, changes, b
}

// cutAfterEntries returns the journal cut inside its entry n (0-based):
// entries 0..n-1 are whole.
func cutAfterEntries(t *testing.T, b []byte, n int) []byte {
	t.Helper()
	off := 0
	for i := 0; i <= n; i++ {
		k := bytes.Index(b[off:], []byte(`"action"`))
		if k < 0 {
			t.Fatalf("journal has fewer than %d entries", n+1)
		}
		off += k + 1
	}
	return b[:off+12]
}

// A journal apply never writes (empty, blank, no entries, cut short,
// with data after its end) is refused by apply and rollback with an
// error naming it and --force, and nothing changes.
func TestRemediateSafetyDamagedJournalRefused(t *testing.T) {
	_, _, _, real := governorJournal(t)
	for name, content := range map[string][]byte{
		"empty":          nil,
		"blank":          []byte("\n \n"),
		"no entries":     []byte(`{"version": 2, "entries": [], "complete": true}`),
		"null entries":   []byte(`{"version": 2, "entries": null, "complete": true}`),
		"trailing bytes": append(append([]byte{}, real...), "garbage"...),
		"second object":  append(append([]byte{}, real...), `{"version": 2}`...),
		"cut":            cutAfterEntries(t, real, 2),
	} {
		t.Run(name, func(t *testing.T) {
			root := copyHost(t, "numa-remote")
			w := writer(root)
			writeJournal(t, root, content)
			before := tree(t, root)
			for _, run := range []func() error{
				func() error { _, err := Rollback(w); return err },
				func() error {
					res, err := Apply(w, plan(t, root, w, Actions()).Changes())
					if len(res.Applied) != 0 {
						t.Errorf("apply over a damaged journal applied %d", len(res.Applied))
					}
					return err
				},
			} {
				err := run()
				if !errors.Is(err, ErrJournalDamaged) || !strings.Contains(err.Error(), JournalPath) || !strings.Contains(err.Error(), "--force") {
					t.Errorf("%v, want a damaged-journal error naming %s and --force", err, JournalPath)
				}
			}
			diffTrees(t, before, tree(t, root))
		})
	}
}

// rollback --force on a journal with nothing to restore removes it and
// the state it was in: the tree is as before the journal was written.
func TestRemediateSafetyForceEmptyJournal(t *testing.T) {
	for name, content := range map[string]string{
		"empty":      "",
		"no entries": `{"version": 2, "entries": [], "complete": true}`,
		"cut early":  `{"version": 2, "entr`,
	} {
		t.Run(name, func(t *testing.T) {
			root := copyHost(t, "numa-remote")
			orig := tree(t, root)
			writeJournal(t, root, []byte(content))
			var log bytes.Buffer
			restored, err := RollbackWith(writer(root), RollbackOptions{Force: true, Log: &log})
			if err != nil || len(restored) != 0 {
				t.Fatalf("rollback --force: %d restored, %v", len(restored), err)
			}
			if !strings.Contains(log.String(), "restoring the 0 entries") {
				t.Errorf("log %q does not say what was restored", log.String())
			}
			diffTrees(t, orig, tree(t, root))
		})
	}
}

// rollback --force restores a whole journal followed by garbage exactly,
// and of a journal cut inside entry 2, entries 0 and 1 (the first two
// CPUs' governors) and nothing else.
func TestRemediateSafetyForceSalvages(t *testing.T) {
	root, orig, _, real := governorJournal(t)
	w := writer(root)
	writeJournal(t, root, append(append([]byte{}, real...), "\x00garbage"...))
	restored, err := RollbackWith(w, RollbackOptions{Force: true})
	if err != nil || len(restored) == 0 {
		t.Fatalf("rollback --force over trailing garbage: %d restored, %v", len(restored), err)
	}
	diffTrees(t, orig, tree(t, root))

	root, _, changes, real := governorJournal(t)
	w = writer(root)
	writeJournal(t, root, cutAfterEntries(t, real, 2))
	var log bytes.Buffer
	restored, err = RollbackWith(w, RollbackOptions{Force: true, Log: &log})
	if err != nil || len(restored) != 2 {
		t.Fatalf("rollback --force of a cut journal: %d restored, %v; want 2", len(restored), err)
	}
	if !strings.Contains(log.String(), "is truncated") || !strings.Contains(log.String(), "restoring the 2 entries") {
		t.Errorf("log %q", log.String())
	}
	for i, c := range changes {
		want := c.Current
		if i >= 2 {
			want = c.Desired
		}
		if b, err := os.ReadFile(filepath.Join(root, "sys", c.Path)); err != nil || string(b) != want {
			t.Errorf("%s after the forced rollback: %q, %v; want %q", c.Target, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "var")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state left after the forced rollback: %v", err)
	}
}

// What --force cannot make safe is refused with it too, and the journal
// is kept: another version, an invalid entry, a journal that is a
// symbolic link or a FIFO (which no longer blocks the read).
func TestRemediateSafetyForceStillRefuses(t *testing.T) {
	for name, make := range map[string]func(root, p string) error{
		"other version": func(_, p string) error {
			return os.WriteFile(p, []byte(`{"version": 3, "entries": [{"action":"a","area":"root","path":"x","kind":"file"}], "complete": true}`), 0o600)
		},
		"invalid entry": func(_, p string) error {
			return os.WriteFile(p, []byte(`{"version": 2, "entries": [{"action":"a","area":"root","path":"../x","kind":"file"}]`), 0o600)
		},
		"symlink": func(root, p string) error {
			if err := os.WriteFile(filepath.Join(root, "elsewhere.json"), []byte(`{"version": 2, "entries": [], "complete": true}`), 0o600); err != nil {
				return err
			}
			return os.Symlink("../../../elsewhere.json", p)
		},
		"fifo": func(_, p string) error { return syscall.Mkfifo(p, 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			root := copyHost(t, "numa-remote")
			if err := os.MkdirAll(filepath.Join(root, StateDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := make(root, filepath.Join(root, JournalPath)); err != nil {
				t.Fatal(err)
			}
			if name == "fifo" {
				// tree() would read the FIFO, and block.
				_, err := RollbackWith(writer(root), RollbackOptions{Force: true})
				if !errors.Is(err, ErrNotRegular) {
					t.Fatalf("rollback --force of a FIFO journal: %v, want %v", err, ErrNotRegular)
				}
				if fi, err := os.Lstat(filepath.Join(root, JournalPath)); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
					t.Errorf("the FIFO journal after the rollback: %v, %v", fi, err)
				}
				return
			}
			before := tree(t, root)
			_, err := RollbackWith(writer(root), RollbackOptions{Force: true})
			if err == nil || errors.Is(err, ErrNoJournal) {
				t.Fatalf("rollback --force: %v, want a refusal", err)
			}
			if name == "symlink" && !errors.Is(err, ErrSymlink) {
				t.Errorf("rollback --force of a symlinked journal: %v, want %v", err, ErrSymlink)
			}
			diffTrees(t, before, tree(t, root))
		})
	}
}
