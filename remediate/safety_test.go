// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
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
	leaveStateDirs(t, root)
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

// leaveStateDirs makes the state directories as an apply killed after
// making them leaves them: with the record that they are remediate's.
func leaveStateDirs(t *testing.T, root string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(root, StateDir)); err == nil {
		return
	}
	if err := os.MkdirAll(filepath.Join(root, StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, StateDir, CreatedRecord), []byte("var\nvar/lib\n"+StateDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeJournal puts content where the journal goes.
func writeJournal(t *testing.T, root string, content []byte) {
	t.Helper()
	leaveStateDirs(t, root)
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
		"header only":    []byte(`{"version": 2}`),
		"empty object":   []byte(`{}`),
		"null":           []byte("null\n"),
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
		"empty":        "",
		"blank":        " \n\t\n",
		"no entries":   `{"version": 2, "entries": [], "complete": true}`,
		"header only":  `{"version": 2}`,
		"empty object": `{}`,
		"null":         "null",
		"cut early":    `{"version": 2, "entr`,
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
// symbolic link or a FIFO (opened without blocking the read).
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

// dropInCase is one of remediate's drop-ins on a host whose config makes
// the action write it.
type dropInCase struct {
	host, path string
	action     Action
	cfg        func(*config.Config)
}

func dropInCases() []dropInCase {
	memlock := func(c *config.Config) { c.Tuning.MemlockProcesses = []string{"slurmd"} }
	return []dropInCase{
		{"numa-remote", SysctlDropIn, sysctlAction{}, func(*config.Config) {}},
		{"cx6-hdr-fdr", MemlockLimitsDropIn, memlockAction{}, memlock},
		{"cx6-hdr-fdr", MemlockUnitDropIn("slurmd"), memlockAction{}, memlock},
	}
}

func (dc dropInCase) config(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	dc.cfg(cfg)
	return cfg
}

// plantLink makes path (below root) a relative symbolic link to a site
// file elsewhere in the tree, and returns that file.
func plantLink(t *testing.T, root, path string) string {
	t.Helper()
	site := filepath.Join(root, "site", "managed.conf")
	if err := os.MkdirAll(filepath.Dir(site), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(site, []byte("net.core.rmem_max = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Dir(link), site)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil {
		t.Fatal(err)
	}
	return site
}

// A drop-in that is a symbolic link (High 3 of issue 15) is never read
// or written through: planned with the link there, the action reports an
// error naming it; with the link made after the plan, apply refuses it.
// The link and the file it points to stay exactly as they were, and no
// file with the link's 0777 appears.
func TestRemediateSafetySymlinkedDropIn(t *testing.T) {
	for _, dc := range dropInCases() {
		t.Run(dc.host+"/"+dc.path+"/at-plan", func(t *testing.T) {
			root := copyHost(t, dc.host)
			w := writer(root)
			plantLink(t, root, dc.path)
			before := tree(t, root)
			ap := MakePlan(inputWith(t, root, w, dc.config(t)), []Action{dc.action}).Actions[0]
			if !strings.Contains(ap.Error, "symbolic link") || !strings.Contains(ap.Error, dc.path) || len(ap.Changes) != 0 {
				t.Fatalf("plan: error %q, %d changes; want an error naming %s", ap.Error, len(ap.Changes), dc.path)
			}
			diffTrees(t, before, tree(t, root))
		})
		t.Run(dc.host+"/"+dc.path+"/at-apply", func(t *testing.T) {
			root := copyHost(t, dc.host)
			w := writer(root)
			orig := tree(t, root)
			changes := MakePlan(inputWith(t, root, w, dc.config(t)), []Action{dc.action}).Changes()
			plantLink(t, root, dc.path)
			linked := tree(t, root)
			res, err := Apply(w, changes)
			if !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), dc.path) {
				t.Fatalf("apply: %v, want %v naming %s", err, ErrSymlink, dc.path)
			}
			for _, c := range res.Applied {
				if c.Path == dc.path {
					t.Errorf("applied the symlinked drop-in: %+v", c)
				}
			}
			if _, err := Rollback(w); err != nil && !errors.Is(err, ErrNoJournal) {
				t.Fatalf("rollback: %v", err)
			}
			diffTrees(t, linked, tree(t, root))
			if err := os.RemoveAll(filepath.Join(root, "site")); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(root, dc.path)); err != nil {
				t.Fatal(err)
			}
			removeEmptyParents(t, root, path.Dir(dc.path), orig)
			diffTrees(t, orig, tree(t, root))
		})
	}
}

// removeEmptyParents removes the directories plantLink made that the
// original tree did not have.
func removeEmptyParents(t *testing.T, root, dir string, orig map[string]string) {
	t.Helper()
	for ; dir != "." && dir != "/"; dir = path.Dir(dir) {
		if _, ok := orig[filepath.FromSlash(dir)]; ok {
			return
		}
		if err := os.Remove(filepath.Join(root, dir)); err != nil {
			t.Fatal(err)
		}
	}
}

// A drop-in directory that is a symbolic link is not written below
// either: the plan names it, and an apply planned before the link was
// made writes nothing into the directory it points to.
func TestRemediateSafetySymlinkedDropInDir(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	changes := plan(t, root, w, []Action{sysctlAction{}}).Changes()
	site := filepath.Join(root, "site-sysctl")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../site-sysctl", filepath.Join(root, "etc/sysctl.d")); err != nil {
		t.Fatal(err)
	}
	if ap := plan(t, root, w, []Action{sysctlAction{}}).Actions[0]; !strings.Contains(ap.Error, "etc/sysctl.d") || !strings.Contains(ap.Error, "symbolic link") {
		t.Errorf("plan: error %q, want one naming etc/sysctl.d", ap.Error)
	}
	if _, err := Apply(w, changes); !errors.Is(err, ErrSymlink) {
		t.Fatalf("apply: %v, want %v", err, ErrSymlink)
	}
	if ents, err := os.ReadDir(site); err != nil || len(ents) != 0 {
		t.Errorf("written below the link: %v, %v", ents, err)
	}
}

// Modes (High 3 of issue 15): a new drop-in is 0644 and a new directory
// 0755 whatever the umask; an existing drop-in keeps its mode from Lstat
// less group and other write; rollback restores content and mode exactly.
func TestRemediateSafetyDropInModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, tc := range []struct {
		name       string
		existing   fs.FileMode // 0: no drop-in before
		want, dirs fs.FileMode
	}{
		{"new", 0, 0o644, 0o755},
		{"world-writable", 0o666, 0o644, 0},
		{"private", 0o600, 0o600, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyHost(t, "numa-remote")
			w := writer(root)
			p := filepath.Join(root, SysctlDropIn)
			if tc.existing != 0 {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("net.core.rmem_max = 1\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			before := tree(t, root)
			if _, err := Apply(w, plan(t, root, w, []Action{sysctlAction{}}).Changes()); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Lstat(p); err != nil || fi.Mode() != tc.want {
				t.Errorf("drop-in after apply: %v, %v; want %v", fi.Mode(), err, tc.want)
			}
			if tc.dirs != 0 {
				for _, d := range []string{"etc", "etc/sysctl.d"} {
					if fi, err := os.Lstat(filepath.Join(root, d)); err != nil || fi.Mode().Perm() != tc.dirs {
						t.Errorf("%s after apply: %v, %v; want %v", d, fi.Mode(), err, tc.dirs)
					}
				}
			}
			if _, err := Rollback(w); err != nil {
				t.Fatal(err)
			}
			diffTrees(t, before, tree(t, root))
		})
	}
}

// errKilled is the failure of every write after the kill.
var errKilled = errors.New("killed")

// killer is a process killed at its write number At: a WriteAtomic then
// leaves its temp file half written (a kill skips the cleanup), and no
// write after it happens.
type killer struct {
	Writer
	d      DirWriter
	At     int
	writes int
	// Left is whether the kill left a temp file.
	Left bool
}

func (k *killer) next() bool {
	k.writes++
	return k.writes > k.At
}

func (k *killer) WriteAtomic(a Area, name string, data []byte, perm fs.FileMode) error {
	if !k.next() {
		return k.Writer.WriteAtomic(a, name, data, perm)
	}
	if k.writes == k.At+1 {
		tmp, err := k.d.path(a, path.Join(path.Dir(name), tempPrefix(name)+"0123456789abcdef"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(tmp, data[:len(data)/2], 0o600); err != nil {
			return err
		}
		k.Left = true
	}
	return errKilled
}

// Lock takes the lock and, at the end of the apply, drops it as a killed
// process does: the lock file and the state directories stay.
func (k *killer) Lock() (func() error, error) {
	h, err := k.d.lock()
	if err != nil {
		return nil, err
	}
	return func() error { h.abandon(); return nil }, nil
}

func (k *killer) WriteInPlace(a Area, name string, data []byte) error {
	if k.next() {
		return errKilled
	}
	return k.Writer.WriteInPlace(a, name, data)
}

func (k *killer) WriteRecord(a Area, name, key string, line []byte) error {
	if k.next() {
		return errKilled
	}
	return k.Writer.WriteRecord(a, name, key, line)
}

func (k *killer) Mkdir(a Area, name string) error {
	if k.next() {
		return errKilled
	}
	return k.Writer.Mkdir(a, name)
}

func (k *killer) Remove(a Area, name string) error {
	if k.next() {
		return errKilled
	}
	return k.Writer.Remove(a, name)
}

// leaveKilledState puts back what the kill left and the apply's own
// unlock removed: the state directories and the lock file (its flock
// died with the process).
func leaveKilledState(t *testing.T, root string) {
	t.Helper()
	leaveStateDirs(t, root)
	if err := os.WriteFile(filepath.Join(root, LockPath), []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// An apply killed at any write (Medium 8 of issue 15) leaves temp files,
// directories it made, the state directories and its lock file; one
// rollback removes all of them and restores the original tree.
func TestRemediateSafetyKilledApply(t *testing.T) {
	for _, host := range []string{"numa-remote", "dgx-h100"} {
		t.Run(host, func(t *testing.T) {
			root := copyHost(t, host)
			w := writer(root)
			orig := tree(t, root)
			changes := MakePlan(inputWith(t, root, w, hostConfig(t, root)), Actions()).Changes()
			counter := &Faulty{W: w, FailAfter: 1 << 30}
			if _, err := Apply(counter, changes); err != nil {
				t.Fatal(err)
			}
			if _, err := Rollback(w); err != nil {
				t.Fatal(err)
			}
			total, temps := counter.Writes(), 0
			for n := 0; n < total; n++ {
				k := &killer{Writer: w, d: w, At: n}
				if _, err := Apply(k, changes); !errors.Is(err, errKilled) {
					t.Fatalf("apply killed at write %d: %v", n, err)
				}
				leaveKilledState(t, root)
				if k.Left {
					temps++
				}
				if _, err := Rollback(w); err != nil && !errors.Is(err, ErrNoJournal) {
					t.Fatalf("rollback after a kill at write %d: %v", n, err)
				}
				diffTrees(t, orig, tree(t, root))
				if t.Failed() {
					t.Fatalf("killed at write %d of %d", n, total)
				}
			}
			if temps < 2 {
				t.Errorf("only %d kills left a temp file: the test does not reach the drop-ins and journal writes", temps)
			}
		})
	}
}

// noLock is a tree where the lock cannot be taken (read-only).
type noLock struct{ Writer }

func (noLock) Lock() (func() error, error) { return nil, errors.New("read-only file system") }

// Rollback on a tree no apply touched says there is nothing to roll back
// without taking the lock, which would create the state directory: on a
// read-only tree it still ends cleanly.
func TestRemediateSafetyRollbackNothingReadOnly(t *testing.T) {
	root := copyHost(t, "numa-remote")
	orig := tree(t, root)
	if _, err := Rollback(noLock{writer(root)}); !errors.Is(err, ErrNoJournal) {
		t.Fatalf("rollback: %v, want %v", err, ErrNoJournal)
	}
	diffTrees(t, orig, tree(t, root))
}
