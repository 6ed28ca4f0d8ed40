// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"testing"
)

// TestOwnProcess reads this process's own files: the real kernel format.
func TestOwnProcess(t *testing.T) {
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Error(err)
	}
	if rss, err := procRSS(os.Getpid()); err != nil || rss == 0 {
		t.Errorf("rss %d, %v", rss, err)
	}
}

// The memory split of this process: the real kernel format, the parts
// within the whole; and the loadable size of this test binary, an ELF file.
func TestOwnMemory(t *testing.T) {
	rss, anon, file, err := procMemory(os.Getpid())
	if err != nil || rss == 0 || anon == 0 || file == 0 || anon+file > rss+4096 {
		t.Errorf("rss %d, anon %d, file %d, %v", rss, anon, file, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := loadBytes(exe); err != nil || n == 0 || n > uint64(st.Size()) {
		t.Errorf("loadable %d of a %d-byte file, %v", n, st.Size(), err)
	}
}

// A file this process opens is counted; a pipe is not.
func TestOwnOpenFiles(t *testing.T) {
	before, err := procOpenFiles(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if after, err := procOpenFiles(os.Getpid()); err != nil || after != before+1 {
		t.Errorf("open files %d, then %d after opening one file and a pipe (%v)", before, after, err)
	}
}
