// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// FixtureDir is the directory of fixture host name (fixtures/hosts/<name>),
// found from the test's working directory whatever the package depth.
// A missing host fails the test: fixture hosts are committed, so a test
// that cannot find one must never pass by skipping.
func FixtureDir(tb testing.TB, name string) string {
	tb.Helper()
	root := filepath.Join(repoRoot(tb), "fixtures", "hosts", name)
	if _, err := os.Stat(root); err != nil {
		tb.Fatalf("fixture host %s: %v", name, err)
	}
	return root
}

// Tool is a recorded tool output or log of fixtures/tools (README there
// says where each comes from). A missing one fails the test.
func Tool(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(tb), "fixtures", "tools", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Seeds adds every fixture-host file matching pattern (relative to
// fixtures/hosts, "*/sys/class/infiniband/*/ports/*/rate") to a fuzz
// corpus, so fuzzing starts from real kernel output. No match fails: a
// pattern that drifted from the fixtures must not fuzz from nothing.
func Seeds(f *testing.F, pattern string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(f), "fixtures", "hosts", pattern))
	if err != nil {
		f.Fatal(err)
	}
	if len(files) == 0 {
		f.Fatalf("no fixture files match %s", pattern)
	}
	for _, p := range files {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			continue // a glob such as proc/sys/*/* also matches directories
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
}

// repoRoot is the directory of go.mod above the test's working directory.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	return dir
}

// Fixture opens fixture host name as the collectors and checks read it.
func Fixture(tb testing.TB, name string) hostfs.Host {
	tb.Helper()
	p, err := hostfs.Paths{Rootfs: FixtureDir(tb, name)}.Resolve()
	if err != nil {
		tb.Fatal(err)
	}
	return p.Open()
}
