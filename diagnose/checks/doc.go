// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package checks is the catalogue: the one list of every check the binary
// runs, assembled from the concern packages (link, placement, fabric) in
// report order. The engine (diagnose) evaluates whatever list it is given
// and imports no check; cmd/rdma_doctor, remediate and the docs test take
// the list from All.
package checks
