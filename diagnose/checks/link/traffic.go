// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// TrafficChecks registers the checks of traffic.go; checks.All lists every concern's.
func TrafficChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "port.traffic",
		Title: "Data flowing",
		Reads: []diagnose.Source{diagnose.SourceInfiniband, diagnose.SourceHistory},
		Doc: "The guide's check that data moves: counters/port_rcv_data (4-byte words) rose over the window on an ACTIVE port. " +
			"An idle port passes unless diagnose.policies.expect_traffic is set; a saturated 32-bit data counter is unknown.",
		Remedy: "If a job should be using the port, check that it selects this device (NCCL_IB_HCA, UCX_NET_DEVICES) and that the path is up.",
		Run:    checkTraffic,
	})
}

func checkTraffic(s *diagnose.Reading, h *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	kit.ForEachPort(s, func(d *infiniband.Device, p *infiniband.Port) {
		t := kit.PortTarget(d, p)
		v, ok := counterValue(p, false, "port_rcv_data")
		if !ok {
			return
		}
		if !p.State.OK || p.State.V.Value != infiniband.StateActive {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: t, Evidence: "the port is not ACTIVE (see port.state)"})
			return
		}
		f := diagnose.Finding{Target: t, Expected: "port_rcv_data rising", Severity: diagnose.Pass}
		if spec, _ := infiniband.LookupCounter("port_rcv_data"); spec.Saturated(v, p.Extended()) {
			f.Severity, f.Unknown = diagnose.Warn, true
			f.Observed = "unknown (port_rcv_data saturated)"
			f.Evidence = fmt.Sprintf("port_rcv_data is pinned at %d (32-bit PMA without extended counters): it has stopped counting", v)
			f.Remedy = fmt.Sprintf("perfquery -C %s -P %d -R clears it; with extended counters (perfquery -x) data counters do not saturate", d.Name, p.Num)
			out = append(out, f)
			return
		}
		delta, ok := h.Increase(diagnose.CounterKey{Device: d.Name, Port: p.Num, Name: "port_rcv_data"})
		if !ok {
			f.Severity, f.Evidence = diagnose.Skip, diagnose.NeedTwoSamples
			out = append(out, f)
			return
		}
		bytes := float64(delta.Increase) * 4
		f.Evidence = fmt.Sprintf("port_rcv_data +%d words (×4 bytes) in the last %s on %s", delta.Increase, diagnose.Span(delta.Span), t)
		if delta.Increase > 0 {
			rate := ""
			if delta.Span > 0 {
				rate = fmt.Sprintf(", %s/s", kit.BytesText(bytes/delta.Span.Seconds()))
			}
			f.Observed = fmt.Sprintf("%s received in %s%s", kit.BytesText(bytes), diagnose.Span(delta.Span), rate)
		} else {
			f.Observed = fmt.Sprintf("idle: nothing received in %s", diagnose.Span(delta.Span))
			if cfg.Diagnose.Policies.ExpectTraffic {
				f.Severity = diagnose.Warn
				f.Expected += " (diagnose.policies.expect_traffic)"
				f.Remedy = fmt.Sprintf("no data reached %s: check that the job uses this device (NCCL_IB_HCA=%s, UCX_NET_DEVICES=%s:%d) and that its peers can reach it",
					t, d.Name, d.Name, p.Num)
			} else {
				f.Expected += " (reported only; set diagnose.policies.expect_traffic to warn on idle ports)"
			}
		}
		out = append(out, f)
	})
	if len(out) == 0 {
		return kit.NoTargets("no port has counters/port_rcv_data"), nil
	}
	return out, nil
}
