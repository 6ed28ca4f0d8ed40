// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package fabric holds the fabric checks: they judge the fabric
// collector's counter sweeps and scans (errors, links, downs, SM state,
// GUIDs, congestion, routing, the expected topology) and never send MADs
// of their own. The grouping of findings into faults is the engine's.
package fabric
