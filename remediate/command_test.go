// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ran is what one run of the command did.
type ran struct {
	code           int
	err            error
	stdout, stderr string
	read           bool // it read the host
}

// run runs the command on root with the cpu-governor action (one file
// written in place per CPU on numa-remote) unless c.Only says otherwise.
func run(t *testing.T, root string, c Command) ran {
	t.Helper()
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	if c.Only == nil {
		c.Only = []string{"cpu-governor"}
	}
	if c.Stdin == nil {
		c.Stdin = strings.NewReader("")
	}
	w := writer(root)
	var r ran
	r.code, r.err = c.Run(w, func() *Input {
		r.read = true
		return input(t, root, w)
	})
	r.stdout, r.stderr = out.String(), errOut.String()
	return r
}

// The whole flow on a copy of a fixture host, each step's exit code, what
// it prints and what it leaves in the tree.
func TestCommandPlanApplyRollback(t *testing.T) {
	root := copyHost(t, "numa-remote")
	orig := tree(t, root)

	r := run(t, root, Command{Mode: "plan", Format: "text"})
	if r.code != ExitOK || r.err != nil || !strings.Contains(r.stdout, "cpu-governor (answers ") || !strings.Contains(r.stdout, "never done by remediate (manual steps):") {
		t.Errorf("plan: exit %d, %v\n%s", r.code, r.err, r.stdout)
	}
	r = run(t, root, Command{Mode: "plan", Format: "json"})
	var p Plan
	if jerr := json.Unmarshal([]byte(r.stdout), &p); r.code != ExitOK || r.err != nil || jerr != nil || len(p.Actions) != 1 || len(p.Changes()) == 0 {
		t.Fatalf("plan json: exit %d, %v, %v\n%s", r.code, r.err, jerr, r.stdout)
	}
	n := len(p.Changes()) // one scaling_governor per CPU
	diffTrees(t, orig, tree(t, root))

	// No --yes and no terminal to ask: refused, nothing changed.
	r = run(t, root, Command{Mode: "apply"})
	if r.code != ExitUsage || r.err == nil || !strings.Contains(r.err.Error(), "pass --yes to apply them (stdin is not a terminal to ask)") {
		t.Errorf("apply without --yes: exit %d, %v", r.code, r.err)
	}
	if !strings.Contains(r.stdout, "cpu-governor (answers ") {
		t.Errorf("apply without --yes prints no plan:\n%s", r.stdout)
	}
	// A terminal that answers anything but y or yes: refused.
	for _, answer := range []string{"n\n", "\n", "yep\n", ""} {
		r = run(t, root, Command{Mode: "apply", StdinTerminal: true, Stdin: strings.NewReader(answer)})
		if r.code != ExitUsage || r.err != nil || !strings.Contains(r.stdout, fmt.Sprintf("Apply %d change(s)? [y/N] not applied\n", n)) {
			t.Errorf("answer %q: exit %d, %v\n%s", answer, r.code, r.err, r.stdout)
		}
	}
	diffTrees(t, orig, tree(t, root))

	r = run(t, root, Command{Mode: "apply", StdinTerminal: true, Stdin: strings.NewReader(" Yes\n")})
	if r.code != ExitOK || r.err != nil || !strings.Contains(r.stdout, "applied     cpu-governor") ||
		!strings.Contains(r.stdout, fmt.Sprintf("%d change(s) applied; undo with `rdma_doctor remediate rollback`\n", n)) {
		t.Errorf("apply: exit %d, %v\n%s", r.code, r.err, r.stdout)
	}
	r = run(t, root, Command{Mode: "apply", Yes: true})
	if r.code != ExitOK || r.err != nil || !strings.HasSuffix(r.stdout, "nothing to apply\n") {
		t.Errorf("second apply: exit %d, %v\n%s", r.code, r.err, r.stdout)
	}

	r = run(t, root, Command{Mode: "rollback"})
	if r.code != ExitOK || r.err != nil || !strings.HasPrefix(r.stdout, "restored cpu-governor") || !strings.HasSuffix(r.stdout, fmt.Sprintf("%d path(s) restored; journal removed\n", n)) {
		t.Errorf("rollback: exit %d, %v\n%s", r.code, r.err, r.stdout)
	}
	if r.read {
		t.Error("rollback read the host: it needs only the journal")
	}
	diffTrees(t, orig, tree(t, root))
	r = run(t, root, Command{Mode: "rollback"})
	if r.code != ExitOK || r.err != nil || !strings.HasPrefix(r.stdout, "nothing to roll back: ") {
		t.Errorf("second rollback: exit %d, %v\n%s", r.code, r.err, r.stdout)
	}
}

