// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/cpulist"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

const hostsDir = "../fixtures/hosts"

// copyHost copies a fixture host with cp -a (symlinks preserved) into a
// temporary directory and returns the copy's root.
func copyHost(t testing.TB, host string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), host)
	if out, err := exec.Command("cp", "-a", filepath.Join(hostsDir, host), dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	return dst
}

// tree is every path below root with its type, mode and content (or link
// target): two equal trees are byte-identical.
func tree(t testing.TB, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m[rel] = "link " + target
		case d.IsDir():
			m[rel] = fmt.Sprintf("dir %v", fi.Mode())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = fmt.Sprintf("file %v %x", fi.Mode(), sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func diffTrees(t testing.TB, want, got map[string]string) {
	t.Helper()
	n := 0
	for k, v := range want {
		if got[k] != v && n < 10 {
			t.Errorf("%s: %q, want %q", k, got[k], v)
			n++
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && n < 10 {
			t.Errorf("%s: left behind (%s)", k, got[k])
			n++
		}
	}
}

func writer(root string) DirWriter {
	return DirWriter{Roots: Roots{Root: root, Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}}
}

func input(t testing.TB, root string, w Writer) *Input {
	t.Helper()
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	return inputWith(t, root, w, cfg)
}

func inputWith(t testing.TB, root string, w Writer, cfg *config.Config) *Input {
	t.Helper()
	p, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	h := host.New(host.Options{Paths: p, Tuning: tuning.Options{MemlockProcesses: cfg.Tuning.MemlockProcesses}})
	r := &diagnose.Reader{Host: h}
	return &Input{Snap: r.Read(context.Background()), Config: cfg, W: w}
}

func plan(t testing.TB, root string, w Writer, actions []Action) *Plan {
	t.Helper()
	return MakePlan(input(t, root, w), actions)
}

func hosts(t testing.TB) []string {
	ents, err := os.ReadDir(hostsDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// Every action on every fixture host: plan, apply, a second plan has
// nothing to do, rollback restores the tree exactly, a second rollback
// finds no journal.
func TestRemediateEveryActionEveryHost(t *testing.T) {
	for _, host := range hosts(t) {
		// One copy per host: each rollback must restore it exactly, so
		// the next action starts from the original tree (checked).
		root := copyHost(t, host)
		w := writer(root)
		orig := tree(t, root)
		cfg := hostConfig(t, root) // dgx-h100's has an rdma cgroup policy
		for _, a := range Actions() {
			t.Run(host+"/"+a.ID(), func(t *testing.T) {
				p := MakePlan(inputWith(t, root, w, cfg), []Action{a})
				for _, ap := range p.Actions {
					if ap.Error != "" {
						t.Logf("plan error (reported, not applied): %s", ap.Error)
					}
				}
				changes := p.Changes()
				res, err := Apply(w, changes)
				if err != nil {
					t.Fatalf("apply: %v", err)
				}
				if len(res.Applied) != len(changes) {
					t.Fatalf("applied %d of %d", len(res.Applied), len(changes))
				}
				if again := MakePlan(inputWith(t, root, w, cfg), []Action{a}).Changes(); len(again) != 0 {
					t.Fatalf("second plan after apply has %d change(s), first %+v", len(again), again[0])
				}
				if len(changes) > 0 {
					if _, err := os.Stat(filepath.Join(root, JournalPath)); err != nil {
						t.Fatalf("no journal after apply: %v", err)
					}
				}
				_, err = Rollback(w)
				if len(changes) == 0 {
					if !errors.Is(err, ErrNoJournal) {
						t.Fatalf("rollback without changes: %v, want ErrNoJournal", err)
					}
				} else if err != nil {
					t.Fatalf("rollback: %v", err)
				}
				diffTrees(t, orig, tree(t, root))
				if _, err := Rollback(w); !errors.Is(err, ErrNoJournal) {
					t.Fatalf("second rollback: %v, want ErrNoJournal", err)
				}
			})
		}
	}
}

// On numa-remote each action has work: the fixture's governor is
// powersave, its IRQs sit on the remote node, its sysctls are defaults.
func TestRemediateNumaRemoteChanges(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	p := plan(t, root, w, Actions())
	before, err := input(t, root, w).Snap.Host.Placement()
	if before == nil {
		t.Fatalf("numa-remote placement: %v", err)
	}
	other := map[int]string{} // affinity of every non-completion vector
	for _, d := range before.Devices {
		for _, q := range d.IRQs {
			if q.Vector.Kind != irq.Completion {
				other[q.Number] = q.Affinity.V.String()
			}
		}
	}
	if len(other) == 0 {
		t.Fatal("numa-remote has no async/command vector to leave alone")
	}
	count := map[string]int{}
	for _, c := range p.Changes() {
		count[c.Action]++
	}
	for _, id := range []string{"sysctl", "cpu-governor", "irq-affinity"} {
		if count[id] == 0 {
			t.Errorf("action %s plans nothing on numa-remote", id)
		}
	}
	if _, err := Apply(w, p.Changes()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"))
	if err != nil || string(b) != "performance\n" {
		t.Errorf("cpu0 governor %q, %v", b, err)
	}
	b, err = os.ReadFile(filepath.Join(root, SysctlDropIn))
	if err != nil || !strings.Contains(string(b), "net.core.rmem_max = ") {
		t.Errorf("drop-in %q, %v", b, err)
	}
	// Every completion IRQ now on one CPU of its device's local_cpulist,
	// no two on the same CPU while there are CPUs to spare.
	after, err := input(t, root, w).Snap.Host.Placement()
	if after == nil {
		t.Fatalf("numa-remote placement after: %v", err)
	}
	for _, d := range after.Devices {
		used := map[string]bool{}
		for _, q := range d.Completion() {
			if !q.Affinity.V.SubsetOf(d.PCI.LocalCPUs.V) || q.Affinity.V.Len() != 1 {
				t.Errorf("%s irq %d on %s, local %s", d.Name, q.Number, q.Affinity.V, d.PCI.LocalCPUs.V)
			}
			if used[q.Affinity.V.String()] && len(d.Completion()) <= d.PCI.LocalCPUs.V.Len() {
				t.Errorf("%s irq %d shares CPU %s", d.Name, q.Number, q.Affinity.V)
			}
			used[q.Affinity.V.String()] = true
		}
		// The async/command vectors are not touched.
		for _, q := range d.IRQs {
			if want, ok := other[q.Number]; ok && q.Affinity.V.String() != want {
				t.Errorf("%s %s vector irq %d moved from %s to %s", d.Name, q.Vector.Kind, q.Number, want, q.Affinity.V)
			}
		}
	}
}

// An apply killed after N writes (every later write fails, as in a dead
// process) is rolled back to the exact original tree, for every N.
func TestRemediateInterruptedApply(t *testing.T) {
	// numa-remote: sysctl, governor and IRQ changes; dgx-h100 with its
	// configuration: memlock drop-ins and rdma.max records.
	for _, host := range []string{"numa-remote", "dgx-h100"} {
		t.Run(host, func(t *testing.T) { interruptedApply(t, host) })
	}
}

func interruptedApply(t *testing.T, host string) {
	root := copyHost(t, host)
	w := writer(root)
	orig := tree(t, root)
	changes := MakePlan(inputWith(t, root, w, hostConfig(t, root)), Actions()).Changes()
	// Count the writes of a whole apply.
	counter := &Faulty{W: w, FailAfter: 1 << 30}
	if _, err := Apply(counter, changes); err != nil {
		t.Fatal(err)
	}
	total := counter.Writes()
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))
	points := []int{0, 1, 2, 3, 4, 5, 6, 7, total / 2, total/2 + 1, total - 1}
	for _, n := range points {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := &Faulty{W: w, FailAfter: n}
			res, err := Apply(f, changes)
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("apply after %d writes: %v, want the injected failure", n, err)
			}
			if len(res.Applied)+len(res.NotApplied) != len(changes) || len(res.NotApplied) == 0 {
				t.Fatalf("applied %d + not applied %d of %d", len(res.Applied), len(res.NotApplied), len(changes))
			}
			if _, err := Rollback(w); err != nil && !errors.Is(err, ErrNoJournal) {
				t.Fatalf("rollback: %v", err)
			}
			diffTrees(t, orig, tree(t, root))
		})
	}
}

// A journal that is truncated, of another version or corrupt is refused
// with an error naming the file, and the host is not touched.
func TestRemediateBadJournal(t *testing.T) {
	for name, content := range map[string]string{
		"truncated":     `{"version": 1, "entries": [{"action": "sysctl", "area": "proc", "pa`,
		"no end marker": `{"version": 1, "entries": []}`,
		"other version": `{"version": 3, "entries": [], "complete": true}`,
		"record in v1":  `{"version": 1, "entries": [{"action":"a","area":"sys","path":"fs/cgroup/a/rdma.max","kind":"record","key":"mlx5_0","existed":true}], "complete": true}`,
		"record no key": `{"version": 2, "entries": [{"action":"a","area":"sys","path":"fs/cgroup/a/rdma.max","kind":"record","existed":true}], "complete": true}`,
		"key on a file": `{"version": 2, "entries": [{"action":"a","area":"sys","path":"x","kind":"file","key":"k","existed":true}], "complete": true}`,
		"record /etc":   `{"version": 2, "entries": [{"action":"a","area":"root","path":"etc/x","kind":"record","key":"k","existed":true}], "complete": true}`,
		"unknown field": `{"version": 1, "entries": [], "complete": true, "x": 1}`,
		"bad entry":     `{"version": 1, "entries": [{"action":"a","area":"root","path":"../etc/x","kind":"file"}], "complete": true}`,
		"empty":         ``,
	} {
		t.Run(name, func(t *testing.T) {
			root := copyHost(t, "numa-remote")
			w := writer(root)
			if err := os.MkdirAll(filepath.Join(root, StateDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, JournalPath), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			orig := tree(t, root)
			_, err := Rollback(w)
			if err == nil || !strings.Contains(err.Error(), JournalPath) {
				t.Fatalf("rollback: %v, want an error naming the journal", err)
			}
			changes := plan(t, root, w, Actions()).Changes()
			res, err := Apply(w, changes)
			if err == nil || len(res.Applied) != 0 {
				t.Fatalf("apply over a bad journal: %v, applied %d", err, len(res.Applied))
			}
			diffTrees(t, orig, tree(t, root))
		})
	}
}

// A target that vanished between plan and apply (an IRQ gone) stops the
// apply with an error naming it; rollback restores what was done.
func TestRemediateVanishedTarget(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	orig := tree(t, root)
	changes := plan(t, root, w, []Action{irqAction{}}).Changes()
	gone := changes[3]
	if err := os.Rename(filepath.Join(root, "proc", gone.Path), filepath.Join(root, "proc", gone.Path+".moved")); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(w, changes)
	if err == nil || !strings.Contains(err.Error(), gone.Path) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("apply: %v, want a vanished-target error naming %s", err, gone.Path)
	}
	if len(res.Applied) != 3 || len(res.NotApplied) != len(changes)-3 {
		t.Fatalf("applied %d, not applied %d", len(res.Applied), len(res.NotApplied))
	}
	if _, err := os.Stat(filepath.Join(root, "proc", gone.Path)); err == nil {
		t.Fatal("apply created the vanished attribute")
	}
	if err := os.Rename(filepath.Join(root, "proc", gone.Path+".moved"), filepath.Join(root, "proc", gone.Path)); err != nil {
		t.Fatal(err)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))

	// An IRQ gone after the apply (a driver reload) took its affinity
	// with it: rollback says so, restores the rest and ends.
	if _, err := Apply(w, changes); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "proc", gone.Path)); err != nil {
		t.Fatal(err)
	}
	restored, err := Rollback(w)
	if err != nil {
		t.Fatalf("rollback with an IRQ gone: %v", err)
	}
	n := 0
	for _, e := range restored {
		if e.Gone {
			n++
			if e.Path != gone.Path {
				t.Errorf("gone: %+v", e)
			}
		}
	}
	if n != 1 || len(restored) != len(changes) {
		t.Errorf("%d restored, %d gone; want %d and 1", len(restored), n, len(changes))
	}
	if _, err := os.Stat(filepath.Join(root, JournalPath)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("journal after rollback: %v", err)
	}
}

