// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
)

// NetdevChecks registers the checks of netdev.go; checks.All lists every concern's.
func NetdevChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "port.netdev",
		Title: "Netdev of an active port is up",
		Reads: []diagnose.Source{diagnose.SourceInfiniband, diagnose.SourceNetdev},
		Doc: "The netdev of an ACTIVE port (IPoIB or RoCE) has operstate up; an ACTIVE port whose netdev is down carries no IP " +
			"traffic (IPoIB) and no RoCE traffic.",
		Remedy: "ip link set <netdev> up; check the NetworkManager or ifcfg profile.",
		Run:    checkPortNetdev,
	})
	l.Register(&diagnose.Check{
		ID:    "ipoib.mode",
		Title: "IPoIB mode",
		Reads: []diagnose.Source{diagnose.SourceNetdev},
		Doc: "The IPoIB mode (/sys/class/net/<ib>/mode) follows diagnose.policies.ipoib_mode. Enhanced IPoIB (ConnectX-4 and later, " +
			"the default on RHEL 8+ and MLNX_OFED) has no connected mode: datagram passes there whatever the policy. With the " +
			"default policy (auto) either mode passes.",
		Remedy: "echo connected > /sys/class/net/<ib>/mode (legacy IPoIB only) and persist it in the NetworkManager profile (action ipoib-mode).",
		Run:    checkIPoIBMode,
	})
	l.Register(&diagnose.Check{
		ID:    "ipoib.mtu",
		Title: "IPoIB MTU matches the mode",
		Reads: []diagnose.Source{diagnose.SourceNetdev},
		Doc: "Connected mode: MTU 65520. Datagram mode: the IB MTU minus 4, 4092 on a 4K fabric (2044 on a 2K fabric passes with a note). " +
			"Enhanced IPoIB in datagram mode with MTU 4092 passes.",
		Remedy: "ip link set <ib> mtu <value> and persist it (action ipoib-mode).",
		Run:    checkIPoIBMTU,
	})
	l.Register(&diagnose.Check{
		ID:    "ipoib.ipv6",
		Title: "IPv6 on IPoIB per site policy",
		Reads: []diagnose.Source{diagnose.SourceNetdev},
		Doc: "IPv6 on IPoIB netdevs (disable_ipv6) follows diagnose.policies.ipoib_ipv6; by default (any) it is only reported: " +
			"no upstream requirement either way was found.",
		Remedy: "sysctl -w net.ipv6.conf.<ib>.disable_ipv6=1 (or 0) and persist it (action ipoib-ipv6).",
		Run:    checkIPoIBIPv6,
	})
	l.Register(&diagnose.Check{
		ID:    "roce.gid_v2",
		Title: "RoCE v2 GIDs present",
		Reads: []diagnose.Source{diagnose.SourceInfiniband, diagnose.SourceNetdev},
		Doc: "Every RoCE netdev of an RDMA port has at least one GID of type \"RoCE v2\" (ports/N/gid_attrs/types). Without one, " +
			"RoCE v2 (routable RoCE, what NCCL and most fabrics use) cannot work.",
		Remedy: "Give the netdev an IP address (RoCE v2 GIDs follow the addresses); check the kernel/OFED version.",
		Run:    checkRoCEv2,
	})
}

func ipoibNetdevs(s *diagnose.Reading) []*netdev.Netdev {
	var out []*netdev.Netdev
	for i := range s.Netdev().Netdevs {
		if s.Netdev().Netdevs[i].IPoIB != nil {
			out = append(out, &s.Netdev().Netdevs[i])
		}
	}
	return out
}

func findPort(s *diagnose.Reading, dev string, num int) *infiniband.Port {
	if s.IB() == nil {
		return nil
	}
	for i := range s.IB().Devices {
		d := &s.IB().Devices[i]
		if d.Name != dev {
			continue
		}
		for j := range d.Ports {
			if d.Ports[j].Num == num {
				return &d.Ports[j]
			}
		}
	}
	return nil
}

