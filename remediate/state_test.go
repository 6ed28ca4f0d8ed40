// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// owned is tree with each entry's owner and group: what restore-exactly
// must keep besides content and mode.
func owned(t testing.TB, root string) map[string]string {
	t.Helper()
	m := tree(t, root)
	for rel, v := range m {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		m[rel] = fmt.Sprintf("%s uid=%d gid=%d", v, st.Uid, st.Gid)
	}
	return m
}

// governorChanges is the plan of the cpu-governor action on a copy of
// numa-remote: one file written in place, no directory made.
func governorChanges(t *testing.T, root string, w Writer) []Change {
	t.Helper()
	changes := plan(t, root, w, []Action{governorAction{}}).Changes()
	if len(changes) == 0 {
		t.Fatal("numa-remote: no governor change to make")
	}
	return changes
}

// A symbolic link at var, var/lib or var/lib/rdma_doctor (issue 29, item
// 2): apply and rollback refuse before anything is opened through it; a
// remediate.lock and a journal where it points are left exactly as they
// were (following the link would truncate, overwrite and delete them),
// and so is the tree.
func TestRemediateStateDirSymlinkRefused(t *testing.T) {
	for _, link := range []string{"var", "var/lib", StateDir} {
		t.Run(strings.ReplaceAll(link, "/", "_"), func(t *testing.T) {
			root := copyHost(t, "numa-remote")
			elsewhere := filepath.Join(t.TempDir(), "elsewhere")
			// elsewhere stands for the link's part of the path.
			target := filepath.Join(elsewhere, strings.TrimPrefix(StateDir, link))
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range map[string]string{"remediate.lock": "precious\n", "remediate-journal.json": "someone else's\n"} {
				if err := os.WriteFile(filepath.Join(target, name), []byte(content), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, link)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(root, link)); err != nil {
				t.Fatal(err)
			}
			w := writer(root)
			changes := governorChanges(t, root, w)
			before, outside := owned(t, root), owned(t, elsewhere)
			if _, err := Apply(w, changes); !errors.Is(err, ErrSymlink) {
				t.Errorf("apply: %v, want %v", err, ErrSymlink)
			}
			diffTrees(t, outside, owned(t, elsewhere))
			diffTrees(t, before, owned(t, root))
			if _, err := Rollback(w); !errors.Is(err, ErrSymlink) {
				t.Errorf("rollback: %v, want %v", err, ErrSymlink)
			}
			diffTrees(t, outside, owned(t, elsewhere))
			diffTrees(t, before, owned(t, root))
		})
	}
}

// State directories that existed before the apply (issue 29, item 2)
// are never removed, and keep their mode and owner; those the apply made
// go with the rollback.
func TestRemediateStateDirPreexisting(t *testing.T) {
	for _, tc := range []struct {
		name string
		dirs map[string]fs.FileMode
	}{
		{"var", map[string]fs.FileMode{"var": 0o750}},
		{"var/lib", map[string]fs.FileMode{"var": 0o755, "var/lib": 0o700}},
		{"all", map[string]fs.FileMode{"var": 0o755, "var/lib": 0o755, StateDir: 0o700}},
	} {
		t.Run(strings.ReplaceAll(tc.name, "/", "_"), func(t *testing.T) {
			root := copyHost(t, "numa-remote")
			for _, d := range []string{"var", "var/lib", StateDir} {
				mode, ok := tc.dirs[d]
				if !ok {
					break
				}
				p := filepath.Join(root, d)
				if err := os.Mkdir(p, mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, mode); err != nil {
					t.Fatal(err)
				}
				// Another owner where the test may give one (root).
				if os.Geteuid() == 0 {
					if err := os.Lchown(p, 4242, 4343); err != nil {
						t.Fatal(err)
					}
				}
			}
			w := writer(root)
			changes := governorChanges(t, root, w)
			before := owned(t, root)
			if _, err := Apply(w, changes); err != nil {
				t.Fatal(err)
			}
			for d := range tc.dirs {
				if fi, err := os.Lstat(filepath.Join(root, d)); err != nil || fi.Mode().Perm() != tc.dirs[d] {
					t.Errorf("%s after apply: %v, %v; want %v", d, fi, err, tc.dirs[d])
				}
			}
			if _, err := Rollback(w); err != nil {
				t.Fatal(err)
			}
			diffTrees(t, before, owned(t, root))
		})
	}
}

