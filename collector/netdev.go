// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/roce"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type netdevCollector struct {
	info, mtu, up, carrier, ipv6Disabled                         *expo.Desc
	ipoibInfo, connected, connectedSupported, enhanced, roceGIDs *expo.Desc
	ethtoolInfo, speed, ethtoolStat, prioStat, charDevice        *expo.Desc
	link, extState, downEvents, fecCorrected, fecUncorrectable   *expo.Desc
	carrierChanges, carrierUp, carrierDown                       *expo.Desc
	mod                                                          moduleDescs
}

func netdevSpec() Spec {
	return Spec{Name: "netdev", Default: true,
		Help: "IPoIB and RoCE netdevs of RDMA ports from /sys/class/net (mode, MTU, state, pkey children, GID types), RDMA character devices, and ethtool driver information and statistics",
		Flags: func(app *kingpin.Application, f *Flags) {
			o := &f.Netdev
			app.Flag("collector.netdev.ethtool",
				"Query each RDMA netdev with the ethtool ioctl (driver, firmware, speed, statistics). Only netdevs the running kernel has under the same name and ifindex as the sysfs tree are queried.").
				Default("true").BoolVar(&o.Ethtool)
			app.Flag("collector.netdev.ethtool-stats",
				"Anchored regexp of the ethtool statistics exported as rdma_netdev_ethtool_stat_total (default: mlx5 physical-layer errors, discards, pause and FEC counters). Empty exports none.").
				Default(netdev.DefaultStats).StringVar(&o.EthtoolStats)
			app.Flag("collector.netdev.module-eeprom",
				"Read each RoCE netdev's transceiver memory (ethtool netlink MODULE_EEPROM_GET, Linux 5.13+; SFF-8472, SFF-8636, CMIS) for rdma_netdev_module_*: temperature, voltage, per-lane Rx power, Tx bias and Tx power. Off by default: each page is a firmware access, and the kernel allows it only with CAP_NET_ADMIN. Read on the slow interval, only for netdevs of RDMA ports the device filter keeps, and only with --collector.netdev.ethtool.").
				BoolVar(&o.ModuleEEPROM)
		},
		New: func(env Env, _ *Flags) (Collector, error) { return NewNetdevCollector(env), nil }}
}

// NetdevOptions are the netdev collector's flags: the ethtool query the
// host runs for it.
type NetdevOptions struct {
	// Ethtool queries each RDMA netdev with the ethtool ioctl; EthtoolStats
	// selects the statistics exported.
	Ethtool      bool
	EthtoolStats string
	// ModuleEEPROM reads each RoCE netdev's transceiver memory (needs
	// Ethtool and CAP_NET_ADMIN).
	ModuleEEPROM bool
}

// EthtoolQuery is the ethtool query the flags ask for; nil for none.
func (o NetdevOptions) EthtoolQuery() (*netdev.Ethtool, error) {
	if !o.Ethtool {
		if o.ModuleEEPROM {
			// The module memory is read through the ethtool query: asked
			// for without it, it would silently be nothing.
			return nil, errors.New("--collector.netdev.module-eeprom needs --collector.netdev.ethtool (on by default; --no-collector.netdev.ethtool turns it off)")
		}
		return nil, nil
	}
	var stats *regexp.Regexp
	if o.EthtoolStats != "" {
		var err error
		if stats, err = host.CompileAnchored("--collector.netdev.ethtool-stats", o.EthtoolStats); err != nil {
			return nil, err
		}
	}
	return &netdev.Ethtool{Stats: stats, ModuleEEPROM: o.ModuleEEPROM}, nil
}

