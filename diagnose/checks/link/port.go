// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"math"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
)

// PortChecks registers the checks of port.go; checks.All lists every concern's.
func PortChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "port.phys",
		Title: "Physical link up",
		Reads: []diagnose.Source{diagnose.SourceInfiniband},
		Doc: "ports/N/phys_state is 5: LinkUp. 2: Polling means no peer (cable unplugged, peer port down), " +
			"3: Disabled an administratively disabled port, 6: LinkErrorRecovery an unstable link. On Ethernet (RoCE) " +
			"ports 3: Disabled means the netdev is set down or has no carrier, judged by its flags and carrier. " +
			"Only a required port fails (diagnose.ports): one the config names, one ACTIVE since rdma_doctor " +
			"started, or any port of a host with none up; a spare port (never cabled, admin-down) skips.",
		Remedy: "Check cable and transceiver and the peer switch port; mlxlink -d <pci> -p <port> shows the Troubleshooting Info.",
		Run:    checkPortPhys,
	})
	l.Register(&diagnose.Check{
		ID:    "port.state",
		Title: "Logical port state ACTIVE",
		Reads: []diagnose.Source{diagnose.SourceInfiniband},
		Doc: "ports/N/state is 4: ACTIVE. INIT with the physical link up means no subnet manager has configured " +
			"the port (warn, see sm.present); DOWN and ARMED fail, DOWN only on a required port (as port.phys).",
		Remedy: "Fix the physical link first (port.phys); for INIT start a subnet manager; for ARMED check the SM log and partitions.",
		Run:    checkPortState,
	})
	l.Register(&diagnose.Check{
		ID:    "port.rate",
		Title: "Link rate as expected",
		Reads: []diagnose.Source{diagnose.SourceInfiniband},
		Doc: "The active rate (ports/N/rate) equals the expected rate from the config (expected.ports, " +
			"expected.boards, expected.hca_types) or the board_id table. Below it fails: the guide's case of a " +
			"switch port set to FDR, or a cable that trains fewer lanes or a lower speed. A 2X width alone is no fault " +
			"(HDR100 and 200G NDR cards run 2X), so without an expectation the check skips.",
		Remedy: "Check the switch-port speed/width setting and the cable (reseat, replace, or use one rated for the speed); " +
			"iblinkinfo shows the peer port, mlxlink -d <pci> the enabled and supported speeds.",
		Run: checkPortRate,
	})
	l.Register(&diagnose.Check{
		ID:    "port.layer",
		Title: "Link layer as expected",
		Reads: []diagnose.Source{diagnose.SourceInfiniband},
		Doc: "ports/N/link_layer (InfiniBand or Ethernet) is the one diagnose.link_layers asks for; a VPI card " +
			"configured for Ethernet on a port meant for InfiniBand fails.",
		Remedy: "mlxconfig -d <pci> set LINK_TYPE_P<port>=1 (InfiniBand) or 2 (Ethernet), then reboot or mlxfwreset.",
		Run:    checkPortLayer,
	})
}

// portOrNone runs fn on every port and says so when the host has none.
func portOrNone(s *diagnose.Reading, fn func(d *infiniband.Device, p *infiniband.Port) []diagnose.Finding) []diagnose.Finding {
	var out []diagnose.Finding
	ports := 0
	kit.ForEachPort(s, func(d *infiniband.Device, p *infiniband.Port) {
		ports++
		out = append(out, fn(d, p)...)
	})
	if ports == 0 {
		return kit.NoTargets("no RDMA ports on this host")
	}
	return out
}