// A journal is tied to the tree it was written for (issue 29, item 2): a
// valid journal of another tree copied in is refused by rollback and by
// apply, and the tree is left as it was.
func TestRemediateJournalOfAnotherTree(t *testing.T) {
	a, b := copyHost(t, "numa-remote"), copyHost(t, "numa-remote")
	wa, wb := writer(a), writer(b)
	if _, err := Apply(wa, governorChanges(t, a, wa)); err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(filepath.Join(a, JournalPath))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(b, StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, JournalPath), journal, 0o600); err != nil {
		t.Fatal(err)
	}
	before := owned(t, b)
	if _, err := Rollback(wb); !errors.Is(err, ErrOtherTree) {
		t.Errorf("rollback of another tree's journal: %v, want %v", err, ErrOtherTree)
	}
	diffTrees(t, before, owned(t, b))
	if _, err := Apply(wb, governorChanges(t, b, wb)); !errors.Is(err, ErrOtherTree) {
		t.Errorf("apply with another tree's journal: %v, want %v", err, ErrOtherTree)
	}
	diffTrees(t, before, owned(t, b))
	if _, err := Rollback(wa); err != nil {
		t.Errorf("rollback of its own tree: %v", err)
	}
}

// An entry at a temporary name (issue 29, item 2) is never deleted nor
// written: the temp files have a random name made with O_EXCL.
func TestRemediateTempNameCollision(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	changes := plan(t, root, w, []Action{sysctlAction{}}).Changes()
	if len(changes) == 0 {
		t.Fatal("numa-remote: no sysctl change to make")
	}
	var planted []string
	for _, name := range []string{filepath.Join(StateDir, ".remediate-journal.json.rdma-doctor-tmp"), filepath.Join(filepath.Dir(changes[0].Path), "."+filepath.Base(changes[0].Path)+".rdma-doctor-tmp")} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not remediate's\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, p)
	}
	before := owned(t, root)
	if _, err := Apply(w, changes); err != nil {
		t.Fatal(err)
	}
	for _, p := range planted {
		if b, err := os.ReadFile(p); err != nil || string(b) != "not remediate's\n" {
			t.Errorf("%s after apply: %q, %v", p, b, err)
		}
	}
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, before, owned(t, root))
}

// An apply killed at each step of making the state directories (issue
// 29, item 2: no var/ left behind that rollback never removes):
// after one rollback the tree is as before, modes and owners included,
// with none, var, or var/lib there before. The last round is an apply
// that is not killed.
func TestRemediateStateDirKilledWhileMade(t *testing.T) {
	for _, pre := range []string{"", "var", "var/lib"} {
		t.Run("existing_"+strings.ReplaceAll(pre, "/", "_"), func(t *testing.T) {
			root := copyHost(t, "numa-remote")
			if pre != "" {
				if err := os.MkdirAll(filepath.Join(root, pre), 0o711); err != nil {
					t.Fatal(err)
				}
			}
			changes := governorChanges(t, root, writer(root))
			before := owned(t, root)
			var steps []string
			for n := 0; ; n++ {
				w, done := writer(root), 0
				w.stateStep = func(what string) error {
					if done++; done > n {
						steps = append(steps, what)
						return errKilled
					}
					return nil
				}
				_, err := Apply(w, changes)
				if err != nil && !errors.Is(err, errKilled) {
					t.Fatalf("apply killed at step %d: %v", n, err)
				}
				if _, rerr := Rollback(writer(root)); rerr != nil && (err == nil || !errors.Is(rerr, ErrNoJournal)) {
					t.Fatalf("rollback after a kill at step %d: %v", n, rerr)
				}
				diffTrees(t, before, owned(t, root))
				if t.Failed() {
					t.Fatalf("killed at step %d (%s)", n, steps[len(steps)-1])
				}
				if err == nil {
					break
				}
				if n > 20 {
					t.Fatal("more than 20 steps to make the state directories")
				}
			}
			t.Logf("killed at %q", steps)
			if want := 3 + strings.Count(strings.TrimPrefix(StateDir, pre), "/"); len(steps) < want {
				t.Errorf("%d kill points (%q), want at least %d", len(steps), steps, want)
			}
		})
	}
}

// Runs that make the state directories at once never take each other's
// half-made directories for what a killed run left: each gets the lock
// or is refused by it, never another error, and the tree ends as it was.
func TestRemediateStateDirMadeConcurrently(t *testing.T) {
	root := copyHost(t, "numa-remote")
	before := owned(t, root)
	for round := 0; round < 20; round++ {
		const runs = 6
		errs := make(chan error, runs)
		start := make(chan struct{})
		for range runs {
			go func() {
				<-start
				release, err := writer(root).Lock()
				if err == nil {
					err = release()
				}
				errs <- err
			}()
		}
		close(start)
		for range runs {
			if err := <-errs; err != nil && !errors.Is(err, ErrLocked) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		diffTrees(t, before, owned(t, root))
	}
}
