// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"os"
	"path/filepath"
	"testing"
)

// addFixtureSeeds seeds a fuzz target with every fixture file matching a
// pattern below the fixture hosts' class directories, which are built from
// shared/realdata, so fuzzing starts from real kernel output.
func addFixtureSeeds(f *testing.F, pattern string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("../../fixtures/hosts/*/sys/class/infiniband", pattern))
	if err != nil {
		f.Fatal(err)
	}
	if len(files) == 0 {
		f.Fatalf("no fixture files match %s", pattern)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(string(b))
		}
	}
}