func checkPortNetdev(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for i := range s.Netdev().Netdevs {
		n := &s.Netdev().Netdevs[i]
		if n.Device == "" {
			continue
		}
		p := findPort(s, n.Device, n.Port)
		if p == nil || !p.State.OK || p.State.V.Value != infiniband.StateActive {
			continue // a port that is not ACTIVE is port.state's finding
		}
		f := diagnose.Finding{Target: n.Name, Expected: "operstate up (its port " + fmt.Sprintf("%s/%d", n.Device, n.Port) + " is ACTIVE)",
			Evidence: "/sys/class/net/" + n.Name + "/operstate", Severity: diagnose.Pass}
		if !n.OperState.OK {
			f.Severity, f.Evidence = diagnose.Skip, "cannot read /sys/class/net/"+n.Name+"/operstate"
			out = append(out, f)
			continue
		}
		f.Observed = "operstate " + n.OperState.V
		if n.Carrier.OK {
			f.Observed += fmt.Sprintf(", carrier %v", n.Carrier.V)
		}
		// "unknown" is what drivers without link state report; only down
		// (or lowerlayerdown) is a fault.
		if n.OperState.V == "down" || n.OperState.V == "lowerlayerdown" {
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s is down while its RDMA port is ACTIVE: ip link set %s up, and check its NetworkManager/ifcfg profile", n.Name, n.Name)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no netdev of an ACTIVE RDMA port"), nil
	}
	return out, nil
}

// ipoibFacts describes the mode situation of an IPoIB netdev.
func ipoibFacts(n *netdev.Netdev) (mode string, enhanced, cmKnown, cmSupported bool) {
	ib := n.IPoIB
	if ib.Mode.OK {
		mode = ib.Mode.V
	}
	enhanced = ib.Enhanced.OK && ib.Enhanced.V
	cmKnown, cmSupported = ib.ConnectedModeSupported.OK, ib.ConnectedModeSupported.V
	return
}

func checkIPoIBMode(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	policy := string(cfg.Diagnose.Policies.IPoIBMode)
	if policy == "" {
		policy = "auto"
	}
	var out []diagnose.Finding
	for _, n := range ipoibNetdevs(s) {
		mode, enhanced, cmKnown, cmSupported := ipoibFacts(n)
		if mode == "" {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: n.Name, Evidence: "cannot read /sys/class/net/" + n.Name + "/mode"})
			continue
		}
		f := diagnose.Finding{Target: n.Name, Observed: mode, Evidence: "/sys/class/net/" + n.Name + "/mode", Severity: diagnose.Pass}
		if enhanced {
			f.Observed += " (enhanced IPoIB: connected mode unsupported)"
		} else if cmKnown {
			f.Observed += fmt.Sprintf(" (connected mode supported: %v)", cmSupported)
		}
		switch policy {
		case "auto":
			f.Expected = "datagram on enhanced IPoIB, either mode elsewhere (diagnose.policies.ipoib_mode auto)"
			if enhanced && mode != "datagram" {
				f.Severity = diagnose.Warn
			}
		case "connected":
			f.Expected = "connected (diagnose.policies.ipoib_mode), where supported"
			if mode != "connected" && !enhanced && (!cmKnown || cmSupported) {
				f.Severity = diagnose.Warn
			}
		case "datagram":
			f.Expected = "datagram (diagnose.policies.ipoib_mode)"
			if mode != "datagram" {
				f.Severity = diagnose.Warn
			}
		}
		if f.Severity == diagnose.Warn {
			target := "connected"
			if mode == "connected" {
				target = "datagram"
			}
			f.Remedy = fmt.Sprintf("echo %s > /sys/class/net/%s/mode and set the MTU to match (65520 connected, 4092 datagram on a 4K fabric); persist it "+
				"(nmcli connection modify <profile> infiniband.transport-mode %s); every host of the subnet should agree", target, n.Name, target)
			f.Action = "ipoib-mode"
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no IPoIB netdev"), nil
	}
	return out, nil
}

func checkIPoIBMTU(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for _, n := range ipoibNetdevs(s) {
		mode, _, _, _ := ipoibFacts(n)
		if mode == "" || !n.MTU.OK {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: n.Name, Evidence: "cannot read the mode or mtu of /sys/class/net/" + n.Name})
			continue
		}
		mtu := n.MTU.V
		f := diagnose.Finding{Target: n.Name, Observed: fmt.Sprintf("%s mode, MTU %d", mode, mtu), Evidence: "/sys/class/net/" + n.Name + "/{mode,mtu}", Severity: diagnose.Pass}
		want := uint64(4092)
		switch mode {
		case "connected":
			want = 65520
			f.Expected = "65520 in connected mode"
		default:
			f.Expected = "4092 in datagram mode on a 4K fabric (the IB MTU minus 4), 2044 on a 2K fabric"
			if mtu == 2044 {
				f.Evidence += "; 2044 is right on a fabric whose SM sets a 2K multicast MTU"
				want = 2044
			}
		}
		if mtu != want {
			f.Severity = diagnose.Warn
			f.Remedy = fmt.Sprintf("ip link set %s mtu %d and persist it (nmcli connection modify <profile> infiniband.mtu %d); in datagram mode the MTU "+
				"cannot exceed the IB MTU minus 4, which the SM's multicast group sets", n.Name, want, want)
			f.Action = "ipoib-mode"
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no IPoIB netdev"), nil
	}
	return out, nil
}

