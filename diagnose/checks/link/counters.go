// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// counterCheck judges a group of counters of every port by their increase
// over the history window, never by their absolute value (boot, reseats and
// SM sweeps leave history). A PMA counter pinned at its maximum has stopped
// counting: it is reported as unknown (warn), never as clean.
type counterCheck struct {
	hw     bool
	names  []string
	remedy func(t string, d *infiniband.Device, p *infiniband.Port) string
	action string
}

func registerCounterCheck(l *diagnose.CheckList, id, title, doc, remedy string, cc counterCheck) {
	reads := []diagnose.Source{diagnose.SourceInfiniband, diagnose.SourceHistory}
	l.Register(&diagnose.Check{ID: id, Title: title, Reads: reads, Doc: doc, Remedy: remedy, Run: cc.run})
}

// CountersChecks registers the checks of counters.go; checks.All lists every concern's.
func CountersChecks(l *diagnose.CheckList) {
	// mlx is the command that shows the port's physical error counters:
	// mlxlink on NVIDIA devices, ethtool -S (the driver's PHY counters) or
	// perfquery elsewhere (kit/vendor.go).
	mlx := func(d *infiniband.Device, p *infiniband.Port) string {
		if kit.IsNVIDIA(d) {
			return kit.LinkTool(d, p, "-c", "") + " (BER and error counters)"
		}
		return kit.LinkTool(d, p, "", "-S")
	}
	registerCounterCheck(l, "ctr.symbol", "Symbol errors",
		"counters/symbol_error: minor errors on the physical lanes. Thresholds per window: warn above 0, fail above 10 (rdma-core error_thresholds).",
		"Clean or replace the cable and transceiver, check the peer port.",
		counterCheck{names: []string{"symbol_error"}, remedy: func(t string, d *infiniband.Device, p *infiniband.Port) string {
			return fmt.Sprintf("physical lane errors on %s: clean or replace the cable and transceiver, check the peer switch port; %s", t, mlx(d, p))
		}})
	registerCounterCheck(l, "ctr.recovery", "Link error recovery",
		"counters/link_error_recovery: the link retrained after errors (a flaky PHY). Warn above 0, fail above 10 per window.",
		"Replace the cable or transceiver; check the peer port.",
		counterCheck{names: []string{"link_error_recovery"}, remedy: func(t string, d *infiniband.Device, p *infiniband.Port) string {
			return fmt.Sprintf("%s keeps retraining: replace the cable or transceiver, check the peer switch port; %s", t, mlx(d, p))
		}})
	registerCounterCheck(l, "ctr.downed", "Link went down",
		"counters/link_downed: link error recovery failed and the link went down. Fail above 0 per window.",
		"Check cable, transceiver and switch port; dmesg shows the link-down events.",
		counterCheck{names: []string{"link_downed"}, remedy: func(t string, d *infiniband.Device, p *infiniband.Port) string {
			return fmt.Sprintf("%s went down: check the cable, transceiver and peer switch port, and dmesg for the driver's link events; %s", t, mlx(d, p))
		}})
	registerCounterCheck(l, "ctr.rcv_err", "Receive errors",
		"counters/port_rcv_errors (bad packets received: local PHY, malformed, overrun; warn above 0, fail above 10) and "+
			"port_rcv_remote_physical_errors (packets marked bad upstream; warn above 0, fail above 100).",
		"Local errors: cable and transceiver. Remote physical errors: an upstream link; run ibqueryerrors on the fabric.",
		counterCheck{names: []string{"port_rcv_errors", "port_rcv_remote_physical_errors"}, remedy: func(t string, d *infiniband.Device, p *infiniband.Port) string {
			return fmt.Sprintf("bad packets received on %s: port_rcv_errors point at the local link (cable, transceiver; %s), "+
				"port_rcv_remote_physical_errors at a link upstream (ibqueryerrors on the SM host finds it)", t, mlx(d, p))
		}})
	// ctr.integrity: both counters are 4-bit fields of the PMA
	// PortCounters attribute (the kernel's PORT_PMA_ATTR widths 4 at bit
	// offsets 160 and 164 in drivers/infiniband/core/sysfs.c), so 15 is
	// their maximum. On ConnectX-4 and later the mlx5 driver answers
	// PortCounters from the firmware's PPCNT InfiniBand port counters
	// group and copies the byte holding both fields (link_overrun_errors)
	// unchanged (drivers/infiniband/hw/mlx5/mad.c, pma_cnt_assign); its
	// ClassPortInfo reply declares only extended width, so no 64-bit
	// copy of these two exists. 15 is therefore what the firmware
	// reports: a saturated field, by the recording, not an unsupported
	// one. The one real ConnectX-7 dump we have
	// (shared/realdata/tools/sysfs-counters-cx7-saturated-gpud-pr943.txt)
	// reads 15 next to other saturated counters of a long-lived port
	// (link_downed 255, port_xmit_discards 65535, port_xmit_wait
	// 2^32-1) and local_link_integrity_errors 0; the gpud DGX H100 tree
	// shows 15 on all nine ports only because gpud copied that one
	// port's values to every device (shared/realdata/sysfs/README.md).
	// Either way, 15 events refill the field after a clear on a link
	// that made them, so "clear the counters" would come back on every
	// port of a fleet: a field pinned at 15 that did not rise to it
	// within the window cannot be judged and says so; one that rose to
	// 15 within the window is judged by its increase.
	registerCounterCheck(l, "ctr.integrity", "Link integrity and buffer overruns",
		"counters/local_link_integrity_errors (the local PHY error threshold tripped) and excessive_buffer_overrun_errors "+
			"(flow-control overruns: misconfiguration or a bad signal). 4-bit counters: warn above 0, fail above 10 per window. "+
			"A counter pinned at 15 (its maximum) that did not rise to it within the window cannot be judged: it counts no more, "+
			"and clearing it only refills it 15 events later, so the finding skips it with the reason instead of asking to clear it.",
		"Replace the cable or transceiver; check VL and credit configuration of the peer.",
		counterCheck{names: []string{"local_link_integrity_errors", "excessive_buffer_overrun_errors"}, remedy: func(t string, d *infiniband.Device, p *infiniband.Port) string {
			return fmt.Sprintf("physical error thresholds tripped on %s: replace the cable or transceiver; buffer overruns also point at the peer's VL/credit configuration; %s", t, mlx(d, p))
		}})
	registerCounterCheck(l, "ctr.discards", "Discards and dropped packets",
		"counters/port_xmit_discards (port down or congested), port_rcv_switch_relay_errors, port_xmit_constraint_errors, "+
			"port_rcv_constraint_errors (partition/filter drops) and VL15_dropped (management packets). Warn above 100 per window each.",
		"Congestion or a down peer; constraint errors: check the partition (pkey) configuration.",
		counterCheck{names: []string{"port_xmit_discards", "port_rcv_switch_relay_errors", "port_xmit_constraint_errors", "port_rcv_constraint_errors", "VL15_dropped"},
			remedy: func(t string, _ *infiniband.Device, _ *infiniband.Port) string {
				return fmt.Sprintf("packets dropped on %s: transmit discards mean congestion or a down peer port; constraint errors a partition (pkey) "+
					"mismatch with the SM's partitions.conf; VL15 drops an overloaded SM path", t)
			}})
	registerCounterCheck(l, "ctr.xmit_wait", "Transmit wait (congestion)",
		"counters/port_xmit_wait: ticks with data queued but no credits, i.e. fabric congestion. Warn above 1000 per window.",
		"Look at the fabric: congested switch ports, the job's traffic pattern, adaptive routing and congestion control.",
		counterCheck{names: []string{"port_xmit_wait"}, remedy: func(t string, _ *infiniband.Device, _ *infiniband.Port) string {
			return fmt.Sprintf("%s waited for credits: the fabric is congested downstream; check the switch ports on the path (ibqueryerrors, UFM) and the traffic pattern", t)
		}})

	registerCounterCheck(l, "hw.retrans", "Retransmissions",
		"hw_counters out_of_sequence, packet_seq_err, implied_nak_seq_err, duplicate_request, roce_adp_retrans (warn above 0), "+
			"local_ack_timeout_err and roce_adp_retrans_to (warn above 0, fail above 100 per window): packet loss makes QPs retransmit. "+
			"The hw_counter limits are the research's proposal, not an upstream number.",
		"RoCE: check PFC/ECN (a lossless priority) on the host and the switch. InfiniBand: check ctr.* on the path.",
		counterCheck{hw: true, names: []string{"out_of_sequence", "packet_seq_err", "implied_nak_seq_err", "duplicate_request", "roce_adp_retrans", "local_ack_timeout_err", "roce_adp_retrans_to"},
			remedy: func(t string, d *infiniband.Device, p *infiniband.Port) string {
				switch {
				case kit.IsRNIC(d):
					return fmt.Sprintf("packet loss on %s makes iWARP's TCP connections retransmit: check the Ethernet error and drop counters "+
						"on the path (ethtool -S %s, the switch ports)", t, kit.OrText(kit.NonEmpty(p.Netdev), "<netdev>"))
				case p.LinkLayer.OK && p.LinkLayer.V == infiniband.LinkLayerEthernet:
					return fmt.Sprintf("packet loss on %s makes QPs retransmit: check that RoCE traffic runs on a lossless priority (PFC) with ECN "+
						"on the host (%s) and on the switch", t, kit.QoSTool(d, kit.OrText(kit.NonEmpty(p.Netdev), "<netdev>")))
				}
				return fmt.Sprintf("packet loss on %s makes QPs retransmit: check the error counters of the links on the path (ctr.*, ibqueryerrors)", t)
			}})
	registerCounterCheck(l, "hw.fatal", "QPs failed by exhausted retries",
		"hw_counters rnr_nak_retry_err, req_transport_retries_exceeded, req_rnr_retries_exceeded: QPs moved to error. Fail above 0 per window (research proposal).",
		"RNR: the receiver does not post receive buffers fast enough (application). Transport retries: the peer is unreachable or the path loses packets.",
		counterCheck{hw: true, names: []string{"rnr_nak_retry_err", "req_transport_retries_exceeded", "req_rnr_retries_exceeded"},
			remedy: func(t string, _ *infiniband.Device, _ *infiniband.Port) string {
				return fmt.Sprintf("QPs on %s gave up: RNR retries mean a receiver that posts buffers too slowly (application side); "+
					"transport retries a peer that is unreachable or a lossy path (check hw.retrans and ctr.* on both ends)", t)
			}})
	registerCounterCheck(l, "hw.nobuf", "Receive queue out of buffers",
		"hw_counters out_of_buffer: packets dropped because a receive queue had no posted buffer. Warn above 0 per window.",
		"Host side: the receiving application or its CPU placement (NUMA, IRQ affinity) cannot keep up.",
		counterCheck{hw: true, names: []string{"out_of_buffer"}, action: "irq-affinity",
			remedy: func(t string, _ *infiniband.Device, _ *infiniband.Port) string {
				return fmt.Sprintf("receivers on %s ran out of posted buffers: the application or its CPU placement cannot keep up; check NUMA and IRQ placement (irq.local)", t)
			}})
	registerCounterCheck(l, "hw.cc", "RoCE congestion control",
		"hw_counters np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled (reported) and rp_cnp_ignored (warn above 0: "+
			"CNPs arrive for a priority without congestion control).",
		"Enable DCQCN congestion control on the RoCE priority the traffic uses.",
		counterCheck{hw: true, names: []string{"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored"},
			remedy: func(t string, d *infiniband.Device, p *infiniband.Port) string {
				nd := kit.OrText(kit.NonEmpty(p.Netdev), "<netdev>")
				if !kit.IsNVIDIA(d) {
					return fmt.Sprintf("%s ignores congestion notifications: enable the driver's congestion control for the RoCE priority in use "+
						"(the vendor's RoCE congestion control guide names the setting)", t)
				}
				return fmt.Sprintf("%s ignores congestion notifications: enable congestion control (DCQCN) for the RoCE priority in use "+
					"(mlnx_qos -i %s, /sys/class/net/%s/ecn/roce_rp/enable/<prio>)", t, nd, nd)
			}})
	registerCounterCheck(l, "hw.icrc", "RoCE ICRC errors",
		"hw_counters rx_icrc_encapsulated: RoCE packets with a bad ICRC (corruption on the path). Fail above 0 per window (research proposal).",
		"Check cables and switch ports on the path; an MTU mismatch can also corrupt encapsulated frames.",
		counterCheck{hw: true, names: []string{"rx_icrc_encapsulated"},
			remedy: func(t string, d *infiniband.Device, p *infiniband.Port) string {
				return fmt.Sprintf("corrupted RoCE packets on %s: check the cable and the switch ports on the path, and that MTUs match end to end; %s", t, mlx(d, p))
			}})

}

