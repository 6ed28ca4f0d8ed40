// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

// Accessors for diagnose's fabric.* checks: the "Could be" hints as
// numbers and names, parsed by this package's one width and speed table.

// CouldBeLanes is the width iblinkinfo's "Could be" hint names (12 for
// "12X"); 0 when there is no width hint or it is not a width this parser
// knows.
func (l *Link) CouldBeLanes() int {
	w, ok := parseWidth([]byte(l.CouldBeWidth))
	if !ok {
		return 0
	}
	return w
}

// CouldBeSpeedName is the speed name of iblinkinfo's "Could be" speed
// hint ("HDR" for "53.125 Gbps"); "" when there is none or it is unknown.
func (l *Link) CouldBeSpeedName() string { return speedName(l.CouldBeSpeed) }

// PhysStateName is iblinkinfo's name of a physical state number
// ("Polling" for 2), "" for one it does not print.
func PhysStateName(v int) string {
	for name, n := range physStates {
		if n == v {
			return name
		}
	}
	return ""
}
