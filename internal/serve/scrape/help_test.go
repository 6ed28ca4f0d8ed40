// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// TestHelp: the exporter's own series (build info, label limits,
// rejected samples) have HELPs of one short sentence naming no internal
// identifier (testenv.CheckHelp).
func TestHelp(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(BuildInfo("rdma_doctor"), labelLimits{}, expoRejections{})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 3 {
		t.Errorf("%d families, want 3", len(mfs))
	}
	for _, mf := range mfs {
		if err := testenv.CheckHelp(mf.GetHelp()); err != nil {
			t.Errorf("%s: %v", mf.GetName(), err)
		}
	}
}