// counterValue finds a counter in a port.
func counterValue(p *infiniband.Port, hw bool, name string) (uint64, bool) {
	list := p.Counters
	if hw {
		list = p.HWCounters
	}
	for _, c := range list {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

func (cc counterCheck) run(s *diagnose.Reading, h *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	kit.ForEachPort(s, func(d *infiniband.Device, p *infiniband.Port) {
		if f, ok := cc.port(d, p, h, cfg); ok {
			out = append(out, f)
		}
	})
	if len(out) == 0 {
		dir := "counters/"
		if cc.hw {
			dir = "hw_counters/"
		}
		return kit.NoTargets("no port has " + dir + strings.Join(cc.names, ", ") + " (the driver does not provide them)"), nil
	}
	return out, nil
}

func (cc counterCheck) port(d *infiniband.Device, p *infiniband.Port, h *diagnose.History, cfg *config.Config) (diagnose.Finding, bool) {
	t := kit.PortTarget(d, p)
	var present []string
	var observed, evidence, unknown, pinned []string
	sev := diagnose.Pass
	judged, waiting, badJudged := 0, 0, false
	ext := p.Extended()
	for _, name := range cc.names {
		v, ok := counterValue(p, cc.hw, name)
		if !ok {
			continue
		}
		present = append(present, name)
		if !cc.hw {
			if spec, known := infiniband.LookupCounter(name); known && spec.Saturated(v, ext) {
				delta, seen := h.Increase(diagnose.CounterKey{Device: d.Name, Port: p.Num, Name: name})
				switch {
				case spec.Pinnable() && seen && delta.Increase > 0:
					// It rose to its maximum within the window: the
					// increase seen is real (a lower bound), judge it.
				case spec.Pinnable():
					since := "in the only sample"
					if seen {
						since = fmt.Sprintf("in every sample of the last %s", diagnose.Span(delta.Span))
					}
					pinned = append(pinned, fmt.Sprintf("%s reads %d, its maximum, %s: it counts no more, and clearing it "+
						"(perfquery -R) would refill it %d events later, so its increase cannot be judged", name, v, since, v))
					observed = append(observed, fmt.Sprintf("%s cannot be judged (pinned at %d)", name, v))
					continue
				default:
					unknown = append(unknown, fmt.Sprintf("%s is saturated at %d: it has stopped counting, so new errors are invisible", name, v))
					observed = append(observed, name+" unknown (saturated)")
					continue
				}
			}
		}
		delta, ok := h.Increase(diagnose.CounterKey{Device: d.Name, Port: p.Num, HW: cc.hw, Name: name})
		if !ok {
			waiting++
			continue
		}
		judged++
		if js := kit.Judge(delta.Increase, cfg.Diagnose.CounterLimit(name)); js.Worse(sev) {
			sev, badJudged = js, js != diagnose.Pass
		}
		observed = append(observed, fmt.Sprintf("%s +%d", name, delta.Increase))
		if delta.Increase > 0 || delta.Resets > 0 || delta.Wraps > 0 {
			e := fmt.Sprintf("%s +%d in the last %s on %s (%d → %d)", name, delta.Increase, diagnose.Span(delta.Span), t, delta.First, delta.Last)
			if delta.Resets > 0 {
				e += fmt.Sprintf(", reset %d time(s) in the window", delta.Resets)
			}
			if delta.Wraps > 0 {
				e += fmt.Sprintf(", wrapped %d time(s)", delta.Wraps)
			}
			evidence = append(evidence, e)
		}
	}
	if len(present) == 0 {
		return diagnose.Finding{}, false
	}
	f := diagnose.Finding{Target: t, Expected: kit.ExpectedText(present, cfg)}
	if len(unknown) > 0 {
		f.Unknown = true
		if diagnose.Warn.Worse(sev) {
			sev = diagnose.Warn
		}
		evidence = append(unknown, evidence...)
	}
	if judged == 0 && len(unknown) == 0 {
		f.Severity = diagnose.Skip
		f.Evidence = diagnose.NeedTwoSamples
		if len(pinned) > 0 {
			f.Observed = strings.Join(observed, ", ")
			f.Evidence = strings.Join(pinned, "; ")
			if waiting > 0 {
				f.Evidence += "; the other counters: " + diagnose.NeedTwoSamples
			}
		}
		return f, true
	}
	if judged > 0 && len(evidence) == len(unknown) {
		evidence = append(evidence, fmt.Sprintf("no increase in the last %s over %d samples", diagnose.Span(h.Span()), h.Len()))
	}
	evidence = append(evidence, pinned...)
	if waiting > 0 {
		evidence = append(evidence, "the other counters: "+diagnose.NeedTwoSamples)
	}
	f.Severity = sev
	f.Observed = strings.Join(observed, ", ")
	f.Evidence = strings.Join(evidence, "; ")
	if sev == diagnose.Warn || sev == diagnose.Fail {
		var rs []string
		if badJudged {
			rs = append(rs, cc.remedy(t, d, p))
		}
		if len(unknown) > 0 {
			rs = append(rs, fmt.Sprintf("clear the saturated counters so they count again: perfquery -C %s -P %d -R "+
				"(rdma_doctor judges increases, so clearing loses nothing)", d.Name, p.Num))
		}
		f.Remedy = strings.Join(rs, "; ")
		f.Action = cc.action
	}
	return f, true
}
