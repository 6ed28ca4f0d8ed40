// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// TestHelp: every probe series' HELP is one short sentence naming no
// internal identifier (testenv.CheckHelp).
func TestHelp(t *testing.T) {
	if n := testenv.CheckDescribed(t, &Collector{}); n == 0 {
		t.Error("the probe collector describes nothing")
	}
}
