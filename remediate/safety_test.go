// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
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