// Refusals: an unknown action id, apply or rollback on the real host
// without root, another run holding the lock, a damaged journal. None of
// them changes the tree.
func TestCommandRefusals(t *testing.T) {
	root := copyHost(t, "numa-remote")
	orig := tree(t, root)

	r := run(t, root, Command{Mode: "plan", Only: []string{"sysctl, reboot"}})
	if r.code != ExitUsage || r.err == nil || !strings.Contains(r.err.Error(), `remediate: unknown remediate action "reboot"`) || r.read {
		t.Errorf("unknown action: exit %d, %v, host read %v", r.code, r.err, r.read)
	}

	for _, mode := range []string{"apply", "rollback"} {
		c := Command{Mode: mode, Yes: true, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
		read := false
		code, err := c.Run(DirWriter{Roots: Roots{Root: "/", Sys: "/sys", Proc: "/proc"}}, func() *Input { read = true; return nil })
		if code != ExitUsage || err == nil || err.Error() != "remediate "+mode+": changes the real host (--path.rootfs=/) and needs root" || read {
			t.Errorf("%s on the real host, not root: exit %d, %v, host read %v", mode, code, err, read)
		}
	}

	release, err := writer(root).Lock()
	if err != nil {
		t.Fatal(err)
	}
	held := tree(t, root)
	for _, mode := range []string{"apply", "rollback"} {
		r = run(t, root, Command{Mode: mode, Yes: true})
		if r.code != ExitBusy || r.err == nil || !strings.HasPrefix(r.err.Error(), "remediate "+mode+": ") {
			t.Errorf("%s with the lock held: exit %d, %v", mode, r.code, r.err)
		}
	}
	diffTrees(t, held, tree(t, root))
	if err := release(); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))

	if err := os.MkdirAll(filepath.Join(root, StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, JournalPath), []byte(`{"version": 1, "entries": [{"action": "sysctl", "area": "proc", "pa`), 0o600); err != nil {
		t.Fatal(err)
	}
	damaged := tree(t, root)
	// Refused before any change: the error says so, without pointing to
	// a rollback that would refuse the same journal.
	r = run(t, root, Command{Mode: "apply", Yes: true})
	if r.code != ExitFailed || r.err == nil || !strings.HasPrefix(r.err.Error(), "remediate apply stopped: ") || strings.Contains(r.err.Error(), "undoes") ||
		!strings.Contains(r.stdout, "NOT applied cpu-governor") {
		t.Errorf("apply over a damaged journal: exit %d, %v\n%s", r.code, r.err, r.stdout)
	}
	r = run(t, root, Command{Mode: "rollback"})
	if r.code != ExitFailed || r.err == nil || !strings.Contains(r.err.Error(), JournalPath) {
		t.Errorf("rollback of a damaged journal: exit %d, %v", r.code, r.err)
	}
	diffTrees(t, damaged, tree(t, root))
	// --force restores what the journal holds whole (nothing here), says
	// what it dropped, and removes it.
	r = run(t, root, Command{Mode: "rollback", Force: true})
	if r.code != ExitOK || r.err != nil || r.stderr == "" || !strings.HasSuffix(r.stdout, "0 path(s) restored; journal removed\n") {
		t.Errorf("rollback --force: exit %d, %v\nstdout %s\nstderr %s", r.code, r.err, r.stdout, r.stderr)
	}
}

func TestOnRealHost(t *testing.T) {
	for _, tc := range []struct {
		r    Roots
		want bool
	}{
		{Roots{Root: "/", Sys: "/sys", Proc: "/proc"}, true},
		{Roots{Root: "/srv/host", Sys: "/sys", Proc: "/srv/host/proc"}, true},
		{Roots{Root: "/srv/host", Sys: "/srv/host/sys", Proc: "/proc/"}, true},
		{Roots{Root: "/srv/host", Sys: "/srv/host/sys", Proc: "/srv/host/proc"}, false},
		{Roots{Root: "fixtures/hosts/dgx-h100", Sys: "fixtures/hosts/dgx-h100/sys", Proc: "fixtures/hosts/dgx-h100/proc"}, false},
	} {
		if got := onRealHost(tc.r); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.r, got, tc.want)
		}
	}
}