// Two applies, then one rollback: the journal keeps the first (original)
// value of a path, so the rollback restores the host as it was before both.
func TestRemediateTwoAppliesOneRollback(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	orig := tree(t, root)
	if _, err := Apply(w, plan(t, root, w, []Action{governorAction{}}).Changes()); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(w, plan(t, root, w, Actions()).Changes()); err != nil {
		t.Fatal(err)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))
}

func TestRemediateSelect(t *testing.T) {
	for _, tc := range []struct {
		only []string
		want int
		err  string
	}{
		{nil, len(Actions()), ""},
		{[]string{"sysctl"}, 1, ""},
		{[]string{"irq-affinity", "cpu-governor", "irq-affinity"}, 2, ""},
		{[]string{"sysctl", "reboot"}, 0, `unknown remediate action "reboot"`},
	} {
		got, err := Select(tc.only)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: %v, want %q", tc.only, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != tc.want {
			t.Errorf("%v: %d actions, %v; want %d", tc.only, len(got), err, tc.want)
		}
	}
}

// Writes never leave the roots.
func TestRemediateWriterStaysBelowRoot(t *testing.T) {
	w := writer(t.TempDir())
	for _, p := range []string{"../x", "a/../../x", "", "/"} {
		if err := w.WriteAtomic(AreaRoot, p, []byte("x"), 0o644); err == nil {
			t.Errorf("%q: written", p)
		}
	}
	if err := w.WriteAtomic("elsewhere", "x", nil, 0o644); err == nil {
		t.Error("unknown area written")
	}
}

