// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrNoPMA is what old kernels print for every PMA counter of a device
// without a Performance Management Agent (iWARP i40iw): the counter does not
// exist, it is not zero.
var ErrNoPMA = errors.New("no PMA: counter not available")

// ParseCounter parses a counters/ or hw_counters/ value ("%u\n", "%llu\n").
func ParseCounter(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "N/A") {
		return 0, ErrNoPMA
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter %q: not an unsigned integer", s)
	}
	return v, nil
}

// CounterSpec describes one file in ports/N/counters/ (IB PMA PortCounters).
type CounterSpec struct {
	File string
	// Metric is the exported name without the rdma_port_ prefix.
	Metric string
	Help   string
	// Bits is the field width. PMA counters saturate at 2^Bits-1 instead of
	// wrapping, so a counter at its maximum has stopped counting. Zero for the
	// data and packet counters, whose width depends on the PMA capability
	// (32 bits in the basic set, 64 in the extended one).
	Bits int
	// Scale converts the file's unit to the metric's (data counters count
	// 4-octet words).
	Scale float64
}

// Counters lists every PortCounters attribute the kernel creates
// (drivers/infiniband/core/sysfs.c, pma_group and pma_group_ext). Files not
// listed here are exported under a generic name so nothing is lost.
var Counters = []CounterSpec{
	{"port_rcv_data", "data_received_bytes_total", "Data octets received on the port (port_rcv_data × 4).", 0, 4},
	{"port_xmit_data", "data_transmitted_bytes_total", "Data octets transmitted on the port (port_xmit_data × 4).", 0, 4},
	{"port_rcv_packets", "packets_received_total", "Packets received on the port, including packets with errors.", 0, 1},
	{"port_xmit_packets", "packets_transmitted_total", "Packets transmitted on the port, including packets with errors.", 0, 1},
	{"unicast_rcv_packets", "unicast_packets_received_total", "Unicast packets received.", 64, 1},
	{"unicast_xmit_packets", "unicast_packets_transmitted_total", "Unicast packets transmitted.", 64, 1},
	{"multicast_rcv_packets", "multicast_packets_received_total", "Multicast packets received.", 64, 1},
	{"multicast_xmit_packets", "multicast_packets_transmitted_total", "Multicast packets transmitted.", 64, 1},
	{"symbol_error", "symbol_errors_total", "Minor link errors detected on one or more physical lanes.", 16, 1},
	{"link_error_recovery", "link_error_recovery_total", "Successful link error recovery processes.", 8, 1},
	{"link_downed", "link_downed_total", "Failed link error recoveries that took the link down.", 8, 1},
	{"port_rcv_errors", "receive_errors_total", "Packets received with errors.", 16, 1},
	{"port_rcv_remote_physical_errors", "receive_remote_physical_errors_total", "Packets received marked with the EBP delimiter.", 16, 1},
	{"port_rcv_switch_relay_errors", "receive_switch_relay_errors_total", "Packets received that could not be forwarded by the switch.", 16, 1},
	{"port_xmit_discards", "transmit_discards_total", "Outbound packets discarded because the port was down or congested.", 16, 1},
	{"port_xmit_constraint_errors", "transmit_constraint_errors_total", "Packets not transmitted due to outbound filtering or partition checks.", 8, 1},
	{"port_rcv_constraint_errors", "receive_constraint_errors_total", "Packets discarded due to inbound filtering or partition checks.", 8, 1},
	{"local_link_integrity_errors", "local_link_integrity_errors_total", "Times the local physical error threshold was exceeded.", 4, 1},
	{"excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors_total", "Times consecutive input buffer overruns exceeded the threshold.", 4, 1},
	{"VL15_dropped", "vl15_dropped_total", "Subnet management (VL15) packets dropped.", 16, 1},
	{"port_xmit_wait", "transmit_wait_total", "Ticks during which the port had data to send but no credits or arbitration.", 32, 1},
}

var counterIndex = func() map[string]int {
	m := make(map[string]int, len(Counters))
	for i, c := range Counters {
		m[c.File] = i
	}
	return m
}()

// LookupCounter returns the spec of a counters/ file.
func LookupCounter(file string) (CounterSpec, bool) {
	i, ok := counterIndex[file]
	if !ok {
		return CounterSpec{}, false
	}
	return Counters[i], true
}

// Pinnable reports whether a counter found at its maximum that did not rise
// to it within a window cannot be judged: the 4-bit fields
// (local_link_integrity_errors, excessive_buffer_overrun_errors) fill up on
// any long-lived link, and clearing them only refills them 15 events later.
// The diagnose checks skip such a counter with the reason, and the
// saturation alerts leave it out (alerts: the pinnable template function),
// so both tell the same story; a rise within the window is judged.
func (c CounterSpec) Pinnable() bool { return c.Bits == 4 }

// PinnableCounters are the file names of the Pinnable counters, sorted.
func PinnableCounters() []string {
	var out []string
	for _, c := range Counters {
		if c.Pinnable() {
			out = append(out, c.File)
		}
	}
	sort.Strings(out)
	return out
}

// Saturated reports whether a PMA counter is pinned at the maximum of its
// field. extended says whether the port has the 64-bit (IETF extended) data
// and packet counters, which the unicast_* files reveal.
func (c CounterSpec) Saturated(v uint64, extended bool) bool {
	bits := c.Bits
	if bits == 0 {
		bits = 32
		if extended {
			bits = 64
		}
	}
	if bits == 64 {
		return v == ^uint64(0)
	}
	return v == 1<<bits-1
}
