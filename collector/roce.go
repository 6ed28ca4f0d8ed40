// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/read/roce"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type roceCollector struct {
	ecn, cnpPrio, cnpDSCP, tos                       *expo.Desc
	pfc, pfcFrames, trustDSCP, prioTC, pause, kernel *expo.Desc
}

func roceSpec() Spec {
	return Spec{Name: "roce", Default: true,
		Help: "RoCE lossless configuration per RoCE netdev: ECN per priority, CNP priority and default RoCE ToS from sysfs and configfs; PFC, ETS, trust mode and global pause from DCB netlink and ethtool (live /sys only; no privileges)",
		New:  func(env Env, _ *Flags) (Collector, error) { return NewRoCECollector(env), nil }}
}

// NewRoCECollector builds the roce collector: the lossless configuration
// of each RoCE netdev.
func NewRoCECollector(Env) Collector {
	return &roceCollector{
		ecn: desc("rdma_roce_ecn_enabled",
			"1 when ECN is enabled for a priority at a notification (roce_np) or reaction (roce_rp) point.",
			"netdev", "point", "priority"),
		cnpPrio: desc("rdma_roce_cnp_priority", "802.1p priority of the CNPs the notification point sends (ecn/roce_np/cnp_802p_prio).", "netdev"),
		cnpDSCP: desc("rdma_roce_cnp_dscp", "DSCP of the CNPs the notification point sends (ecn/roce_np/cnp_dscp).", "netdev"),
		tos: desc("rdma_roce_default_tos",
			"RDMA-CM default RoCE ToS of a port from configfs; absent when the directory was not created (ToS 0).",
			"device", "port"),
		pfc: desc("rdma_roce_pfc_enabled", "1 when PFC (IEEE 802.1Qbb) is enabled on a priority, from DCB netlink (live host only).", "netdev", "priority"),
		pfcFrames: desc("rdma_roce_pfc_frames_total",
			"PFC pause frames per priority and direction (tx sent, rx received), from DCB netlink.",
			"netdev", "direction", "priority"),
		trustDSCP: desc("rdma_roce_trust_dscp",
			"1 when the DCB application table maps DSCP values (trust dscp), 0 when not (trust pcp).", "netdev"),
		prioTC: desc("rdma_roce_priority_traffic_class", "ETS traffic class of a priority, from DCB netlink (live host only).", "netdev", "priority"),
		pause: desc("rdma_roce_global_pause_enabled",
			"1 when global (802.3x) pause is on in a direction (ETHTOOL_GPAUSEPARAM, live host only); with PFC it should be off.",
			"netdev", "direction"),
		kernel: desc("rdma_roce_kernel_requests",
			"Kernel queries of the RoCE netdevs this scrape by query (dcb, pause) and outcome: why the live-only series are absent.",
			"query", "status"),
	}
}

func (c *roceCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	s, err := snap.RoCE(ctx)
	if s == nil {
		return err
	}
	outcomes := map[[2]string]int{}
	for i := range s.Netdevs {
		n := &s.Netdevs[i]
		for _, pt := range roce.Points {
			en, ok := n.ECN[pt]
			if !ok {
				continue
			}
			for p, v := range en {
				if v.OK {
					gauge(out, c.ecn, b2f(v.V), n.Name, pt, strconv.Itoa(p))
				}
			}
		}
		optGauge(out, c.cnpPrio, n.CNPPriority, n.Name)
		optGauge(out, c.cnpDSCP, n.CNPDSCP, n.Name)
		optGauge(out, c.tos, n.DefaultToS, n.Device, strconv.Itoa(n.Port))
		if n.DCBStatus != "" {
			outcomes[[2]string{string(rdmanl.QueryDCB), string(n.DCBStatus)}]++
		}
		if n.PauseStatus != "" {
			outcomes[[2]string{string(rdmanl.QueryPause), string(n.PauseStatus)}]++
		}
		if d := n.DCB; d != nil {
			if pfc := d.PFC; pfc != nil {
				for p := range roce.Priorities {
					prio := strconv.Itoa(p)
					gauge(out, c.pfc, b2f(pfc.Enabled&(1<<p) != 0), n.Name, prio)
					counter(out, c.pfcFrames, float64(pfc.Requests[p]), n.Name, "tx", prio)
					counter(out, c.pfcFrames, float64(pfc.Indications[p]), n.Name, "rx", prio)
				}
			}
			gauge(out, c.trustDSCP, b2f(d.TrustDSCP()), n.Name)
			if e := d.ETS; e != nil {
				for p, tc := range e.PrioTC {
					gauge(out, c.prioTC, float64(tc), n.Name, strconv.Itoa(p))
				}
			}
		}
		if p := n.Pause; p != nil {
			gauge(out, c.pause, b2f(p.RX), n.Name, "rx")
			gauge(out, c.pause, b2f(p.TX), n.Name, "tx")
		}
	}
	for k, v := range outcomes {
		gauge(out, c.kernel, float64(v), k[0], k[1])
	}
	return errors.Join(append(s.Errors, err)...)
}
