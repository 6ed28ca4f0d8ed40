// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package placement holds the checks of where the devices sit and how the
// host is tuned for them: PCIe link and payload, NUMA, IRQs, GPUs and
// GPUDirect, host tuning and cgroups, IPoIB and RoCE netdevs, the lossless
// RoCE configuration, and the verbs probe's latency and bandwidth.
package placement
