// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Host text with terminal control sequences (an OSC that retitles the
// terminal, ended by BEL; a CSI that clears it) in the host name, a
// device's name and an opensm log line, on a copy of sm-opensm with a
// real opensm log: `rdma_doctor diagnose` (text and nhc) and
// /diagnose?format=text print no raw control byte and show each escaped.
func TestSecurityTerminalEscapes(t *testing.T) {
	_, root := copyFixture(t, "sm-opensm")
	write := func(rel, s string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const title, clear = "\x1b]0;owned\x07", "\x1b[2J"
	write("proc/sys/kernel/hostname", "node"+title+"\n")
	link := filepath.Join(root, "sys/class/infiniband/mlx5_0")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "sys/class/infiniband/mlx5_"+clear+"0")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "fixtures/tools/opensm-master-ibsim.log"))
	if err != nil {
		t.Fatal(err)
	}
	write("var/log/opensm.log", string(b)+"Nov 30 16:40:11 535506 [918256C0] 0x01 -> log_send_error: ERR 5411: "+title+clear+"DR SMP Send completed\n")

	check := func(what, out string, want ...string) {
		t.Helper()
		for i := 0; i < len(out); i++ {
			if c := out[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
				t.Errorf("%s: raw control byte %#x: %q", what, c, out[max(0, i-40):min(len(out), i+40)])
				break
			}
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q not shown in\n%s", what, w, out)
			}
		}
	}
	args := []string{"--path.rootfs=" + root}
	wantText := []string{`node\x1b]0;owned\x07`, `mlx5_\x1b[2J0`, `ERR 5411: \x1b]0;owned\x07\x1b[2JDR SMP`}
	out, stderr, code := diagnoseCLI(t, args, "--verbose")
	if code > 2 {
		t.Fatalf("diagnose exited %d\n%s", code, stderr)
	}
	check("diagnose", out, wantText...)
	out, _, _ = diagnoseCLI(t, args, "--format=nhc")
	check("diagnose --format=nhc", out)

	e := start(t, args...)
	_, body := e.get(t, "/diagnose?format=text&verbose=1")
	check("/diagnose?format=text", body, wantText...)
	_, body = e.get(t, "/diagnose?format=json")
	if !strings.Contains(body, `\u001b]0;owned\u0007`) {
		t.Errorf("/diagnose?format=json: the planted sequence is not escaped as \\u001b ... \\u0007")
	}
	check("/diagnose?format=json", body)
}