// NewNetdevCollector builds the netdev collector; the ethtool query and
// the device filter are the host's options.
func NewNetdevCollector(Env) Collector {
	c := &netdevCollector{
		info:               desc("rdma_netdev_info", "A netdev carrying IPoIB, RoCE or iWARP and the RDMA device and port it belongs to; always 1.", "netdev", "kind", "device", "port", "pci_address"),
		mtu:                desc("rdma_netdev_mtu_bytes", "Netdev MTU.", "netdev"),
		up:                 desc("rdma_netdev_up", "1 when the netdev's operstate is up.", "netdev"),
		carrier:            desc("rdma_netdev_carrier", "Netdev carrier (1 link detected); absent while the interface is down.", "netdev"),
		carrierChanges:     desc("rdma_netdev_carrier_changes_total", "Carrier transitions (up or down) the kernel counted since the netdev was registered.", "netdev"),
		carrierUp:          desc("rdma_netdev_carrier_up_total", "Carrier up transitions since the netdev was registered (carrier_up_count, Linux 4.16+); absent on older kernels.", "netdev"),
		carrierDown:        desc("rdma_netdev_carrier_down_total", "Carrier down transitions since the netdev was registered (carrier_down_count, Linux 4.16+); absent on older kernels.", "netdev"),
		ipv6Disabled:       desc("rdma_netdev_ipv6_disabled", "1 when IPv6 is disabled on the netdev (net.ipv6.conf.<if>.disable_ipv6); a site policy, not a requirement.", "netdev"),
		ipoibInfo:          desc("rdma_netdev_ipoib_info", "IPoIB interface attributes: partition key, and the parent of a pkey child interface (empty for a parent); always 1.", "netdev", "pkey", "parent"),
		connected:          desc("rdma_netdev_ipoib_connected_mode", "1 when the IPoIB interface runs connected mode, 0 datagram.", "netdev"),
		connectedSupported: desc("rdma_netdev_ipoib_connected_mode_supported", "1 when the IPoIB interface can run connected mode (IPOIB_FLAGS_RC in its hardware address); 0 on enhanced IPoIB.", "netdev"),
		enhanced:           desc("rdma_netdev_ipoib_enhanced", "1 on enhanced IPoIB (mlx5, ConnectX-4 or later), where connected mode does not exist.", "netdev"),
		roceGIDs:           desc("rdma_netdev_roce_gids", "GID table entries of the RDMA port naming this netdev, by GID type (RoCE v1, RoCE v2).", "netdev", "device", "port", "gid_type"),
		ethtoolInfo:        desc("rdma_netdev_ethtool_info", "Driver information from the ethtool ioctl; always 1.", "netdev", "driver", "driver_version", "firmware_version", "bus_info"),
		speed:              desc("rdma_netdev_speed_bytes_per_second", "Link speed from the ethtool ioctl; absent when the driver does not know it.", "netdev"),
		ethtoolStat:        desc("rdma_netdev_ethtool_stat_total", "An ethtool statistic selected by --collector.netdev.ethtool-stats.", "netdev", "stat"),
		link:               desc("rdma_netdev_link_detected", "Link detected as ethtool netlink reports it (LINKSTATE_GET): 1 up, 0 down; absent when the driver cannot tell.", "netdev"),
		extState:           desc("rdma_netdev_link_ext_state", "Why the link is down as the driver reports it (ethtool link extended state and substate); always 1.", "netdev", "state", "substate"),
		downEvents:         desc("rdma_netdev_link_down_events_total", "Link-down events the driver counted since it loaded (ethtool netlink EXT_DOWN_CNT, Linux 6.8+).", "netdev"),
		fecCorrected:       desc("rdma_netdev_fec_corrected_blocks_total", "FEC blocks corrected (ethtool netlink FEC statistics); absent where the driver has none.", "netdev"),
		fecUncorrectable:   desc("rdma_netdev_fec_uncorrectable_blocks_total", "FEC blocks that could not be corrected: frames lost on the wire.", "netdev"),
		prioStat:           desc("rdma_netdev_priority_stat_total", "A per-priority ethtool statistic selected by --collector.netdev.ethtool-stats, by direction and priority.", "netdev", "direction", "priority", "stat"),
		mod:                newModuleDescs(),
		charDevice:         desc("rdma_device_char_device_info", "A /dev/infiniband character device of an RDMA device (uverbs, umad, issm); always 1.", "device", "path"),
	}
	return c
}

