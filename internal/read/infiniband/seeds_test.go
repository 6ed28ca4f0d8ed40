// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"testing"
)

// addFixtureSeeds seeds a fuzz target with every fixture file matching a
// pattern below the fixture hosts' class directories, which are built from
// shared/realdata, so fuzzing starts from real kernel output.
func addFixtureSeeds(f *testing.F, pattern string) {
	hostfstest.Seeds(f, "*/sys/class/infiniband/"+pattern)
}
