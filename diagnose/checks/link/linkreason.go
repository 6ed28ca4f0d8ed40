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
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
)

// LinkReasonChecks registers the checks of linkreason.go; checks.All lists every concern's.
func LinkReasonChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "port.down_reason",
		Title: "Why an Ethernet link is down",
		Reads: []diagnose.Source{diagnose.SourceInfiniband, diagnose.SourceNetdev},
		Doc: "For RoCE netdevs of the running kernel, the ethtool link extended state (ethtool netlink LINKSTATE_GET; mlx5 " +
			"reports it from the firmware's troubleshooting page while the link is down): no cable, cable issue, bad signal " +
			"integrity, overheat, autonegotiation or link training failure, FEC mismatch. A down link with a reason fails with " +
			"the remedy for that reason; a spare port (not ACTIVE since start, not required) skips; a link that is up passes. " +
			"Absent (skip) where the driver gives no reason, on kernels before 5.6, and on fixture trees.",
		Remedy: "Per reason: plug or replace the cable (no cable), replace it with a supported one (cable issue), clean and reseat " +
			"(signal integrity), restore airflow (overheat), align speed, FEC and autonegotiation with the switch port.",
		Run: checkPortDownReason,
	})
}

// downRemedy is the step for each extended state; %[1]s is the netdev,
// %[2]s, %[3]s and %[4]s the commands that show its port's link, module
// and physical counters (mlxlink on NVIDIA devices, ethtool elsewhere:
// kit/vendor.go).
var downRemedy = map[netdev.ExtState]string{
	netdev.ExtStateNoCable: "no cable or module detected on %[1]s: plug the cable or transceiver in, or replace it " +
		"(ethtool -m %[1]s; %[3]s)",
	netdev.ExtStateCableIssue: "the cable is not supported or failed its test: replace it with a cable the NIC's firmware " +
		"supports (%[3]s shows the module)",
	netdev.ExtStateBadSignalIntegrity: "bad signal integrity on %[1]s: clean the fiber connectors, reseat the cable and " +
		"transceiver at both ends, replace them if errors persist (%[4]s shows the physical error counters)",
	netdev.ExtStateOverheat: "the module or NIC of %[1]s is overheating: check the chassis airflow and fans " +
		"(rdma_device_temperature_celsius; %[3]s shows the module temperature)",
	netdev.ExtStateAutoneg: "autonegotiation failed on %[1]s: make speed and autonegotiation match the switch port " +
		"(ethtool %[1]s; the switch's interface configuration)",
	netdev.ExtStateLinkTrainingFailure: "link training failed on %[1]s: check the switch port configuration, reseat the " +
		"cable, then replace it (%[2]s)",
	netdev.ExtStateLinkLogicalMismatch: "PCS or FEC mismatch with the link partner: set the same FEC mode on both ends " +
		"(ethtool --show-fec %[1]s; ethtool --set-fec %[1]s encoding rs, or what the switch uses)",
	netdev.ExtStateEEPROMIssue: "the module's EEPROM of %[1]s cannot be read: reseat or replace the transceiver " +
		"(ethtool -m %[1]s)",
	netdev.ExtStateCalibrationFailure: "calibration failed: reset the link (ip link set %[1]s down; ip link set %[1]s up), " +
		"replace the module if it persists",
	netdev.ExtStatePowerBudgetExceeded: "the module of %[1]s needs more power than the port allows: use a lower-power " +
		"module or another port (%[3]s)",
	netdev.ExtStateModule: "the module of %[1]s is not ready: reseat or replace it (ethtool -m %[1]s)",
}

func checkPortDownReason(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for i := range s.Netdev().Netdevs {
		n := &s.Netdev().Netdevs[i]
		if !n.Ethernet() || n.Ethtool == nil || n.Ethtool.Link == nil {
			continue
		}
		l := n.Ethtool.Link
		f := diagnose.Finding{Target: n.Name, Expected: "link detected", Evidence: "ethtool " + n.Name + " (netlink LINKSTATE_GET)", Severity: diagnose.Pass}
		switch {
		case !l.Link.OK:
			f.Severity, f.Observed = diagnose.Skip, "the driver does not report the link"
		case l.Link.V:
			f.Observed = "link detected"
		case !l.ExtState.OK:
			f.Severity, f.Observed = diagnose.Skip, "link down; the driver gives no reason (port.phys judges the port)"
		default:
			f = downReason(s, cfg, n, l, f)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no RoCE netdev with an ethtool link state (ethtool netlink, netdevs of the running kernel only)"), nil
	}
	return out, nil
}

// downReason judges a down link whose driver says why.
func downReason(s *diagnose.Reading, cfg *config.Config, n *netdev.Netdev, l *netdev.LinkState, f diagnose.Finding) diagnose.Finding {
	reason := l.ExtState.V.String()
	if sub := netdev.SubstateName(l.ExtState.V, l.ExtSubstate.V); sub != "" {
		reason += " (" + sub + ")"
	}
	f.Observed = "link down: " + reason
	f.Severity = diagnose.Fail
	// Without its RDMA port the vendor is unknown: ethtool works on
	// every netdev.
	mlx, module, counters := "ethtool "+n.Name, "ethtool -m "+n.Name, "ethtool -S "+n.Name
	if d, p := netdevPort(s, n); d != nil {
		mlx, module, counters = kit.LinkTool(d, p, "", ""), kit.LinkTool(d, p, "-m", "-m"), kit.LinkTool(d, p, "-c", "-S")
		if spare, ok := sparePort(s, cfg, d, p, f); ok {
			return spare
		}
	}
	if r, ok := downRemedy[l.ExtState.V]; ok {
		// Elsewhere than on NVIDIA the module tool is ethtool -m itself.
		f.Remedy = strings.ReplaceAll(fmt.Sprintf(r, n.Name, mlx, module, counters), "ethtool -m "+n.Name+"; ethtool -m "+n.Name, "ethtool -m "+n.Name)
	} else {
		f.Remedy = fmt.Sprintf("link of %s down (%s): ethtool %s", n.Name, reason, n.Name)
		if mlx != "ethtool "+n.Name {
			f.Remedy += ", " + mlx
		}
	}
	return f
}

// netdevPort is the RDMA device and port a netdev belongs to, nil when
// it is not mapped or the class does not have it.
func netdevPort(s *diagnose.Reading, n *netdev.Netdev) (*infiniband.Device, *infiniband.Port) {
	if s.IB() == nil || n.Device == "" {
		return nil, nil
	}
	for i := range s.IB().Devices {
		d := &s.IB().Devices[i]
		if d.Name != n.Device {
			continue
		}
		for j := range d.Ports {
			if d.Ports[j].Num == n.Port {
				return d, &d.Ports[j]
			}
		}
	}
	return nil, nil
}
