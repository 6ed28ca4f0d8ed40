// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	c, err := Parse([]byte(`
expected:
  ports:
    - {device: mlx5_0, port: 1, rate_gbps: 400}
  boards:
    - {board_id: MT_0000000223, rate_gbps: 200}
  hca_types:
    - {hca_type: MT4129, rate_gbps: 400}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Expected.Ports) != 1 || c.Expected.Boards[0].RateGbps != 200 || c.Expected.HCATypes[0].HCAType != "MT4129" {
		t.Errorf("parsed %+v", c)
	}
	for _, empty := range []string{"", "# nothing\n"} {
		if c, err := Parse([]byte(empty)); err != nil || len(c.Expected.Ports) != 0 {
			t.Errorf("empty config %q: %+v, %v", empty, c, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"expected:\n  boards:\n    - {board_id: X, rate_gbs: 200}\n", "rate_gbs"},
		{"expectd: {}\n", "expectd"},
		{"expected:\n  boards:\n    - {board_id: X, rate_gbps: -1}\n", "rate_gbps"},
		{"expected:\n  boards:\n    - {rate_gbps: 100}\n", "board_id"},
		{"expected:\n  ports:\n    - {device: mlx5_0, rate_gbps: 100}\n", "port"},
		{"expected:\n  hca_types:\n    - {hca_type: MT4129}\n", "rate_gbps"},
		{"expected: [1, 2\n", "yaml"},
		{"expected:\n  ports:\n    - {device: mlx5_0, port: one, rate_gbps: 100}\n", "one"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want error naming %q", tc.in, err, tc.want)
		}
	}
}

// TestUnknownKeyMessages: an unknown key names its line, the key as typed,
// the keys valid at that level and the likely intended one; no Go type
// names, no "unmarshal errors:" artefacts, one line from Load.
func TestUnknownKeyMessages(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"expected:\n  port:\n    - {device: mlx5_0, port: 1, rate_gbps: 100}\n",
			`line 2: unknown key "port"; valid here: boards, hca_types, ports (did you mean "ports"?)`},
		{"expectd: {}\n", `line 1: unknown key "expectd"; valid here: diagnose, expected, probe, tuning (did you mean "expected"?)`},
		{"expected:\n  ports:\n    - {device: mlx5_0, port: 1, speed: 100}\n", `line 3: unknown key "speed"; valid here: device, port, rate_gbps`},
		{"tuning:\n  sysctl: {}\n", "line 2: unknown key \"sysctl\""},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q)\n= %v\nwant %s", tc.in, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "config.") || strings.Contains(err.Error(), "did you mean") != strings.Contains(tc.want, "did you mean")) {
			t.Errorf("Parse(%q) = %v: a Go type name or a wrong suggestion", tc.in, err)
		}
	}
	p := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(p, []byte("expected:\n  ports:\n    - {device: mlx5_0, port: one, rate_gbps: 1}\n    - {device: mlx5_1, port: two, rate_gbps: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || strings.Contains(err.Error(), "unmarshal errors") || strings.Contains(err.Error(), "yaml:") ||
		!strings.Contains(err.Error(), "line 3:") || !strings.Contains(err.Error(), "; line 4:") {
		t.Errorf("two type errors, want them joined on one line without yaml's preamble: %v", err)
	}
}

func TestLoad(t *testing.T) {
	if c, err := Load(""); err != nil || c == nil {
		t.Errorf("Load(\"\") = %v, %v", c, err)
	}
	if _, err := Load("/nonexistent/rdma_doctor.yml"); err == nil {
		t.Error("missing file accepted")
	}
	p := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(p, []byte("expected:\n  boards:\n    - {board_id: X, rate_gbs: 200}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), p) {
		t.Errorf("Load error should be one line naming the file: %q", err)
	}
}

// A config that is not a regular file, or past MaxFileSize, is refused at
// once with one line naming it and the reason; a FIFO never blocks the
// load, with or without a writer. A file of exactly the limit loads, and
// so does a symbolic link to a config (a ConfigMap mount).
func TestLoadBounded(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fifo", "fifo_written"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// O_RDWR opens a FIFO without waiting for a reader: a writer that is
	// there and never writes.
	w, err := os.OpenFile(filepath.Join(dir, "fifo_written"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	comment := func(n int) []byte { return append([]byte("#"), bytes.Repeat([]byte("x"), n-2)...) }
	exact := append(comment(MaxFileSize), '\n')
	over := append(comment(MaxFileSize+1), '\n')
	for name, b := range map[string][]byte{"exact.yml": exact, "over.yml": over} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("exact.yml", filepath.Join(dir, "link.yml")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"fifo", "not a regular file (a FIFO)"},
		{"fifo_written", "not a regular file (a FIFO)"},
		{".", "not a regular file (a directory)"},
		{"over.yml", "1048577 bytes, over the 1048576-byte (1 MiB) limit"},
		{"exact.yml", ""},
		{"link.yml", ""},
	} {
		p := filepath.Join(dir, tc.name)
		done := make(chan error, 1)
		go func() { _, err := Load(p); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute): // a failure guard, not a timing assertion
			t.Fatalf("Load(%s) still blocked after a minute", tc.name)
		}
		if tc.want == "" {
			if err != nil {
				t.Errorf("Load(%s): %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(%s) = %v, want one line naming %s with %q", tc.name, err, p, tc.want)
		}
	}
	if _, err := Load("/dev/null"); err == nil || !strings.Contains(err.Error(), "not a regular file (a device)") {
		t.Errorf("Load(/dev/null) = %v, want a device refused", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("expected:\n  boards:\n    - board_id: MT_0000000223\n      rate_gbps: 200\n"))
	f.Add([]byte("expected:\n  ports:\n    - {device: mlx5_0, port: 1, rate_gbps: 400}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err == nil && c == nil {
			t.Fatal("nil config without error")
		}
	})
}

// A root file system's own config file is the default; without one the
// defaults apply (no file).
func TestDefaultFile(t *testing.T) {
	root := t.TempDir()
	if got := DefaultFile(root); got != "" {
		t.Errorf("no file: %q, want \"\"", got)
	}
	dir := filepath.Join(root, "etc", "rdma_doctor")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "rdma_doctor.yml")
	if err := os.WriteFile(want, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := DefaultFile(root); got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
