// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadGrowth follows a log through appends, a line half written, a
// rotation, a truncation and a burst larger than the limit.
func TestReadGrowth(t *testing.T) {
	dir := t.TempDir()
	f := Dir(dir)
	p := filepath.Join(dir, "opensm.log")
	write := func(s string, flag int) {
		t.Helper()
		fh, err := os.OpenFile(p, flag|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteString(s); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	step := func(prev Growth, limit int64, wantData string, wantFresh bool) Growth {
		t.Helper()
		g, err := ReadGrowth(f, "opensm.log", prev, limit)
		if err != nil {
			t.Fatal(err)
		}
		if string(g.Data) != wantData || g.Fresh != wantFresh {
			t.Fatalf("read %q fresh %v, want %q fresh %v", g.Data, g.Fresh, wantData, wantFresh)
		}
		return g
	}
	write("one\ntwo\n", os.O_TRUNC)
	g := step(Growth{}, 1<<20, "one\ntwo\n", true)
	g = step(g, 1<<20, "", false) // nothing new
	write("three\nfou", os.O_APPEND)
	g = step(g, 1<<20, "three\n", false) // "fou" is still being written
	write("r\n", os.O_APPEND)
	g = step(g, 1<<20, "four\n", false)
	// Rotated: a new file under the same name.
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	write("new\n", os.O_TRUNC)
	g = step(g, 1<<20, "new\n", true)
	// Truncated in place.
	write("", os.O_TRUNC)
	write("x\n", os.O_APPEND)
	g = step(g, 1<<20, "x\n", true)
	// A burst beyond the limit: only its last whole lines.
	write("aaaa\nbbbb\ncccc\n", os.O_APPEND)
	step(g, 10, "bbbb\ncccc\n", true)
	if _, err := ReadGrowth(f, "opensm.log", Growth{}, 0); err == nil {
		t.Error("a zero limit was accepted")
	}
}
