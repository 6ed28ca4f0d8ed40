// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package link holds the checks of the host's own devices and links: the
// device and its driver, firmware, ports, counters and traffic, port
// flaps, link-down reasons, transceivers, temperatures, the kernel log,
// devlink health and the subnet manager seen from the host.
package link
