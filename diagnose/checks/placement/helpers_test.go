// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
)

// testChecks are the checks this package's tests evaluate.
func testChecks() []*diagnose.Check {
	return diagnosetest.Catalogue(GPUChecks, GPUACSChecks, IRQChecks, NetdevChecks, PCIChecks, PCIPayloadChecks, ProbeChecks, RoCEChecks, TuningChecks)
}

// evaluateHost evaluates testChecks on a host root (diagnosetest.EvaluateHostWith).
func evaluateHost(t testing.TB, root string, change func()) *diagnose.Report {
	t.Helper()
	return diagnosetest.EvaluateHostWith(t, root, change, testChecks())
}
