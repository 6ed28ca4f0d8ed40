// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/remediate"
)

// The exit code of an apply or rollback refused by another one's lock.
const remediateBusy = 3

// copyFixture copies a fixture host with cp -a into a temporary
// directory and returns the original and the copy.
func copyFixture(t *testing.T, host string) (orig, root string) {
	t.Helper()
	orig = filepath.Join(repoRoot(t), "fixtures/hosts", host)
	root = filepath.Join(t.TempDir(), host)
	if out, err := exec.Command("cp", "-a", orig, root).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	return orig, root
}

// holdLock takes the remediate lock of root the way an apply does (flock
// on the lock file, its pid in it) and returns its release.
func holdLock(t *testing.T, root string) func() {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, remediate.StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, remediate.LockPath)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock %s: %v", p, err)
	}
	if _, err := f.WriteString(strconv.Itoa(os.Getpid()) + "\n"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(p); err != nil {
			t.Error(err)
		}
		f.Close()
		for _, d := range []string{remediate.StateDir, "var/lib", "var"} {
			if err := os.Remove(filepath.Join(root, d)); err != nil {
				t.Error(err)
			}
		}
	}
}

// wantBusy fails unless a run was refused by the lock with one line on
// stderr naming the holder's pid.
func wantBusy(t *testing.T, what, stderr string, code, pid int) {
	t.Helper()
	want := fmt.Sprintf("another remediate apply/rollback is running (pid %d)", pid)
	if code != remediateBusy || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("%s: exit %d, stderr %q; want exit %d and one line %q", what, code, stderr, remediateBusy, want)
	}
}

