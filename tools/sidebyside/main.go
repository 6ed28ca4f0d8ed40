// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command sidebyside compares rdma_doctor with node_exporter on the same host tree.
package main

func main() {}
