// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"math"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/netdev"
)

func portChecks(l *checkList) {
	l.register(&Check{
		ID:    "port.phys",
		Title: "Physical link up",
		Reads: []Source{SourceInfiniband},
		Doc: "ports/N/phys_state is 5: LinkUp. 2: Polling means no peer (cable unplugged, peer port down), " +
			"3: Disabled an administratively disabled port, 6: LinkErrorRecovery an unstable link. On Ethernet (RoCE) " +
			"ports 3: Disabled means the netdev is set down or has no carrier, judged by its flags and carrier. " +
			"Only a required port fails (diagnose.ports): one the config names, one ACTIVE since rdma_doctor " +
			"started, or any port of a host with none up; a spare port (never cabled, admin-down) skips.",
		Remedy: "Check cable and transceiver and the peer switch port; mlxlink -d <pci> -p <port> shows the Troubleshooting Info.",
		Run:    checkPortPhys,
	})
	l.register(&Check{
		ID:    "port.state",
		Title: "Logical port state ACTIVE",
		Reads: []Source{SourceInfiniband},
		Doc: "ports/N/state is 4: ACTIVE. INIT with the physical link up means no subnet manager has configured " +
			"the port (warn, see sm.present); DOWN and ARMED fail, DOWN only on a required port (as port.phys).",
		Remedy: "Fix the physical link first (port.phys); for INIT start a subnet manager; for ARMED check the SM log and partitions.",
		Run:    checkPortState,
	})
	l.register(&Check{
		ID:    "port.rate",
		Title: "Link rate as expected",
		Reads: []Source{SourceInfiniband},
		Doc: "The active rate (ports/N/rate) equals the expected rate from the config (expected.ports, " +
			"expected.boards, expected.hca_types) or the board_id table. Below it fails: the guide's case of a " +
			"switch port set to FDR, or a cable that trains fewer lanes or a lower speed. A 2X width alone is no fault " +
			"(HDR100 and 200G NDR cards run 2X), so without an expectation the check skips.",
		Remedy: "Check the switch-port speed/width setting and the cable (reseat, replace, or use one rated for the speed); " +
			"iblinkinfo shows the peer port, mlxlink -d <pci> the enabled and supported speeds.",
		Run: checkPortRate,
	})
	l.register(&Check{
		ID:    "port.layer",
		Title: "Link layer as expected",
		Reads: []Source{SourceInfiniband},
		Doc: "ports/N/link_layer (InfiniBand or Ethernet) is the one diagnose.link_layers asks for; a VPI card " +
			"configured for Ethernet on a port meant for InfiniBand fails.",
		Remedy: "mlxconfig -d <pci> set LINK_TYPE_P<port>=1 (InfiniBand) or 2 (Ethernet), then reboot or mlxfwreset.",
		Run:    checkPortLayer,
	})
}

func forEachPort(s *Reading, fn func(d *infiniband.Device, p *infiniband.Port)) {
	for i := range s.ib().Devices {
		d := &s.ib().Devices[i]
		for j := range d.Ports {
			fn(d, &d.Ports[j])
		}
	}
}

// portOrNone runs fn on every port and says so when the host has none.
func portOrNone(s *Reading, fn func(d *infiniband.Device, p *infiniband.Port) []Finding) []Finding {
	var out []Finding
	ports := 0
	forEachPort(s, func(d *infiniband.Device, p *infiniband.Port) {
		ports++
		out = append(out, fn(d, p)...)
	})
	if ports == 0 {
		return noTargets("no RDMA ports on this host")
	}
	return out
}

