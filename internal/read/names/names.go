// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package names holds the validators of names that reach a command line
// or a label: RDMA device names and peer hosts. The config file and the
// perftest runner both use them, so both accept exactly the same values.
//
// It also holds the two policies for host text shown to someone: the
// label policy (labels.go: every reader bounds the host text it turns
// into label values, in length and in count per family, and counts what
// it cut), and Printable (printable.go: control characters shown
// escaped on a terminal).
package names

import (
	"fmt"
	"net"
	"regexp"
	"strings"
)

// deviceName is what the kernel allows in an RDMA device name in practice
// (mlx5_0, rocep1s0f1, mlx5_bond_0, rxe0, siw_eth0); it never starts with
// '-', so it cannot be read as an option.
var deviceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

// Device reports whether s is a plausible RDMA device name.
func Device(s string) bool { return deviceName.MatchString(s) }

// hostLabel is one DNS label (RFC 1123: letters, digits, inner hyphens).
var hostLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// Host accepts an IP address or an RFC 1123 host name, nothing else: the
// value becomes the last argument of a perftest client.
func Host(h string) error {
	if net.ParseIP(h) != nil {
		return nil
	}
	if h == "" || len(h) > 253 {
		return fmt.Errorf("%q: not a host name or IP address", h)
	}
	for _, l := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if !hostLabel.MatchString(l) {
			return fmt.Errorf("%q: not a host name or IP address", h)
		}
	}
	return nil
}
