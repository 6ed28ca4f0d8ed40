// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/roce"
)

// defaultRoCEPriority is the priority RoCE uses when neither the config
// nor the default RoCE ToS says: NVIDIA's RoCE guidance configures
// lossless priority 3 (DSCP 26), as mlnx_qos examples and
// "HowTo Configure PFC on ConnectX-4" do.
const defaultRoCEPriority = 3

// RoCEChecks registers the checks of roce.go; checks.All lists every concern's.
func RoCEChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "roce.lossless",
		Title: "RoCE priority is lossless",
		Reads: []diagnose.Source{diagnose.SourceRoCE},
		Doc: "For each RoCE netdev: PFC is enabled on the RoCE priority (diagnose.policies.roce_priority, else the priority the " +
			"rdma_cm default RoCE ToS maps to, else 3), the port trusts DSCP, ECN is enabled on that priority at the notification " +
			"and reaction points, the CNP priority is a valid 802.1p priority, and global (802.3x) pause is off. PFC, trust and " +
			"pause come from DCB netlink and ethtool and are judged on the live host only; ECN and the CNP priority come from " +
			"MLNX_OFED's /sys/class/net/<if>/ecn tree. PFC off on the RoCE priority fails; the rest warns.",
		Remedy: "mlnx_qos -i <if> --trust dscp --pfc 0,0,0,1,0,0,0,0 (or dcb pfc set dev <if> prio-pfc 3:on); " +
			"echo 1 > /sys/class/net/<if>/ecn/roce_np/enable/3 and roce_rp/enable/3; ethtool -A <if> rx off tx off.",
		Run: checkRoCELossless,
	})
}

// rocePriority is the priority judged and where it came from.
func rocePriority(n *roce.Netdev, cfg *config.Config) (int, string) {
	if p := cfg.Diagnose.Policies.RoCEPriority; p != nil {
		return *p, "diagnose.policies.roce_priority"
	}
	if n.DefaultToS.OK && n.DefaultToS.V != 0 {
		dscp := uint16(n.DefaultToS.V >> 2)
		if n.DCB != nil {
			if p, ok := n.DCB.DSCPPriority(dscp); ok {
				return int(p), fmt.Sprintf("default_roce_tos %d (DSCP %d) in the DSCP map", n.DefaultToS.V, dscp)
			}
		}
		return int(roce.ToSPriority(n.DefaultToS.V)), fmt.Sprintf("default_roce_tos %d (DSCP %d, default map)", n.DefaultToS.V, dscp)
	}
	return defaultRoCEPriority, "the default"
}

func prioList(mask uint8) string {
	var ps []string
	for p := range roce.Priorities {
		if mask&(1<<p) != 0 {
			ps = append(ps, fmt.Sprint(p))
		}
	}
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ",")
}

func pfcVector(p int) string {
	v := make([]string, roce.Priorities)
	for i := range v {
		v[i] = "0"
	}
	v[p] = "1"
	return strings.Join(v, ",")
}

