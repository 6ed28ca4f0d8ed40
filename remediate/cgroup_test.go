// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// hostConfig is a fixture host's own configuration (etc/rdma_doctor/
// rdma_doctor.yml), or the defaults when it has none.
func hostConfig(t testing.TB, root string) *config.Config {
	t.Helper()
	p := filepath.Join(root, "etc/rdma_doctor/rdma_doctor.yml")
	if _, err := os.Stat(p); err != nil {
		p = ""
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const slurmMax = "sys/fs/cgroup/slurm/rdma.max"

// dgx-h100's configuration caps every device at 64 contexts in /slurm,
// whose rdma.max is all max: one record write per device, every other
// byte of the file and every other cgroup left as they were; diagnose
// passes afterwards; rollback restores the file byte for byte.
func TestRemediateRDMACgroup(t *testing.T) {
	root := copyHost(t, "dgx-h100")
	w := writer(root)
	cfg := hostConfig(t, root)
	orig := tree(t, root)
	before, err := os.ReadFile(filepath.Join(root, slurmMax))
	if err != nil {
		t.Fatal(err)
	}
	p := MakePlan(inputWith(t, root, w, cfg), []Action{rdmaCgroupAction{}})
	changes := p.Changes()
	if len(changes) != 9 {
		t.Fatalf("%d changes, want one per device of /slurm (9): %+v", len(changes), changes)
	}
	for _, c := range changes {
		if c.Key == "" || !c.InPlace || c.Area != AreaSys || c.Path != "fs/cgroup/slurm/rdma.max" ||
			c.Current != c.Key+" hca_handle=max hca_object=max\n" || c.Desired != c.Key+" hca_handle=64 hca_object=max\n" {
			t.Errorf("change %+v", c)
		}
	}
	if _, err := Apply(w, changes); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(filepath.Join(root, slurmMax))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(string(before), "hca_handle=max", "hca_handle=64"); string(after) != want {
		t.Errorf("rdma.max after apply:\n%s\nwant\n%s", after, want)
	}
	// Only that file changed (and the journal appeared).
	got := tree(t, root)
	for k, v := range orig {
		if got[k] != v && k != filepath.FromSlash(slurmMax) {
			t.Errorf("%s changed", k)
		}
	}
	in := inputWith(t, root, w, cfg)
	e, err := diagnose.NewEvaluator(cfg, []string{"cgroup.rdma"}, checks.All())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range e.Evaluate(in.Snap, nil).Findings {
		if f.Severity != diagnose.Pass {
			t.Errorf("after apply: %s %s is %s (%s)", f.Check, f.Target, f.Severity, f.Observed)
		}
	}
	if again := MakePlan(in, []Action{rdmaCgroupAction{}}).Changes(); len(again) != 0 {
		t.Errorf("second plan: %+v", again)
	}
	restored, err := Rollback(w)
	if err != nil || len(restored) != 9 {
		t.Fatalf("rollback: %d restored, %v", len(restored), err)
	}
	diffTrees(t, orig, tree(t, root))
}

// What the kernel is sent: on a kernel filesystem WriteRecord writes the
// one line, never the file (the kernel would refuse several devices in one
// write with EINVAL).
func TestWriteRecordOnKernelFS(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rdma.max"), []byte("mlx5_0 hca_handle=max hca_object=max\nmlx5_1 hca_handle=max hca_object=max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := DirWriter{Roots: Roots{Sys: dir}, kernelFS: func(string) (bool, error) { return true, nil }}
	if err := w.WriteRecord(AreaSys, "rdma.max", "mlx5_1", []byte("mlx5_1 hca_handle=2 hca_object=max\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "rdma.max")); string(b) != "mlx5_1 hca_handle=2 hca_object=max\n" {
		t.Errorf("sent %q, want the one line", b)
	}
	// Elsewhere the line is merged, and an unknown key is refused.
	w.kernelFS = nil
	if err := w.WriteRecord(AreaSys, "rdma.max", "mlx5_1", []byte("mlx5_1 hca_handle=3 hca_object=4\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "rdma.max")); string(b) != "mlx5_1 hca_handle=3 hca_object=4\n" {
		t.Errorf("merged %q", b)
	}
	if err := w.WriteRecord(AreaSys, "rdma.max", "mlx5_7", []byte("mlx5_7 hca_handle=1 hca_object=1\n")); !errors.Is(err, ErrNoRecord) || !strings.Contains(err.Error(), "mlx5_7") {
		t.Errorf("unknown key: %v", err)
	}
}

// The filesystem test itself: procfs and sysfs are kernel filesystems, a
// temporary directory is not.
func TestOnKernelFS(t *testing.T) {
	for p, want := range map[string]bool{"/proc/self/status": true, "/sys/kernel": true, t.TempDir(): false} {
		if got, err := onKernelFS(p); err != nil || got != want {
			t.Errorf("onKernelFS(%s) = %v, %v; want %v", p, got, err, want)
		}
	}
	if _, err := onKernelFS("/nonexistent/rdma.max"); err == nil {
		t.Error("no error for a missing path")
	}
}

// A device gone between plan and apply stops the apply naming it; one
// gone after the apply is reported by rollback, which restores the rest.
func TestRemediateRDMACgroupDeviceGone(t *testing.T) {
	root := copyHost(t, "dgx-h100")
	w := writer(root)
	cfg := hostConfig(t, root)
	orig := tree(t, root)
	file := filepath.Join(root, slurmMax)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dropLine := func(dev string) { // the device unregistered
		t.Helper()
		cur, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		line, ok := RecordLine(string(cur), dev)
		if !ok {
			t.Fatalf("no %s in %s", dev, cur)
		}
		if err := os.WriteFile(file, []byte(strings.Replace(string(cur), line+"\n", "", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes := MakePlan(inputWith(t, root, w, cfg), []Action{rdmaCgroupAction{}}).Changes()
	dropLine("mlx5_4") // the third change's device
	res, err := Apply(w, changes)
	if !errors.Is(err, ErrNoRecord) || !strings.Contains(err.Error(), "mlx5_4") || len(res.Applied) != 2 {
		t.Fatalf("apply: %v, applied %d; want a stop at mlx5_4 after 2", err, len(res.Applied))
	}
	if err := os.WriteFile(file, b, 0o644); err != nil { // mlx5_4 is back, as it was
		t.Fatal(err)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))

	if _, err := Apply(w, changes); err != nil {
		t.Fatal(err)
	}
	dropLine("mlx5_9")
	restored, err := Rollback(w)
	if err != nil {
		t.Fatalf("rollback with a device gone: %v", err)
	}
	gone := 0
	for _, e := range restored {
		if e.Gone {
			gone++
			if e.Key != "mlx5_9" {
				t.Errorf("gone: %+v", e)
			}
		}
	}
	if gone != 1 || len(restored) != 9 {
		t.Errorf("%d restored, %d gone; want 9 and 1", len(restored), gone)
	}
	if _, err := os.Stat(filepath.Join(root, JournalPath)); err == nil {
		t.Error("journal kept after a rollback that restored everything it could")
	}
	if got, _ := os.ReadFile(file); string(got) != strings.Replace(string(b), "mlx5_9 hca_handle=max hca_object=max\n", "", 1) {
		t.Errorf("after rollback:\n%s", got)
	}
}

// No policy, a cgroup without rdma.max, a device the host lacks: notes,
// no changes.
func TestRemediateRDMACgroupNotes(t *testing.T) {
	root := copyHost(t, "dgx-h100")
	w := writer(root)
	// A cgroup whose rdma.max lists no device (none registered).
	if err := os.Mkdir(filepath.Join(root, "sys/fs/cgroup/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sys/fs/cgroup/empty/rdma.max"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ yml, note string }{
		{"", "no limits configured"},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits: [{cgroup: /user.slice, device: mlx5_0, hca_handle: 1, hca_object: 1}]\n", "/user.slice: no rdma.max"},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits: [{cgroup: /slurm, device: mlx5_3, hca_handle: 1, hca_object: 1}]\n", "no line for mlx5_3"},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits: [{cgroup: /system.slice, device: \"*\", hca_handle: max, hca_object: max}]\n", "nothing to do"},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits: [{cgroup: /empty, device: mlx5_0, hca_handle: 1, hca_object: 1}]\n", "no line for mlx5_0"},
	} {
		cfg, err := config.Parse([]byte(tc.yml))
		if err != nil {
			t.Fatal(err)
		}
		ch, notes, err := rdmaCgroupAction{}.Plan(inputWith(t, root, w, cfg))
		if err != nil || len(ch) != 0 || !strings.Contains(strings.Join(notes, "|"), tc.note) {
			t.Errorf("%q: %d changes, notes %q, %v; want a note %q", tc.yml, len(ch), notes, err, tc.note)
		}
	}
}

// The config's "max" is the parser's Unlimited: one number for both.
func TestRDMAUnlimitedIsTuningUnlimited(t *testing.T) {
	if uint64(config.RDMAUnlimited) != tuning.Unlimited || config.RDMACountMax != tuning.RDMACgroupMax {
		t.Errorf("config max %d, count max %d; tuning %d, %d", uint64(config.RDMAUnlimited), config.RDMACountMax, uint64(tuning.Unlimited), tuning.RDMACgroupMax)
	}
}
