// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

// testChecks are the checks this package's tests evaluate.
func testChecks() []*diagnose.Check {
	return diagnosetest.Catalogue(FabricChecks, FabricTopologyChecks)
}

// testEvaluator selects from testChecks as diagnose.NewEvaluator does.
func testEvaluator(cfg *config.Config, only []string) (*diagnose.Evaluator, error) {
	return diagnose.NewEvaluator(cfg, only, testChecks())
}