func FuzzParseJournal(f *testing.F) {
	f.Add([]byte(`{"version": 1, "entries": [{"action":"sysctl","area":"proc","path":"sys/net/core/rmem_max","kind":"file","existed":true,"old":"MjEyOTkyCg==","mode":420}], "complete": true}`))
	f.Add([]byte(`{"version": 1, "entries": [], "complete": true}`))
	f.Add([]byte(`{"version": 1`))
	f.Add([]byte(`{"version": 2, "entries": [{"action":"rdma-cgroup","area":"sys","path":"fs/cgroup/slurm/rdma.max","kind":"record","key":"mlx5_0","existed":true,"old":"bWx4NV8wIGhjYV9oYW5kbGU9bWF4IGhjYV9vYmplY3Q9bWF4Cg=="}], "complete": true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := parseJournal(b)
		if err != nil {
			return
		}
		if j.Version < 1 || j.Version > JournalVersion || (j.Version >= 3) != (j.Root != nil) || !j.Complete {
			t.Fatalf("accepted %+v", j)
		}
		for _, e := range j.Entries {
			if e.Key != "" && (e.Kind != "record" || e.Area == AreaRoot || j.Version < 2) {
				t.Fatalf("accepted a keyed entry that is not a kernel record: %+v", e)
			}
		}
	})
}

func FuzzParseSysctlConf(f *testing.F) {
	f.Add(dropInHeader + "net.core.rmem_max = 4194304\nvm.max_map_count=262144\n")
	f.Add("# comment = 1\nbad line\n=\n")
	f.Fuzz(func(t *testing.T, s string) {
		for k := range parseSysctlConf(s) {
			if strings.ContainsAny(k, "\n") {
				t.Fatalf("key %q", k)
			}
		}
	})
}

// slurmd on cx6-hdr-fdr runs with a 64 KiB memlock limit: the action
// writes the limits.d and the slurmd.service drop-ins (creating their
// directories), plans nothing more once they are there, and rollback
// removes files and directories.
func TestRemediateMemlock(t *testing.T) {
	root := copyHost(t, "cx6-hdr-fdr")
	w := writer(root)
	orig := tree(t, root)
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tuning.MemlockProcesses = []string{"slurmd", "rdma_doctor"}
	changes := MakePlan(inputWith(t, root, w, cfg), []Action{memlockAction{}}).Changes()
	paths := map[string]bool{}
	for _, c := range changes {
		paths[c.Path] = true
	}
	for _, p := range []string{MemlockLimitsDropIn, MemlockUnitDropIn("slurmd"), MemlockUnitDropIn("rdma_doctor")} {
		if !paths[p] {
			t.Errorf("no change to %s in %v", p, paths)
		}
	}
	if len(changes) != 3 {
		t.Errorf("%d changes, want 3", len(changes))
	}
	if _, err := Apply(w, changes); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, MemlockUnitDropIn("slurmd")))
	if err != nil || !strings.Contains(string(b), "LimitMEMLOCK=infinity") {
		t.Fatalf("unit drop-in %q, %v", b, err)
	}
	if again := MakePlan(inputWith(t, root, w, cfg), []Action{memlockAction{}}).Changes(); len(again) != 0 {
		t.Fatalf("second plan: %+v", again)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))
	// Without configured processes there is nothing to judge.
	if ch := plan(t, root, w, []Action{memlockAction{}}).Changes(); len(ch) != 0 {
		t.Errorf("no memlock_processes: %d changes", len(ch))
	}
}

// numa-remote has two nodes: 1000 pages of 2 MiB become 500 per node at
// runtime plus vm.nr_hugepages in a drop-in; a second plan is empty;
// rollback restores both nodes and removes the drop-in.
func TestRemediateHugepages(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	orig := tree(t, root)
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Diagnose.Policies.Hugepages = config.HugepagesPolicy{PageSizeKiB: 2048, MinPages: 1001}
	changes := MakePlan(inputWith(t, root, w, cfg), []Action{hugepagesAction{}}).Changes()
	if len(changes) != 3 {
		t.Fatalf("%d changes, want node0, node1 and the drop-in: %+v", len(changes), changes)
	}
	if changes[0].Desired != "501\n" || changes[1].Desired != "500\n" {
		t.Errorf("per node %q %q, want 501 and 500", changes[0].Desired, changes[1].Desired)
	}
	if c := changes[2]; c.Path != HugepagesDropIn || c.Exists || c.Desired != dropInHeader+"vm.nr_hugepages = 1001\n" {
		t.Errorf("drop-in %+v", c)
	}
	if _, err := Apply(w, changes); err != nil {
		t.Fatal(err)
	}
	if again := MakePlan(inputWith(t, root, w, cfg), []Action{hugepagesAction{}}).Changes(); len(again) != 0 {
		t.Fatalf("second plan: %+v", again)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))
	// 1 GiB pages: runtime only, the plan names the kernel command line.
	cfg.Diagnose.Policies.Hugepages = config.HugepagesPolicy{PageSizeKiB: 1048576, MinPages: 4}
	ap := MakePlan(inputWith(t, root, w, cfg), []Action{hugepagesAction{}}).Actions[0]
	if len(ap.Changes) != 2 || !strings.Contains(strings.Join(ap.Notes, " "), "hugepagesz=1048576K") {
		t.Errorf("1 GiB: %d changes, notes %q", len(ap.Changes), ap.Notes)
	}
}

// cycle plans one action with cfg on a copy of host, applies it, checks
// the second plan is empty and that rollback restores the tree; it
// returns the first plan's changes.
func cycle(t *testing.T, host string, cfg *config.Config, a Action) []Change {
	t.Helper()
	root := copyHost(t, host)
	w := writer(root)
	orig := tree(t, root)
	changes := MakePlan(inputWith(t, root, w, cfg), []Action{a}).Changes()
	if _, err := Apply(w, changes); err != nil {
		t.Fatal(err)
	}
	if again := MakePlan(inputWith(t, root, w, cfg), []Action{a}).Changes(); len(again) != 0 {
		t.Fatalf("second plan: %+v", again)
	}
	if len(changes) > 0 {
		if _, err := Rollback(w); err != nil {
			t.Fatal(err)
		}
	}
	diffTrees(t, orig, tree(t, root))
	return changes
}

func TestRemediateIPoIB(t *testing.T) {
	for _, tc := range []struct {
		host, mode, ipv6 string
		action           Action
		want             []string // target -> desired, in order
	}{
		// mlx4 supports connected mode: connected and 65520.
		{"mlx4-qdr", "connected", "", ipoibAction{}, []string{"ib0 mode=connected", "ib0 mtu=65520"}},
		// Back to datagram; ib0's 2044 (2K fabric) is kept.
		{"mlx4-qdr", "datagram", "", ipoibAction{}, []string{"ib1 mode=datagram", "ib1 mtu=4092"}},
		// Enhanced IPoIB: connected mode is never written.
		{"ipoib-enhanced", "connected", "", ipoibAction{}, nil},
		{"numa-remote", "", "disabled", ipv6Action{}, []string{"/" + IPv6DropIn + "=" + dropInHeader +
			"net.ipv6.conf.ibp152s0.disable_ipv6 = 1\nnet.ipv6.conf.ibp200s0.disable_ipv6 = 1", "ibp152s0 disable_ipv6=1", "ibp200s0 disable_ipv6=1"}},
		// The default policy (any) never touches IPv6.
		{"numa-remote", "", "", ipv6Action{}, nil},
	} {
		t.Run(tc.host+"/"+tc.mode+tc.ipv6, func(t *testing.T) {
			cfg, err := config.Load("")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Diagnose.Policies.IPoIBMode = config.IPoIBMode(tc.mode)
			cfg.Diagnose.Policies.IPoIBIPv6 = config.IPv6Policy(tc.ipv6)
			var got []string
			for _, c := range cycle(t, tc.host, cfg, tc.action) {
				got = append(got, c.Target+"="+strings.TrimSuffix(c.Desired, "\n"))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("changes\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// A file someone else put into a directory the apply created keeps the
// directory: rollback removes its own drop-in and leaves theirs.
func TestRemediateRollbackKeepsForeignFiles(t *testing.T) {
	root := copyHost(t, "numa-remote")
	w := writer(root)
	if _, err := Apply(w, plan(t, root, w, []Action{sysctlAction{}}).Changes()); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(root, "etc/sysctl.d/50-site.conf")
	if err := os.WriteFile(foreign, []byte("vm.swappiness = 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("foreign file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, SysctlDropIn)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("drop-in after rollback: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, JournalPath)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("journal after rollback: %v", err)
	}
}

// TestIRQPlanUnclassified: the irq-affinity plan changes nothing on a
// device whose IRQs cannot be classified and says why and what to do,
// instead of "nothing to do" (which would read as "all is well").
func TestIRQPlanUnclassified(t *testing.T) {
	local, _ := cpulist.Parse("0-3")
	d := irq.Device{Name: "mlx5_0", PCI: pci.Function{Address: "0000:3b:00.0", LocalCPUs: sysattr.Some(local)},
		IRQs: []irq.DeviceIRQ{{IRQ: &irq.IRQ{Number: 45, Name: "mlx5_xyz@pci:0000:3b:00.0"}, Vector: irq.Vector{Kind: irq.Other, Address: "0000:3b:00.0"},
			Affinity: sysattr.Some(cpulist.Of(9))}},
		Unclassified: 1, Incomplete: true}
	in := &Input{Snap: &diagnose.Reading{Host: placementOnly{p: &irq.Snapshot{Interrupts: &irq.Interrupts{}, Devices: []irq.Device{d}}}}}
	changes, notes, err := irqAction{}.Plan(in)
	if err != nil || len(changes) != 0 {
		t.Fatalf("changes %v, err %v", changes, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "mlx5_0: 1 of its 1 IRQs have names in no form") ||
		!strings.Contains(notes[0], "grep 0000:3b:00.0 /proc/interrupts") || strings.Contains(notes[0], "nothing to do") {
		t.Errorf("notes %q", notes)
	}
}

// TestIRQPlanNoCompletionIRQs: on a host where no /proc/interrupts line
// belongs to an RDMA device (bnxt_re-roce, efa-aws: no IRQ rows recorded)
// the plan changes nothing and does not claim the IRQs are well placed.
func TestIRQPlanNoCompletionIRQs(t *testing.T) {
	local, _ := cpulist.Parse("0-31")
	d := irq.Device{Name: "bnxt_re0", PCI: pci.Function{Address: "0000:19:00.0", LocalCPUs: sysattr.Some(local)}}
	in := &Input{Snap: &diagnose.Reading{Host: placementOnly{p: &irq.Snapshot{Interrupts: &irq.Interrupts{}, Devices: []irq.Device{d}}}}}
	changes, notes, err := irqAction{}.Plan(in)
	if err != nil || len(changes) != 0 {
		t.Fatalf("changes %v, err %v", changes, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "no line of /proc/interrupts is a completion IRQ") ||
		strings.Contains(notes[0], "are on its local CPUs") {
		t.Errorf("notes %q", notes)
	}
}

// placementOnly is a host whose IRQ placement is all the irq-affinity
// plan reads; any other source is a nil Host's (a panic: the plan read
// what it should not).
type placementOnly struct {
	diagnose.Host
	p *irq.Snapshot
}

func (h placementOnly) Placement() (*irq.Snapshot, error) { return h.p, nil }