func checkRoCELossless(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for i := range s.RoCE().Netdevs {
		n := &s.RoCE().Netdevs[i]
		prio, from := rocePriority(n, cfg)
		// mlnx_qos (mlnx-tools) drives NVIDIA devices only; the
		// iproute2 dcb tool every DCB driver.
		nv := kit.VendorOf(s, n.Device) == kit.VendorNVIDIA
		f := diagnose.Finding{Target: fmt.Sprintf("%s/%d", n.Device, n.Port), Severity: diagnose.Pass,
			Expected: fmt.Sprintf("priority %d (%s): PFC on, trust dscp, ECN on at roce_np and roce_rp, global pause off", prio, from)}
		var obs, ev, rem []string
		judged := false
		worse := func(sev diagnose.Severity, remedy string) {
			if sev.Worse(f.Severity) {
				f.Severity = sev
			}
			rem = append(rem, remedy)
		}
		if d := n.DCB; d != nil {
			judged = true
			ev = append(ev, "DCB netlink (DCB_CMD_IEEE_GET)")
			if d.PFC != nil {
				obs = append(obs, "PFC on "+prioList(d.PFC.Enabled))
				if d.PFC.Enabled&(1<<prio) == 0 {
					if nv {
						worse(diagnose.Fail, fmt.Sprintf("mlnx_qos -i %s --pfc %s (or dcb pfc set dev %s prio-pfc %d:on)", n.Name, pfcVector(prio), n.Name, prio))
					} else {
						worse(diagnose.Fail, fmt.Sprintf("dcb pfc set dev %s prio-pfc %d:on", n.Name, prio))
					}
				}
			}
			if d.TrustDSCP() {
				obs = append(obs, "trust dscp")
			} else {
				obs = append(obs, "trust pcp")
				if nv {
					worse(diagnose.Warn, fmt.Sprintf("mlnx_qos -i %s --trust dscp", n.Name))
				} else {
					worse(diagnose.Warn, fmt.Sprintf("map the RoCE DSCP to priority %d in the DCB application table (dcb app add dev %s dscp-prio <dscp>:%d)", prio, n.Name, prio))
				}
			}
		} else if n.Live && n.DCBStatus != "" {
			obs = append(obs, "DCB "+string(n.DCBStatus))
		}
		if p := n.Pause; p != nil {
			judged = true
			ev = append(ev, "ETHTOOL_GPAUSEPARAM")
			if p.RX || p.TX {
				obs = append(obs, fmt.Sprintf("global pause rx %s tx %s", onOff(p.RX), onOff(p.TX)))
				worse(diagnose.Warn, fmt.Sprintf("ethtool -A %s rx off tx off", n.Name))
			} else {
				obs = append(obs, "global pause off")
			}
		}
		for _, pt := range roce.Points {
			en, ok := n.ECN[pt]
			if !ok {
				continue
			}
			judged = true
			ev = append(ev, fmt.Sprintf("/sys/class/net/%s/ecn/%s/enable/%d", n.Name, pt, prio))
			switch v := en[prio]; {
			case !v.OK:
				obs = append(obs, fmt.Sprintf("%s priority %d unreadable", pt, prio))
			case v.V:
				obs = append(obs, fmt.Sprintf("ECN %s on", pt))
			default:
				obs = append(obs, fmt.Sprintf("ECN %s off", pt))
				worse(diagnose.Warn, fmt.Sprintf("echo 1 > /sys/class/net/%s/ecn/%s/enable/%d", n.Name, pt, prio))
			}
		}
		if c := n.CNPPriority; c.OK {
			judged = true
			obs = append(obs, fmt.Sprintf("CNP priority %d", c.V))
			if c.V >= roce.Priorities {
				worse(diagnose.Warn, fmt.Sprintf("echo <0-7> > /sys/class/net/%s/ecn/roce_np/params/cnp_802p_prio", n.Name))
			}
		}
		if !judged {
			asked := "not asked"
			if n.DCBStatus != "" {
				asked = "DCB " + string(n.DCBStatus)
			}
			f.Severity = diagnose.Skip
			f.Evidence = fmt.Sprintf("%s: no DCB or pause answer from the running kernel (not the live /sys, or %s) and no MLNX_OFED ecn tree", n.Name, asked)
			out = append(out, f)
			continue
		}
		f.Observed = n.Name + ": " + strings.Join(obs, ", ")
		f.Evidence = strings.Join(ev, "; ")
		if !n.Live {
			f.Evidence += "; PFC, trust and global pause not judged: the tree read is not the running kernel's"
		}
		f.Remedy = strings.Join(rem, "; ")
		out = append(out, f)
	}
	if s.Netdev() != nil {
		for i := range s.Netdev().Netdevs {
			if n := &s.Netdev().Netdevs[i]; n.Kind == netdev.KindIWARP && n.Device != "" {
				out = append(out, iwarpSkip(n))
			}
		}
	}
	if len(out) == 0 {
		return kit.NoTargets("no RoCE netdev mapped to an RDMA port"), nil
	}
	return out, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