func checkPortPhys(s *Reading, _ *History, cfg *config.Config) ([]Finding, error) {
	return portOrNone(s, func(d *infiniband.Device, p *infiniband.Port) []Finding {
		t := portTarget(d, p)
		if !p.PhysState.OK {
			return []Finding{unreadable(t, d, fmt.Sprintf("ports/%d/phys_state", p.Num))}
		}
		f := Finding{Target: t, Observed: enumText(p.PhysState.V), Expected: "5: LinkUp",
			Evidence: fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/phys_state", d.Name, p.Num)}
		if p.PhysState.V.Value != infiniband.PhysStateLinkUp {
			if spare, ok := sparePort(s, cfg, d, p, f); ok {
				return []Finding{spare}
			}
			if !isIBPort(d, p) {
				return []Finding{ethernetDown(s, d, p, f)}
			}
		}
		mlx := linkTool(d, p, "", "")
		if isNVIDIA(d) {
			mlx += " (Troubleshooting Info, Module Info)"
		}
		switch p.PhysState.V.Value {
		case infiniband.PhysStateLinkUp:
			f.Severity = Pass
		case infiniband.PhysStatePolling:
			f.Severity = Fail
			f.Remedy = fmt.Sprintf("no peer seen on %s: check that the cable is plugged and seated at both ends, that the peer switch port is up, "+
				"and the transceiver; %s", t, mlx)
		case infiniband.PhysStateDisabled:
			f.Severity = Fail
			f.Remedy = fmt.Sprintf("%s is administratively disabled: enable it (ibportstate %s enable on the local port, or on the switch port), then check %s", t, portStateArgs(d, p), mlx)
		case infiniband.PhysStateTraining:
			f.Severity = Warn
			f.Remedy = fmt.Sprintf("%s is still training; if it stays there, check the cable and peer port: %s", t, mlx)
		case infiniband.PhysStateErrRecov:
			f.Severity = Fail
			f.Remedy = fmt.Sprintf("%s is in link error recovery (an unstable link): replace the cable or transceiver, check the peer port; %s", t, mlx)
		default:
			f.Severity = Fail
			f.Remedy = fmt.Sprintf("%s is not up: check cable, transceiver and peer port; %s", t, mlx)
		}
		return []Finding{f}
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
func sparePort(s *Reading, cfg *config.Config, d *infiniband.Device, p *infiniband.Port, f Finding) (Finding, bool) {
	switch {
	case cfg.Diagnose.Ports.Requires(d.Name, p.Num):
		return f, false
	case s.wasActive(d.Name, p.Num):
		return f, false
	case !anyPortActive(s):
		return f, false
	}
	f.Severity = Skip
	f.Evidence += fmt.Sprintf("; a spare port: not ACTIVE since rdma_doctor started and not in diagnose.ports.required "+
		"(list it there, as {device: %s, port: %d}, if it must be up)", d.Name, p.Num)
	return f, true
}

func anyPortActive(s *Reading) bool {
	any := false
	forEachPort(s, func(_ *infiniband.Device, p *infiniband.Port) { any = any || portActive(p) })
	return any
}

// ethernetDown judges a required Ethernet (RoCE, iWARP) port whose link
// is not up by its netdev: 3: Disabled there means the interface is down
// or has no carrier, not an InfiniBand port disabled by the SM, and the
// remedies are Ethernet ones.
func ethernetDown(s *Reading, d *infiniband.Device, p *infiniband.Port, f Finding) Finding {
	t := portTarget(d, p)
	f.Severity = Fail
	nd := findNetdev(s, p.Netdev)
	// Only NVIDIA devices have more to show than ethtool (mlxlink).
	mlx := ""
	if isNVIDIA(d) {
		mlx = linkTool(d, p, "", "")
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
func findNetdev(s *Reading, name string) *netdev.Netdev {
	if s.netdev() == nil || name == "" {
		return nil
	}
	for i := range s.netdev().Netdevs {
		if s.netdev().Netdevs[i].Name == name {
			return &s.netdev().Netdevs[i]
		}
	}
	return nil
}

// portStateArgs are ibportstate's arguments for a local port: it takes a
// LID and a port, or -D 0 for the local port via direct route.
func portStateArgs(d *infiniband.Device, p *infiniband.Port) string {
	return fmt.Sprintf("-C %s -P %d -D 0 %d", d.Name, p.Num, p.Num)
}

func checkPortState(s *Reading, _ *History, cfg *config.Config) ([]Finding, error) {
	return portOrNone(s, func(d *infiniband.Device, p *infiniband.Port) []Finding {
		t := portTarget(d, p)
		if !p.State.OK {
			return []Finding{unreadable(t, d, fmt.Sprintf("ports/%d/state", p.Num))}
		}
		f := Finding{Target: t, Observed: enumText(p.State.V), Expected: "4: ACTIVE",
			Evidence: fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/state", d.Name, p.Num)}
		if p.PhysState.OK {
			f.Evidence += ", phys_state " + enumText(p.PhysState.V)
		}
		if !portActive(p) && !linkUp(p) {
			if spare, ok := sparePort(s, cfg, d, p, f); ok {
				return []Finding{spare}
			}
		}
		switch p.State.V.Value {
		case infiniband.StateActive, infiniband.StateActiveDefer:
			f.Severity = Pass
		case infiniband.StateInit:
			f.Severity = Warn
			if linkUp(p) && isIBPort(d, p) {
				f.Remedy = fmt.Sprintf("%s is LinkUp but INIT: no subnet manager has configured it. Check that an SM runs on the fabric "+
					"(sminfo -C %s -P %d; a switch-embedded SM, UFM, or systemctl start opensm on one host), see sm.present", t, d.Name, p.Num)
			} else {
				f.Remedy = fmt.Sprintf("%s is initialising; if it stays INIT, fix the physical link (port.phys)", t)
			}
		case infiniband.StateArmed:
			f.Severity = Fail
			f.Remedy = fmt.Sprintf("%s is ARMED: the SM configured it but did not activate it; check the SM log (opensm.log) and the partition (pkey) configuration", t)
		default:
			f.Severity = Fail
			f.Remedy = fmt.Sprintf("%s is down: fix the physical link first (see port.phys for %s)", t, t)
		}
		return []Finding{f}
	}), nil
}

func checkPortRate(s *Reading, _ *History, cfg *config.Config) ([]Finding, error) {
	return portOrNone(s, func(d *infiniband.Device, p *infiniband.Port) []Finding {
		t := portTarget(d, p)
		rel := fmt.Sprintf("ports/%d/rate", p.Num)
		if !p.Rate.OK {
			return []Finding{unreadable(t, d, rel)}
		}
		if p.PhysState.OK && !linkUp(p) {
			return []Finding{{Severity: Skip, Target: t, Observed: rateText(p.Rate.V),
				Evidence: "the link is not up (see port.phys): the rate of a down port means nothing"}}
		}
		want, src, ok := infiniband.ExpectedRate(cfg, d, p)
		if !ok {
			what := "this port"
			if d.BoardID.OK {
				what = "board_id " + d.BoardID.V
			}
			return []Finding{{Severity: Skip, Target: t, Observed: rateText(p.Rate.V),
				Evidence: fmt.Sprintf("no expected rate known for %s: set expected.ports, expected.boards or expected.hca_types in the config", what)}}
		}
		got := p.Rate.V
		f := Finding{Target: t, Observed: rateText(got), Expected: fmt.Sprintf("%s (%s)", gbps(want), src),
			Evidence: "/sys/class/infiniband/" + d.Name + "/" + rel}
		switch {
		case math.Abs(got.Gbps-want) < 0.01:
			f.Severity = Pass
		case got.Gbps < want:
			f.Severity = Fail
			f.Remedy = rateRemedy(d, p, got, want)
		default:
			f.Severity = Warn
			f.Remedy = fmt.Sprintf("%s runs faster than expected: update the expectation in the config (%s) if the hardware changed", t, src)
		}
		return []Finding{f}
	}), nil
}

// rateRemedy names the likely causes of a slow link, most likely first:
// lanes missing point at the cable or a splitter, a lower lane speed at the
// switch-port speed setting (the guide's FDR case) or a cable rated for less.
// Both always appear: from the host, the two look the same.
func rateRemedy(d *infiniband.Device, p *infiniband.Port, got infiniband.Rate, want float64) string {
	t := portTarget(d, p)
	mlx := linkTool(d, p, "", "")
	peer := fmt.Sprintf("%s shows the peer switch port and its \"Could be\" hint", fmt.Sprintf("iblinkinfo -C %s -P %d -l", d.Name, p.Num))
	if !isIBPort(d, p) {
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
		t, got.Speed, gbps(want), mlx, peer)
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

func checkPortLayer(s *Reading, _ *History, cfg *config.Config) ([]Finding, error) {
	return portOrNone(s, func(d *infiniband.Device, p *infiniband.Port) []Finding {
		t := portTarget(d, p)
		rel := fmt.Sprintf("ports/%d/link_layer", p.Num)
		if !p.LinkLayer.OK && fileErr(d, rel) != nil {
			return []Finding{unreadable(t, d, rel)}
		}
		ll, fromFile := linkLayer(p)
		obs := ll
		if !fromFile {
			obs += " (no link_layer file: InfiniBand-only kernel)"
		}
		r, ok := linkLayerRule(cfg, d, p)
		if !ok {
			return []Finding{{Severity: Skip, Target: t, Observed: obs,
				Evidence: "no expected link layer for this port: set diagnose.link_layers in the config"}}
		}
		f := Finding{Target: t, Observed: obs, Expected: string(r.LinkLayer) + " (diagnose.link_layers)",
			Evidence: "/sys/class/infiniband/" + d.Name + "/" + rel}
		if ll == string(r.LinkLayer) {
			f.Severity = Pass
		} else {
			f.Severity = Fail
			typ := 1
			if r.LinkLayer == "Ethernet" {
				typ = 2
			}
			if isNVIDIA(d) {
				f.Remedy = fmt.Sprintf("%s runs %s: mlxconfig -d %s set LINK_TYPE_P%d=%d (%s), then reboot or mlxfwreset -d %s reset",
					t, ll, mlxlinkDev(d), p.Num, typ, r.LinkLayer, mlxlinkDev(d))
			} else {
				// Only VPI (ConnectX) ports switch link layer; other
				// devices are built for one.
				f.Remedy = fmt.Sprintf("%s runs %s and this device cannot switch its link layer (only NVIDIA VPI adapters can): "+
					"use a port of the other type, or correct diagnose.link_layers", t, ll)
			}
		}
		return []Finding{f}
	}), nil
}
