// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package diagnosetest is the diagnose packages' shared test support: a
// Host of fixed readings, the recorded host trees under fixtures/hosts,
// the recorded fabric scans and sweeps, and finding lookups. Only tests
// import it.
package diagnosetest