func checkIPoIBIPv6(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	policy := string(cfg.Diagnose.Policies.IPoIBIPv6)
	if policy == "" {
		policy = "any"
	}
	var out []diagnose.Finding
	for _, n := range ipoibNetdevs(s) {
		if !n.IPv6Disabled.OK {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: n.Name, Evidence: "cannot read /proc/sys/net/ipv6/conf/" + n.Name + "/disable_ipv6 (IPv6 not built in?)"})
			continue
		}
		state := "enabled"
		if n.IPv6Disabled.V {
			state = "disabled"
		}
		f := diagnose.Finding{Target: n.Name, Observed: "IPv6 " + state, Evidence: "/proc/sys/net/ipv6/conf/" + n.Name + "/disable_ipv6", Severity: diagnose.Pass,
			Expected: "IPv6 " + policy + " (diagnose.policies.ipoib_ipv6)"}
		if policy == "any" {
			f.Expected = "reported only (diagnose.policies.ipoib_ipv6 any): no upstream requirement either way"
		} else if state != policy {
			f.Severity = diagnose.Warn
			v := 0
			if policy == "disabled" {
				v = 1
			}
			f.Remedy = fmt.Sprintf("sysctl -w net.ipv6.conf.%s.disable_ipv6=%d and persist it in /etc/sysctl.d/90-rdma-doctor.conf", n.Name, v)
			f.Action = "ipoib-ipv6"
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no IPoIB netdev"), nil
	}
	return out, nil
}

func checkRoCEv2(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for i := range s.Netdev().Netdevs {
		n := &s.Netdev().Netdevs[i]
		if n.Kind == netdev.KindIWARP && n.Device != "" {
			out = append(out, iwarpSkip(n))
			continue
		}
		if n.Kind != netdev.KindRoCE || n.Device == "" {
			continue
		}
		t := fmt.Sprintf("%s/%d", n.Device, n.Port)
		f := diagnose.Finding{Target: t, Observed: fmt.Sprintf("%s: %d RoCE v2 GID(s), %d RoCE v1", n.Name, n.GIDTypes[netdev.GIDRoCEv2], n.GIDTypes[netdev.GIDRoCEv1]),
			Expected: "at least one RoCE v2 GID", Evidence: fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/gid_attrs/types", n.Device, n.Port), Severity: diagnose.Pass}
		if n.GIDTypes[netdev.GIDRoCEv2] == 0 {
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s has no RoCE v2 GID: give %s an IP address (RoCE v2 GIDs follow its addresses; ip addr add <addr>/<len> dev %s), "+
				"check the rdma_cm default RoCE mode (/sys/kernel/config/rdma_cm/%s/ports/%d/default_roce_mode) and the kernel", t, n.Name, n.Name, n.Device, n.Port)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no RoCE netdev mapped to an RDMA port"), nil
	}
	return out, nil
}

// iwarpSkip is the finding of a RoCE check on an iWARP port: node type
// "4: RNIC" with an Ethernet link layer runs RDMA over TCP, so it has no
// RoCE GIDs and needs no lossless priority; judging it as RoCE would fail
// a healthy port and send the operator to fix what does not apply.
func iwarpSkip(n *netdev.Netdev) diagnose.Finding {
	return diagnose.Finding{Severity: diagnose.Skip, Target: fmt.Sprintf("%s/%d", n.Device, n.Port), Observed: n.Name + ": iWARP",
		Evidence: fmt.Sprintf("/sys/class/infiniband/%s/node_type is 4: RNIC: iWARP runs RDMA over TCP, not RoCE; RoCE GIDs and "+
			"the RoCE lossless settings do not apply", n.Device)}
}