func (c *netdevCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	s, err := snap.Netdevs(ctx)
	if s == nil {
		return err
	}
	for i := range s.Netdevs {
		c.netdev(out, &s.Netdevs[i])
	}
	for _, cd := range s.CharDevices {
		gauge(out, c.charDevice, 1, cd.Device, cd.Path)
	}
	return errors.Join(append(s.Errors, err)...)
}

func (c *netdevCollector) netdev(out *sink, n *netdev.Netdev) {
	port := ""
	if n.Port > 0 {
		port = strconv.Itoa(n.Port)
	}
	gauge(out, c.info, 1, n.Name, string(n.Kind), n.Device, port, n.PCIAddress)
	optGauge(out, c.mtu, n.MTU, n.Name)
	if n.OperState.OK {
		gauge(out, c.up, b2f(n.OperState.V == "up"), n.Name)
	}
	optBool(out, c.carrier, n.Carrier, n.Name)
	optCounter(out, c.carrierChanges, n.CarrierCounts.Changes, n.Name)
	optCounter(out, c.carrierUp, n.CarrierCounts.Up, n.Name)
	optCounter(out, c.carrierDown, n.CarrierCounts.Down, n.Name)
	optBool(out, c.ipv6Disabled, n.IPv6Disabled, n.Name)
	if ib := n.IPoIB; ib != nil {
		pkey := ""
		if ib.Pkey.OK {
			pkey = fmt.Sprintf("0x%04x", ib.Pkey.V)
		}
		gauge(out, c.ipoibInfo, 1, n.Name, pkey, ib.Parent)
		if ib.Mode.OK {
			gauge(out, c.connected, b2f(ib.Mode.V == netdev.ModeConnected), n.Name)
		}
		optBool(out, c.connectedSupported, ib.ConnectedModeSupported, n.Name)
		optBool(out, c.enhanced, ib.Enhanced, n.Name)
	}
	for _, t := range []string{netdev.GIDRoCEv1, netdev.GIDRoCEv2} {
		if n.GIDTypes != nil {
			gauge(out, c.roceGIDs, float64(n.GIDTypes[t]), n.Name, n.Device, port, t)
		}
	}
	c.mod.module(out, n.Name, n.Module)
	if e := n.Ethtool; e != nil {
		gauge(out, c.ethtoolInfo, 1, n.Name, e.Driver, e.DriverVersion, e.FirmwareVersion, e.BusInfo)
		if e.SpeedMbps.OK {
			gauge(out, c.speed, float64(e.SpeedMbps.V)*1e6/8, n.Name)
		}
		for _, st := range e.Stats {
			// A name that encodes direction and priority gets them as
			// labels, so one query sums a priority or compares them.
			if dir, prio, rest, ok := roce.PrioStat(st.Name); ok {
				counter(out, c.prioStat, float64(st.Value), n.Name, dir, strconv.Itoa(prio), rest)
				continue
			}
			counter(out, c.ethtoolStat, float64(st.Value), n.Name, st.Name)
		}
		if l := e.Link; l != nil {
			optBool(out, c.link, l.Link, n.Name)
			if l.ExtState.OK {
				gauge(out, c.extState, 1, n.Name, l.ExtState.V.String(), netdev.SubstateName(l.ExtState.V, l.ExtSubstate.V))
			}
			if l.DownEvents.OK {
				counter(out, c.downEvents, float64(l.DownEvents.V), n.Name)
			}
		}
		if f := e.FEC; f != nil {
			if f.CorrectedBlocks.OK {
				counter(out, c.fecCorrected, float64(f.CorrectedBlocks.V), n.Name)
			}
			if f.UncorrectableBlocks.OK {
				counter(out, c.fecUncorrectable, float64(f.UncorrectableBlocks.V), n.Name)
			}
		}
	}
}

func optCounter(out *sink, d *expo.Desc, o netdev.Opt[uint64], labels ...string) {
	if o.OK {
		counter(out, d, float64(o.V), labels...)
	}
}

func optBool(out *sink, d *expo.Desc, o netdev.Opt[bool], labels ...string) {
	if o.OK {
		gauge(out, d, b2f(o.V), labels...)
	}
}
