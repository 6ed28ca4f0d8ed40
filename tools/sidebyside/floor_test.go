// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The pread floor reads what the raw floor reads, byte for byte, and
// rereads the files' current contents on every round (offset 0 of a kept
// descriptor); a file missing at open is an error naming it.
func TestPreadFloor(t *testing.T) {
	dir := t.TempDir()
	files := [][]string{{filepath.Join(dir, "a"), filepath.Join(dir, "b")}, {filepath.Join(dir, "c")}}
	for i, f := range []string{"12\n", "345\n", "6789\n"} {
		if err := os.WriteFile([]string{files[0][0], files[0][1], files[1][0]}[i], []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := floorList{devices: files}
	_, raw, err := l.read()
	if err != nil {
		t.Fatal(err)
	}
	k, err := l.open()
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	if _, n, err := k.read(); err != nil || n != raw || n != 12 {
		t.Errorf("pread floor read %d bytes (%v), the raw floor %d, want 12", n, err, raw)
	}
	if err := os.WriteFile(files[1][0], []byte("67890123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, n, err := k.read(); err != nil || n != 16 {
		t.Errorf("after a rewrite the pread floor read %d bytes (%v), want 16", n, err)
	}
	missing := floorList{devices: [][]string{{files[0][0], filepath.Join(dir, "gone")}}}
	if _, err := missing.open(); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("open with a missing file: %v", err)
	}
}
