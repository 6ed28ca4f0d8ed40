// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

// testChecks are the checks this package's tests evaluate.
func testChecks() []*diagnose.Check { return All() }

// testEvaluator selects from testChecks as diagnose.NewEvaluator does.
func testEvaluator(cfg *config.Config, only []string) (*diagnose.Evaluator, error) {
	return diagnose.NewEvaluator(cfg, only, testChecks())
}

// evaluateHost evaluates testChecks on a host root (diagnosetest.EvaluateHostWith).
func evaluateHost(t testing.TB, root string, change func()) *diagnose.Report {
	t.Helper()
	return diagnosetest.EvaluateHostWith(t, root, change, testChecks())
}
