// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

func init() {
	register(&Check{
		ID:    "probe.latency",
		Title: "Verbs probe latency",
		Reads: []Source{SourceProbe},
		Doc: "The scheduled perftest latency probe (ib_send_lat, ib_write_lat, ib_read_lat) stays below " +
			"diagnose.thresholds.probe: 2 µs in loopback, 5 µs through a switch (the guide's numbers).",
		Remedy:  "Check CPU governor and placement (cpu.governor, irq.local), then the links on the path (ctr.*).",
		Pending: "no probe results yet: the verbs probe (bench/) does not hand its results to diagnose",
	})
	register(&Check{
		ID:    "probe.bandwidth",
		Title: "Verbs probe bandwidth",
		Reads: []Source{SourceProbe, SourceInfiniband},
		Doc: "The scheduled perftest bandwidth probe (ib_write_bw and friends) reaches at least min_bandwidth_ratio " +
			"(default 0.9) of the port rate.",
		Remedy:  "Check port.rate, pci.link and NUMA placement of the probe; then the fabric.",
		Pending: "no probe results yet: the verbs probe (bench/) does not hand its results to diagnose",
	})
}
