// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
)

// IPv6DropIn persists the IPv6 setting of the IPoIB netdevs.
const IPv6DropIn = "etc/sysctl.d/90-rdma-doctor-ipoib-ipv6.conf"

func ipoibNetdevs(in *Input) []netdev.Netdev {
	nd, _ := in.Snap.Host.Netdevs()
	if nd == nil {
		return nil
	}
	var out []netdev.Netdev
	for _, n := range nd.Netdevs {
		if n.IPoIB != nil {
			out = append(out, n)
		}
	}
	return out
}

// ipoibAction sets the IPoIB mode the policy asks for and the MTU that
// goes with it: connected and 65520 only where the hardware address says
// connected mode is supported, datagram and 4092 on enhanced IPoIB (2044
// kept: right on a 2K fabric). Mode first, then MTU. Runtime only; the
// plan names the NetworkManager setting that persists it.
type ipoibAction struct{}

func (ipoibAction) ID() string       { return "ipoib-mode" }
func (ipoibAction) Checks() []string { return []string{"ipoib.mode", "ipoib.mtu"} }

func (a ipoibAction) Plan(in *Input) ([]Change, []string, error) {
	devs := ipoibNetdevs(in)
	if len(devs) == 0 {
		return nil, []string{"nothing to do: no IPoIB netdev"}, nil
	}
	policy := string(in.Config.Diagnose.Policies.IPoIBMode)
	if policy == "" {
		policy = "auto"
	}
	var out []Change
	var notes []string
	for _, n := range devs {
		ib := n.IPoIB
		if !ib.Mode.OK || !n.MTU.OK {
			notes = append(notes, n.Name+": mode or mtu unreadable; not changed")
			continue
		}
		mode := ib.Mode.V
		enhanced := ib.Enhanced.OK && ib.Enhanced.V
		cmSupported := ib.ConnectedModeSupported.OK && ib.ConnectedModeSupported.V
		want := mode
		switch {
		case enhanced:
			want = "datagram"
		case policy == "connected":
			if cmSupported {
				want = "connected"
			} else if mode != "connected" {
				notes = append(notes, n.Name+": connected mode is not known to be supported (hardware address flags); left in "+mode)
			}
		case policy == "datagram":
			want = "datagram"
		}
		mtu := uint64(4092)
		if want == "connected" {
			mtu = 65520
		} else if n.MTU.V == 2044 {
			mtu = 2044
		}
		dir := "class/net/" + n.Name + "/"
		if want != mode {
			out = append(out, Change{Action: a.ID(), Check: "ipoib.mode", Target: n.Name + " mode", Area: AreaSys, Path: dir + "mode",
				Current: mode + "\n", Exists: true, Desired: want + "\n", InPlace: true})
		}
		if n.MTU.V != mtu {
			out = append(out, Change{Action: a.ID(), Check: "ipoib.mtu", Target: n.Name + " mtu", Area: AreaSys, Path: dir + "mtu",
				Current: strconv.FormatUint(n.MTU.V, 10) + "\n", Exists: true, Desired: strconv.FormatUint(mtu, 10) + "\n", InPlace: true})
		}
	}
	if len(out) > 0 {
		notes = append(notes, "runtime only, a brief IPoIB outage; persist with nmcli connection modify <profile> infiniband.transport-mode <mode> infiniband.mtu <mtu> "+
			"(or CONNECTED_MODE/MTU in ifcfg); every host of the subnet should agree")
	} else if len(notes) == 0 {
		notes = append(notes, "nothing to do: every IPoIB netdev has the mode and MTU the policy asks for (diagnose.policies.ipoib_mode "+policy+")")
	}
	return out, notes, nil
}

// ipv6Action turns IPv6 on or off on the IPoIB netdevs only when
// diagnose.policies.ipoib_ipv6 asks for it (default any: nothing).
type ipv6Action struct{}

func (ipv6Action) ID() string       { return "ipoib-ipv6" }
func (ipv6Action) Checks() []string { return []string{"ipoib.ipv6"} }

func (a ipv6Action) Plan(in *Input) ([]Change, []string, error) {
	policy := string(in.Config.Diagnose.Policies.IPoIBIPv6)
	if policy == "" || policy == "any" {
		return nil, []string{"nothing to do: diagnose.policies.ipoib_ipv6 is any (no upstream requirement either way)"}, nil
	}
	devs := ipoibNetdevs(in)
	if len(devs) == 0 {
		return nil, []string{"nothing to do: no IPoIB netdev"}, nil
	}
	val := "0"
	if policy == "disabled" {
		val = "1"
	}
	var out []Change
	var notes []string
	keys := map[string]string{}
	for _, n := range devs {
		if !n.IPv6Disabled.OK {
			notes = append(notes, n.Name+": disable_ipv6 unreadable (IPv6 not built in?); not changed")
			continue
		}
		keys["net.ipv6.conf."+n.Name+".disable_ipv6"] = val
		cur := "0"
		if n.IPv6Disabled.V {
			cur = "1"
		}
		if cur != val {
			out = append(out, Change{Action: a.ID(), Check: "ipoib.ipv6", Target: n.Name + " disable_ipv6", Area: AreaProc,
				Path: "sys/net/ipv6/conf/" + n.Name + "/disable_ipv6", Current: cur + "\n", Exists: true, Desired: val + "\n", InPlace: true})
		}
	}
	if len(keys) > 0 {
		cur, exists, err := readOptional(in.W, AreaRoot, IPv6DropIn)
		if err != nil {
			return nil, nil, err
		}
		if c := dropInChange(a.ID(), "ipoib.ipv6", IPv6DropIn, cur, exists, sysctlConf(keys)); c != nil {
			// The persistent change goes first: runtime changes follow it.
			out = append([]Change{*c}, out...)
		}
	}
	if len(out) == 0 && len(notes) == 0 {
		notes = append(notes, "nothing to do: IPv6 is "+policy+" on every IPoIB netdev")
	}
	return out, notes, nil
}
