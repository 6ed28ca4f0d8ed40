// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
)

// Host text with terminal control sequences (ESC, BEL: an OSC that
// retitles the terminal, a CSI that clears it) in the host name, a
// device's and a netdev's name and an opensm log line, on a copy of
// sm-opensm with a real opensm log: the text, NHC and HTML outputs hold
// no raw control byte and show each one escaped (\x1b, \x07); JSON
// escapes them as \u001b and \u0007.
func TestRenderEscapesControlCharacters(t *testing.T) {
	root := diagnosetest.CopyTree(t, filepath.Join(diagnosetest.Fixtures, "sm-opensm"))
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
	const title = "\x1b]0;owned\x07"
	write("proc/sys/kernel/hostname", "node"+title+"\n")
	// The device and netdev as the kernel would list them under those
	// names (a hostile driver or a rename).
	rename := func(dir, from, to string) {
		t.Helper()
		old := filepath.Join(root, dir, from)
		target, err := os.Readlink(old)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(old); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	rename("sys/class/infiniband", "mlx5_0", "mlx5_\x1b[2J0")
	rename("sys/class/net", "ibp26s0", "ib\x07p26s0")
	b, err := os.ReadFile("../../fixtures/tools/opensm-master-ibsim.log")
	if err != nil {
		t.Fatal(err)
	}
	before, _, ok := strings.Cut(string(b), "SUBNET UP")
	if !ok {
		t.Fatal("the recording has no SUBNET UP")
	}
	before = before[:strings.LastIndexByte(before, '\n')+1]
	write("var/log/opensm.log", before+"Nov 30 16:40:11 535506 [918256C0] 0x01 -> log_send_error: ERR 5411: "+title+"\x1b[2J\x1b[31mDR SMP Send completed\n")

	r := evaluateHost(t, root, nil)
	var all strings.Builder
	for _, f := range r.Findings {
		all.WriteString(f.Target + " " + f.Observed + " " + f.Evidence + "\n")
	}
	// The planted strings reach the report, raw: the checks stay as they are.
	for _, planted := range []string{"node" + title, "ERR 5411: " + title, "mlx5_\x1b[2J0", "ib\x07p26s0"} {
		if !strings.Contains(r.Host+"\n"+all.String(), planted) {
			t.Fatalf("%q not in the report: the test plants nothing there\n%s", planted, all.String())
		}
	}
	for _, format := range Formats {
		var out bytes.Buffer
		if err := Render(&out, r, format, View{Verbose: true}); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if format == "json" {
			if !strings.Contains(got, `\u001b]0;owned\u0007`) {
				t.Errorf("json: the planted sequence is not escaped as \\u001b ... \\u0007")
			}
		} else {
			// NHC's one line is cut short before the log line.
			var want []string
			if format != "nhc" {
				want = []string{`node\x1b]0;owned\x07`, `mlx5_\x1b[2J0`, `ib\x07p26s0`, `ERR 5411: \x1b]0;owned\x07\x1b[2J\x1b[31mDR SMP`}
			}
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("%s: %q not shown in\n%s", format, w, got)
				}
			}
		}
		for i := 0; i < len(got); i++ {
			if c := got[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
				t.Errorf("%s: raw control byte %#x at %d: %q", format, c, i, got[max(0, i-40):min(len(got), i+40)])
				break
			}
		}
	}
	// The report itself is the sampler's, shared: rendering leaves it raw.
	if !strings.Contains(r.Host, title) {
		t.Errorf("rendering changed the report: host %q", r.Host)
	}
}