func checkPortPhys(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	return portOrNone(s, func(d *infiniband.Device, p *infiniband.Port) []diagnose.Finding {
		t := kit.PortTarget(d, p)
		if !p.PhysState.OK {
			return []diagnose.Finding{kit.Unreadable(t, d, fmt.Sprintf("ports/%d/phys_state", p.Num))}
		}
		f := diagnose.Finding{Target: t, Observed: kit.EnumText(p.PhysState.V), Expected: "5: LinkUp",
			Evidence: fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/phys_state", d.Name, p.Num)}
		if p.PhysState.V.Value != infiniband.PhysStateLinkUp {
			if spare, ok := sparePort(s, cfg, d, p, f); ok {
				return []diagnose.Finding{spare}
			}
			if !kit.IsIBPort(d, p) {
				return []diagnose.Finding{ethernetDown(s, d, p, f)}
			}
		}
		mlx := kit.LinkTool(d, p, "", "")
		if kit.IsNVIDIA(d) {
			mlx += " (Troubleshooting Info, Module Info)"
		}
		switch p.PhysState.V.Value {
		case infiniband.PhysStateLinkUp:
			f.Severity = diagnose.Pass
		case infiniband.PhysStatePolling:
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("no peer seen on %s: check that the cable is plugged and seated at both ends, that the peer switch port is up, "+
				"and the transceiver; %s", t, mlx)
		case infiniband.PhysStateDisabled:
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s is administratively disabled: enable it (ibportstate %s enable on the local port, or on the switch port), then check %s", t, portStateArgs(d, p), mlx)
		case infiniband.PhysStateTraining:
			f.Severity = diagnose.Warn
			f.Remedy = fmt.Sprintf("%s is still training; if it stays there, check the cable and peer port: %s", t, mlx)
		case infiniband.PhysStateErrRecov:
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s is in link error recovery (an unstable link): replace the cable or transceiver, check the peer port; %s", t, mlx)
		default:
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s is not up: check cable, transceiver and peer port; %s", t, mlx)
		}
		return []diagnose.Finding{f}
	}), nil
}

// portActive reports an ACTIVE (or ACTIVE_DEFER) port.
func portActive(p *infiniband.Port) bool {
	return p.State.OK && (p.State.V.Value == infiniband.StateActive || p.State.V.Value == infiniband.StateActiveDefer)
}

// sparePort turns the finding of a down port into a skip when the port is
// not required to be up (config.PortPolicy): the unused second port of a
// dual-port card, or an admin-down Ethernet port, is not a node failure.
// A port the config names, a port that was ACTIVE since rdma_doctor
// started, and every port of a host none of whose ports is up are
// required.
func sparePort(s *diagnose.Reading, cfg *config.Config, d *infiniband.Device, p *infiniband.Port, f diagnose.Finding) (diagnose.Finding, bool) {
	switch {
	case cfg.Diagnose.Ports.Requires(d.Name, p.Num):
		return f, false
	case s.WasActive(d.Name, p.Num):
		return f, false
	case !anyPortActive(s):
		return f, false
	}
	f.Severity = diagnose.Skip
	f.Evidence += fmt.Sprintf("; a spare port: not ACTIVE since rdma_doctor started and not in diagnose.ports.required "+
		"(list it there, as {device: %s, port: %d}, if it must be up)", d.Name, p.Num)
	return f, true
}

func anyPortActive(s *diagnose.Reading) bool {
	any := false
	kit.ForEachPort(s, func(_ *infiniband.Device, p *infiniband.Port) { any = any || portActive(p) })
	return any
}

// ethernetDown judges a required Ethernet (RoCE, iWARP) port whose link
// is not up by its netdev: 3: Disabled there means the interface is down
// or has no carrier, not an InfiniBand port disabled by the SM, and the
// remedies are Ethernet ones.
func ethernetDown(s *diagnose.Reading, d *infiniband.Device, p *infiniband.Port, f diagnose.Finding) diagnose.Finding {
	t := kit.PortTarget(d, p)
	f.Severity = diagnose.Fail
	nd := findNetdev(s, p.Netdev)
	// Only NVIDIA devices have more to show than ethtool (mlxlink).
	mlx := ""
	if kit.IsNVIDIA(d) {
		mlx = kit.LinkTool(d, p, "", "")
	}
	switch {
	case nd == nil:
		tools := "ethtool <netdev>"
		if mlx != "" {
			tools += ", " + mlx
		}
		f.Remedy = fmt.Sprintf("%s (Ethernet) has no link: find its netdev (rdma link show %s/%d), bring it up (ip link set <netdev> up), "+
			"then check cable, transceiver and switch port (%s)", t, d.Name, p.Num, tools)
	case nd.AdminUp.OK && !nd.AdminUp.V, !nd.AdminUp.OK && !nd.Carrier.OK && nd.OperState.OK && nd.OperState.V == "down":
		f.Observed += ", netdev " + nd.Name + " administratively down"
		f.Evidence += ", /sys/class/net/" + nd.Name + "/flags"
		f.Remedy = fmt.Sprintf("%s is set down: ip link set %s up (and in the host's network configuration so it stays up)", nd.Name, nd.Name)
	default:
		f.Observed += ", netdev " + nd.Name + " up without carrier"
		f.Evidence += ", /sys/class/net/" + nd.Name + "/carrier"
		f.Remedy = fmt.Sprintf("%s is up but has no carrier: check the cable and transceiver (ethtool %s, ethtool -m %s), "+
			"the switch port and its speed/FEC settings", nd.Name, nd.Name, nd.Name)
		if mlx != "" {
			f.Remedy += "; " + mlx + " shows the link's troubleshooting info"
		}
	}
	return f
}

// findNetdev returns the netdev snapshot of a name, nil when unknown.
func findNetdev(s *diagnose.Reading, name string) *netdev.Netdev {
	if s.Netdev() == nil || name == "" {
		return nil
	}
	for i := range s.Netdev().Netdevs {
		if s.Netdev().Netdevs[i].Name == name {
			return &s.Netdev().Netdevs[i]
		}
	}
	return nil
}

// portStateArgs are ibportstate's arguments for a local port: it takes a
// LID and a port, or -D 0 for the local port via direct route.
func portStateArgs(d *infiniband.Device, p *infiniband.Port) string {
	return fmt.Sprintf("-C %s -P %d -D 0 %d", d.Name, p.Num, p.Num)
}

func checkPortState(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	return portOrNone(s, func(d *infiniband.Device, p *infiniband.Port) []diagnose.Finding {
		t := kit.PortTarget(d, p)
		if !p.State.OK {
			return []diagnose.Finding{kit.Unreadable(t, d, fmt.Sprintf("ports/%d/state", p.Num))}
		}
		f := diagnose.Finding{Target: t, Observed: kit.EnumText(p.State.V), Expected: "4: ACTIVE",
			Evidence: fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/state", d.Name, p.Num)}
		if p.PhysState.OK {
			f.Evidence += ", phys_state " + kit.EnumText(p.PhysState.V)
		}
		if !portActive(p) && !kit.LinkUp(p) {
			if spare, ok := sparePort(s, cfg, d, p, f); ok {
				return []diagnose.Finding{spare}
			}
		}
		switch p.State.V.Value {
		case infiniband.StateActive, infiniband.StateActiveDefer:
			f.Severity = diagnose.Pass
		case infiniband.StateInit:
			f.Severity = diagnose.Warn
			if kit.LinkUp(p) && kit.IsIBPort(d, p) {
				f.Remedy = fmt.Sprintf("%s is LinkUp but INIT: no subnet manager has configured it. Check that an SM runs on the fabric "+
					"(sminfo -C %s -P %d; a switch-embedded SM, UFM, or systemctl start opensm on one host), see sm.present", t, d.Name, p.Num)
			} else {
				f.Remedy = fmt.Sprintf("%s is initialising; if it stays INIT, fix the physical link (port.phys)", t)
			}
		case infiniband.StateArmed:
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s is ARMED: the SM configured it but did not activate it; check the SM log (opensm.log) and the partition (pkey) configuration", t)
		default:
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s is down: fix the physical link first (see port.phys for %s)", t, t)
		}
		return []diagnose.Finding{f}
	}), nil
}

func checkPortRate(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	return portOrNone(s, func(d *infiniband.Device, p *infiniband.Port) []diagnose.Finding {
		t := kit.PortTarget(d, p)
		rel := fmt.Sprintf("ports/%d/rate", p.Num)
		if !p.Rate.OK {
			return []diagnose.Finding{kit.Unreadable(t, d, rel)}
		}
		if p.PhysState.OK && !kit.LinkUp(p) {
			return []diagnose.Finding{{Severity: diagnose.Skip, Target: t, Observed: kit.RateText(p.Rate.V),
				Evidence: "the link is not up (see port.phys): the rate of a down port means nothing"}}
		}
		want, src, ok := infiniband.ExpectedRate(cfg, d, p)
		if !ok {
			what := "this port"
			if d.BoardID.OK {
				what = "board_id " + d.BoardID.V
			}
			return []diagnose.Finding{{Severity: diagnose.Skip, Target: t, Observed: kit.RateText(p.Rate.V),
				Evidence: fmt.Sprintf("no expected rate known for %s: set expected.ports, expected.boards or expected.hca_types in the config", what)}}
		}
		got := p.Rate.V
		f := diagnose.Finding{Target: t, Observed: kit.RateText(got), Expected: fmt.Sprintf("%s (%s)", kit.Gbps(want), src),
			Evidence: "/sys/class/infiniband/" + d.Name + "/" + rel}
		switch {
		case math.Abs(got.Gbps-want) < 0.01:
			f.Severity = diagnose.Pass
		case got.Gbps < want:
			f.Severity = diagnose.Fail
			f.Remedy = rateRemedy(d, p, got, want)
		default:
			f.Severity = diagnose.Warn
			f.Remedy = fmt.Sprintf("%s runs faster than expected: update the expectation in the config (%s) if the hardware changed", t, src)
		}
		return []diagnose.Finding{f}
	}), nil
}

// rateRemedy names the likely causes of a slow link, most likely first:
// lanes missing point at the cable or a splitter, a lower lane speed at the
// switch-port speed setting (the guide's FDR case) or a cable rated for less.
// Both always appear: from the host, the two look the same.
func rateRemedy(d *infiniband.Device, p *infiniband.Port, got infiniband.Rate, want float64) string {
	t := kit.PortTarget(d, p)
	mlx := kit.LinkTool(d, p, "", "")
	peer := fmt.Sprintf("%s shows the peer switch port and its \"Could be\" hint", fmt.Sprintf("iblinkinfo -C %s -P %d -l", d.Name, p.Num))
	if !kit.IsIBPort(d, p) {
		// iblinkinfo walks an InfiniBand subnet; an Ethernet peer is
		// seen from the switch.
		peer = "the switch shows its port's configured speed"
	}
	if got.Width > 0 && got.Width < 4 && got.Gbps*4/float64(got.Width) >= want {
		return fmt.Sprintf("%s trained only %s at %s lanes: check the cable first (a damaged cable or a 2X splitter/HDR100 cable), "+
			"then the switch-port speed/width setting of the peer port; reseat or replace the cable. "+
			"%s shows enabled vs supported width; %s", t, got.WidthLabel(), got.Speed, mlx, peer)
	}
	return fmt.Sprintf("%s trained at %s lanes, expected %s: check the switch-port speed setting of the peer port "+
		"(a switch port limited to a lower speed, such as FDR, is the guide's case) and the cable (one rated for a lower speed, "+
		"or damaged); reseat or replace it. %s shows enabled vs supported speeds; %s",
		t, got.Speed, kit.Gbps(want), mlx, peer)
}

func linkLayerRule(cfg *config.Config, d *infiniband.Device, p *infiniband.Port) (config.LinkLayerRule, bool) {
	rules := cfg.Diagnose.LinkLayers
	for _, match := range []func(r config.LinkLayerRule) bool{
		func(r config.LinkLayerRule) bool { return r.Device == d.Name && r.Port == p.Num },
		func(r config.LinkLayerRule) bool { return r.Device == d.Name && r.Port == 0 },
		func(r config.LinkLayerRule) bool { return r.BoardID != "" && d.BoardID.OK && r.BoardID == d.BoardID.V },
		func(r config.LinkLayerRule) bool { return r.HCAType != "" && d.HCAType.OK && r.HCAType == d.HCAType.V },
	} {
		for _, r := range rules {
			if match(r) {
				return r, true
			}
		}
	}
	return config.LinkLayerRule{}, false
}

func checkPortLayer(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	return portOrNone(s, func(d *infiniband.Device, p *infiniband.Port) []diagnose.Finding {
		t := kit.PortTarget(d, p)
		rel := fmt.Sprintf("ports/%d/link_layer", p.Num)
		if !p.LinkLayer.OK && kit.FileErr(d, rel) != nil {
			return []diagnose.Finding{kit.Unreadable(t, d, rel)}
		}
		ll, fromFile := kit.LinkLayer(p)
		obs := ll
		if !fromFile {
			obs += " (no link_layer file: InfiniBand-only kernel)"
		}
		r, ok := linkLayerRule(cfg, d, p)
		if !ok {
			return []diagnose.Finding{{Severity: diagnose.Skip, Target: t, Observed: obs,
				Evidence: "no expected link layer for this port: set diagnose.link_layers in the config"}}
		}
		f := diagnose.Finding{Target: t, Observed: obs, Expected: string(r.LinkLayer) + " (diagnose.link_layers)",
			Evidence: "/sys/class/infiniband/" + d.Name + "/" + rel}
		if ll == string(r.LinkLayer) {
			f.Severity = diagnose.Pass
		} else {
			f.Severity = diagnose.Fail
			typ := 1
			if r.LinkLayer == "Ethernet" {
				typ = 2
			}
			if kit.IsNVIDIA(d) {
				f.Remedy = fmt.Sprintf("%s runs %s: mlxconfig -d %s set LINK_TYPE_P%d=%d (%s), then reboot or mlxfwreset -d %s reset",
					t, ll, kit.MlxlinkDev(d), p.Num, typ, r.LinkLayer, kit.MlxlinkDev(d))
			} else {
				// Only VPI (ConnectX) ports switch link layer; other
				// devices are built for one.
				f.Remedy = fmt.Sprintf("%s runs %s and this device cannot switch its link layer (only NVIDIA VPI adapters can): "+
					"use a port of the other type, or correct diagnose.link_layers", t, ll)
			}
		}
		return []diagnose.Finding{f}
	}), nil
}