// Two applies at once (High 2 of issue 15). While a run holds the lock,
// apply and rollback refuse with exit 3, naming its pid, and change
// nothing. Then four applies started together on one tree: each applies
// or is refused, and one rollback restores the tree exactly.
func TestRemediateSafetyLock(t *testing.T) {
	orig, root := copyFixture(t, "numa-remote")
	release := holdLock(t, root)
	_, stderr, code := remediateCLI(t, root, "remediate", "apply", "--yes")
	wantBusy(t, "apply", stderr, code, os.Getpid())
	_, stderr, code = remediateCLI(t, root, "remediate", "rollback")
	wantBusy(t, "rollback", stderr, code, os.Getpid())
	release()
	diffR(t, orig, root)

	type run struct {
		cmd            *exec.Cmd
		stdout, stderr strings.Builder
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := make([]*run, 4)
	for i := range runs {
		r := &run{}
		r.cmd = exec.CommandContext(ctx, binary(t), "--path.rootfs="+root, "--collector.sm.sminfo-path=/nonexistent/sminfo", "remediate", "apply", "--yes")
		r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	pids := map[int]bool{}
	for _, r := range runs {
		pids[r.cmd.Process.Pid] = true
	}
	applied, refused := 0, 0
	for i, r := range runs {
		code := exitCode(t, r.cmd.Wait())
		switch {
		case code == 0:
			applied++
		case code == remediateBusy:
			// The holder is one of the other applies.
			refused++
			var holder int
			if _, err := fmt.Sscanf(r.stderr.String()[strings.LastIndex(r.stderr.String(), "(pid ")+1:], "pid %d)", &holder); err != nil {
				t.Errorf("apply %d: no holder pid in %q: %v", i, r.stderr.String(), err)
			}
			if !pids[holder] || holder == r.cmd.Process.Pid {
				t.Errorf("apply %d (pid %d) names holder pid %d, not one of the others %v", i, r.cmd.Process.Pid, holder, pids)
			}
			wantBusy(t, fmt.Sprintf("apply %d", i), r.stderr.String(), code, holder)
		default:
			t.Errorf("apply %d: exit %d\n%s\n%s", i, code, r.stdout.String(), r.stderr.String())
		}
	}
	t.Logf("%d applied, %d refused by the lock", applied, refused)
	if applied == 0 {
		t.Fatal("no apply ran")
	}
	if out, stderr, code := remediateCLI(t, root, "remediate", "rollback"); code != 0 || !strings.Contains(out, "journal removed") {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	diffR(t, orig, root)
}

// A drop-in that is a relative symbolic link (High 3 of issue 15): plan
// and apply report it and never write through it; the other actions
// apply; no file with the link's 0777 appears; rollback restores the
// tree with the link exactly as it was.
func TestRemediateSafetySymlinkedDropIn(t *testing.T) {
	_, root := copyFixture(t, "numa-remote")
	site := filepath.Join(root, "site/managed.conf")
	for _, d := range []string{filepath.Dir(site), filepath.Join(root, "etc/sysctl.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(site, []byte("net.core.rmem_max = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, remediate.SysctlDropIn)
	if err := os.Symlink("../../site/managed.conf", link); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(t.TempDir(), "linked")
	if out, err := exec.Command("cp", "-a", root, linked).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	wantNamed := func(what, out string) {
		t.Helper()
		if !strings.Contains(out, "ERROR: cannot plan") || !strings.Contains(out, remediate.SysctlDropIn) || !strings.Contains(out, "symbolic link") {
			t.Errorf("%s does not report the symlinked drop-in:\n%s", what, out)
		}
	}
	out, _, code := remediateCLI(t, root, "remediate", "plan", "--only=sysctl")
	if code != 0 {
		t.Fatalf("plan: exit %d", code)
	}
	wantNamed("plan", out)
	out, stderr, code := remediateCLI(t, root, "remediate", "apply", "--yes")
	if code != 0 || !strings.Contains(out, "applied     cpu-governor") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, stderr)
	}
	wantNamed("apply", out)
	if target, err := os.Readlink(link); err != nil || target != "../../site/managed.conf" {
		t.Errorf("the link after apply: %q, %v", target, err)
	}
	if b, err := os.ReadFile(site); err != nil || string(b) != "net.core.rmem_max = 1\n" {
		t.Errorf("the link's target after apply: %q, %v", b, err)
	}
	noWorldWritable(t, root)
	if out, stderr, code := remediateCLI(t, root, "remediate", "rollback"); code != 0 {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	diffR(t, linked, root)
}

// noWorldWritable fails on a regular file or directory below root that
// anyone may write.
func noWorldWritable(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		fi, err := d.Info()
		if err == nil && fi.Mode().Perm()&0o002 != 0 {
			t.Errorf("%s is world-writable (%v)", p, fi.Mode())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An apply killed mid-write (Medium 8 of issue 15, and the state
// directory of issue 29): strace kills the real binary with SIGKILL at a
// system call on a given path: the rename of the state directories into
// place, the open of the lock file in them, the rename of its first
// journal, the mkdir of etc/sysctl.d, the rename of the sysctl drop-in.
// It dies with a temp file or directory made and not renamed, directories
// it made and its lock file; one rollback restores the original tree
// exactly each time, modes and owners included, on a tree without var
// and on one whose var/lib is someone else's (mode 0700, another owner).
// Every step of making the state directories is killed in turn by
// remediate's TestRemediateStateDirKilledWhileMade; strace reaches those
// above, the rest being made below a directory of a random name.
func TestRemediateSafetyKilledApply(t *testing.T) {
	strace := requireTool(t, "strace")
	renames := "rename,renameat,renameat2"
	state := remediate.StateDir
	for _, kp := range []struct {
		name, calls string
		paths       []string // the kill is at the first call on one of them
		leaves      []string // what the kill must leave (globs)
	}{
		// The skeleton is renamed in the deepest directory that exists.
		{"state directories", renames, []string{".", "var/lib"}, []string{".rdma-doctor-state.*/lib/rdma_doctor", "var/lib/.rdma-doctor-state.*"}},
		{"lock file", "open,openat", []string{state}, []string{state}},
		{"first journal", renames, []string{remediate.JournalPath}, []string{remediate.LockPath, state + "/.remediate-journal.json.rdma-doctor-tmp.*"}},
		{"mkdir etc/sysctl.d", "mkdir,mkdirat", []string{"etc/sysctl.d"}, []string{remediate.LockPath, remediate.JournalPath, "etc"}},
		{"drop-in", renames, []string{"etc/sysctl.d/90-rdma-doctor.conf"}, []string{remediate.LockPath, remediate.JournalPath, "etc/sysctl.d/.90-rdma-doctor.conf.rdma-doctor-tmp.*"}},
	} {
		for _, theirs := range []bool{false, true} {
			name := kp.name
			if theirs {
				name += ", their var/lib"
			}
			t.Run(name, func(t *testing.T) {
				orig, root := copyFixture(t, "numa-remote")
				if theirs {
					orig = withTheirVarLib(t, root)
				}
				before := modesOwners(t, root)
				args := []string{"-f", "-qq", "-o", "/dev/null"}
				for _, p := range kp.paths {
					args = append(args, "-P", filepath.Join(root, p))
				}
				args = append(args, "-e", "trace="+kp.calls, "-e", "inject="+kp.calls+":signal=SIGKILL",
					binary(t), "--path.rootfs="+root, "--collector.sm.sminfo-path=/nonexistent/sminfo", "remediate", "apply", "--only=sysctl", "--yes")
				cmd := exec.Command(strace, args...)
				out, stderr, code := runCmd(t, cmd)
				if code == 0 || strings.Contains(out, "change(s) applied") {
					t.Fatalf("the apply was not killed: exit %d\n%s\n%s", code, out, stderr)
				}
				left := 0
				for _, g := range kp.leaves {
					m, err := filepath.Glob(filepath.Join(root, g))
					if err != nil {
						t.Fatal(err)
					}
					left += len(m)
					if len(m) == 0 && kp.name != "state directories" {
						t.Errorf("the kill left no %s", g)
					}
				}
				if left == 0 {
					t.Errorf("the kill left none of %q", kp.leaves)
				}
				out, stderr, code = remediateCLI(t, root, "remediate", "rollback")
				if code != 0 && !(code == 1 && strings.Contains(stderr, "no remediate journal")) {
					t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
				}
				diffR(t, orig, root)
				sameModesOwners(t, before, modesOwners(t, root))
			})
		}
	}
}

// withTheirVarLib gives root a var/lib of its own (mode 0700, and another
// owner where the test runs as root) and returns a copy of the tree so
// made, to compare with.
func withTheirVarLib(t *testing.T, root string) string {
	t.Helper()
	for _, d := range []string{"var", "var/lib"} {
		p := filepath.Join(root, d)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, 4242, 4343); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(filepath.Join(root, "var"), 0o751); err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(t.TempDir(), "theirs")
	if out, err := exec.Command("cp", "-a", root, orig).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	return orig
}

// modesOwners is every path below root with its type, mode, owner and
// group: what diff -r does not compare.
func modesOwners(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, p)
		m[rel] = fmt.Sprintf("%v uid=%d gid=%d", fi.Mode(), st.Uid, st.Gid)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameModesOwners(t *testing.T, want, got map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: left behind (%s)", p, g)
		}
	}
}

// Damaged journals through the binary: an empty file, one of white space
// only, hand-edited journals without entries (a header, an empty object)
// and a real one followed by garbage are refused by rollback and apply
// (exit 1, one line of error naming the journal and --force) with the
// tree unchanged; rollback --force then says what it does, restores what
// the journal holds and leaves the original tree.
func TestRemediateSafetyDamagedJournal(t *testing.T) {
	for _, tc := range []struct{ name, content, says string }{
		{"empty", "", "is empty (0 bytes)"},
		{"white space", "\n  \t\n", "holds only white space (5 bytes)"},
		{"no entries", `{"version": 2, "entries": [], "complete": true}` + "\n", "holds no entries"},
		{"header only", `{"version": 2}` + "\n", "is truncated (no end marker)"},
		{"empty object", "{}\n", "holds no version and no entries"},
		{"trailing garbage", "", "has data after its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig, root := copyFixture(t, "numa-remote")
			journal := filepath.Join(root, remediate.JournalPath)
			content := []byte(tc.content)
			if tc.name == "trailing garbage" {
				if out, stderr, code := remediateCLI(t, root, "remediate", "apply", "--only=cpu-governor", "--yes"); code != 0 {
					t.Fatalf("apply: exit %d\n%s\n%s", code, out, stderr)
				}
				b, err := os.ReadFile(journal)
				if err != nil {
					t.Fatal(err)
				}
				content = append(b, "garbage\n"...)
			} else {
				leaveStateDirs(t, root)
			}
			if err := os.WriteFile(journal, content, 0o600); err != nil {
				t.Fatal(err)
			}
			damaged := filepath.Join(t.TempDir(), "damaged")
			if out, err := exec.Command("cp", "-a", root, damaged).CombinedOutput(); err != nil {
				t.Fatalf("cp -a: %v %s", err, out)
			}
			for _, args := range [][]string{{"remediate", "rollback"}, {"remediate", "apply", "--yes"}} {
				_, stderr, code := remediateCLI(t, root, args...)
				if code != 1 || !strings.Contains(stderr, remediate.JournalPath) || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "rollback --force") ||
					strings.Count(strings.TrimSuffix(stderr, "\n"), "\n") != 0 {
					t.Errorf("%v: exit %d, %q; want exit 1 and one line naming the journal, %q and --force", args, code, stderr, tc.says)
				}
			}
			diffR(t, damaged, root)
			out, stderr, code := remediateCLI(t, root, "remediate", "rollback", "--force")
			if code != 0 || !strings.Contains(out, "journal removed") || !strings.Contains(stderr, "rollback --force: ") || !strings.Contains(stderr, tc.says) {
				t.Fatalf("rollback --force: exit %d\n%s\n%s", code, out, stderr)
			}
			diffR(t, orig, root)
		})
	}
}

// leaveStateDirs makes the state directories as an apply killed after
// making them leaves them: with remediate's record that they are its own,
// which rollback removes.
func leaveStateDirs(t *testing.T, root string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, remediate.StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	record := "var\nvar/lib\n" + remediate.StateDir + "\n"
	if err := os.WriteFile(filepath.Join(root, remediate.StateDir, remediate.CreatedRecord), []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRemediateSafetyFIFOJournal: a FIFO in place of the journal (a
// blocking open would hang rollback forever) is refused at once by rollback,
// rollback --force and apply, with one line naming it, and left alone.
func TestRemediateSafetyFIFOJournal(t *testing.T) {
	_, root := copyFixture(t, "numa-remote")
	journal := filepath.Join(root, remediate.JournalPath)
	if err := os.MkdirAll(filepath.Dir(journal), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(journal, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"remediate", "rollback"}, {"remediate", "rollback", "--force"}, {"remediate", "apply", "--yes"}} {
		_, stderr, code := remediateCLI(t, root, args...)
		if code != 1 || !strings.Contains(stderr, remediate.JournalPath) || !strings.Contains(stderr, "not a regular file") ||
			strings.Count(strings.TrimSuffix(stderr, "\n"), "\n") != 0 {
			t.Errorf("%v: exit %d, %q; want exit 1 and one line saying the journal is not a regular file", args, code, stderr)
		}
	}
	if fi, err := os.Lstat(journal); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO journal was not left alone: %v, %v", fi, err)
	}
}
