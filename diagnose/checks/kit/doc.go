// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package kit is what the check packages share: device and port
// predicates, target names, evidence text, counter limits and the vendor
// tools a remedy names. It imports the engine's types only.
package kit
