// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package netdev reads the network devices of RDMA ports into a typed
// snapshot: every IPoIB interface (mode, MTU, state, pkey children, whether
// connected mode exists at all) and every RoCE and iWARP interface (the GID types it
// carries), each mapped to its RDMA device and port, the RDMA character
// devices, and, from the running kernel, the ethtool driver information and
// selected statistics.
package netdev

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing; a missing value is never zero.
type Opt[T any] = sysattr.Opt[T]

func some[T any](v T) Opt[T] { return sysattr.Some(v) }

// ParseError is a file that was read but is not in the kernel's format.
type ParseError = sysattr.ParseError

// Kind is the link type of an RDMA netdev.
type Kind string

// Netdev kinds.
const (
	KindIPoIB Kind = "ipoib"
	KindRoCE  Kind = "roce"
	// KindIWARP is the Ethernet netdev of an iWARP port (node_type
	// "4: RNIC": Chelsio cxgb4, Intel i40iw/irdma in iWARP mode, siw).
	// iWARP runs RDMA over TCP: an Ethernet link layer does not make it
	// RoCE, it has no RoCE GIDs, and no RoCE lossless setting applies.
	KindIWARP Kind = "iwarp"
)

// PortKind is the kind of the netdevs of an RDMA port of node type
// nodeType and link layer linkLayer, and false for an InfiniBand port
// (its netdevs are IPoIB, found by type). Node type and link layer
// decide together: an RNIC is iWARP whatever its link layer reads (old
// kernels print "InfiniBand" for i40iw), and an Ethernet port of a CA is
// RoCE.
func PortKind(nodeType infiniband.Opt[infiniband.Enum], linkLayer string) (Kind, bool) {
	if nodeType.OK && nodeType.V.Value == infiniband.NodeTypeRNIC {
		return KindIWARP, true
	}
	if linkLayer == infiniband.LinkLayerEthernet {
		return KindRoCE, true
	}
	return "", false
}

// ARPHRD_INFINIBAND, the type of IPoIB interfaces.
const typeInfiniband = 32

// IFF_UP in a netdev's flags.
const iffUp = 0x1

// Netdev is one network device that carries RDMA traffic or IPoIB.
type Netdev struct {
	Name string
	Kind Kind
	// Device and Port are the RDMA device and port the netdev belongs to;
	// empty and 0 when it cannot be mapped (its device was excluded, or an
	// IPoIB interface without a PCI parent).
	Device string
	Port   int
	// PCIAddress is the PCI function of the netdev ("" for virtual ones:
	// a bond carrying a RoCE LAG).
	PCIAddress string
	IfIndex    Opt[uint64]
	MTU        Opt[uint64]
	OperState  Opt[string]
	Carrier    Opt[bool]
	// AdminUp is IFF_UP of flags: the interface was set up (ip link set
	// up). Down by the admin is a choice; up without carrier is a fault.
	AdminUp      Opt[bool]
	IPv6Disabled Opt[bool]
	// Carrier counts the kernel keeps since the netdev was registered
	// (carrier_changes, Linux 3.15+; carrier_up_count and
	// carrier_down_count, Linux 4.16+): a flap between two scrapes shows
	// here when the carrier file already reads up again. Absent where the
	// kernel has no such file.
	CarrierCounts CarrierCounts
	// IPoIB is set for IPoIB interfaces.
	IPoIB *IPoIB
	// GIDTypes counts the GID table entries naming this netdev, by type
	// (GIDRoCEv1, GIDRoCEv2); RoCE and iWARP only.
	GIDTypes map[string]int
	// Ethtool is what the running kernel reports; nil when not queried or
	// when the kernel has no such interface in this network namespace.
	Ethtool *EthtoolInfo

	// absent are the live files (liveFiles) that did not exist when Read
	// read the netdev: Refresh does not look for them again until the
	// next Read (the slow refresh). A kernel that lacks carrier_up_count
	// lacks it for good, and looking it up is a path walk that fails,
	// on every scrape, for every netdev.
	absent liveSet

	// Module is the transceiver memory of a RoCE or iWARP netdev's port
	// (Ethtool.ModuleEEPROM); nil when not asked. Read with the slow
	// netdev attributes (Read), kept by Refresh: each page read is a
	// firmware access.
	Module *ModuleEEPROM
}

// Ethernet reports a netdev of an Ethernet RDMA port (RoCE or iWARP):
// what ethtool's link state and the module memory describe.
func (n *Netdev) Ethernet() bool { return n.Kind == KindRoCE || n.Kind == KindIWARP }

// liveSet is a set of liveFiles, by index.
type liveSet uint8

// CarrierCounts are a netdev's carrier transition counters. The kernel
// derives carrier_changes as up + down, so each is kept as read rather
// than computed from the others.
type CarrierCounts struct {
	Changes Opt[uint64]
	Up      Opt[uint64]
	Down    Opt[uint64]
}

// IPoIB holds the IPoIB-only attributes.
type IPoIB struct {
	Mode Opt[string]
	// Pkey is the partition key as the pkey file prints it (0xffff, 0x8001).
	Pkey Opt[uint64]
	// Parent is the parent interface of a pkey child (ib0 for ib0.8001),
	// from its parent file; empty for a parent interface.
	Parent string
	// ConnectedModeSupported comes from the hardware address flags
	// (FlagRC).
	ConnectedModeSupported Opt[bool]
	// Enhanced is true for enhanced IPoIB: connected mode unsupported on an
	// mlx5 (ConnectX-4 or later) device. There datagram mode with an MTU of
	// the IB MTU minus 4 (4092 on a 4K fabric) is the correct setting.
	Enhanced Opt[bool]
}

// CharDevice is one /dev/infiniband character device of an RDMA device.
type CharDevice struct {
	Device string
	Path   string
}

// Snapshot is the RDMA netdevs of a host.
type Snapshot struct {
	Netdevs     []Netdev
	CharDevices []CharDevice
	// Errors are the read and parse errors met; each names its file.
	Errors []error
}

// Options control Read.
type Options struct {
	// Keep selects RDMA devices by name (nil: all). An excluded device's
	// files are never read; its IPoIB netdevs are still reported, unmapped.
	Keep func(device string) bool
	// Mapper answers PCI function and character device questions; nil uses
	// SysfsMapper on the host's sysfs.
	Mapper Mapper
	// Ethtool, if set, queries each netdev that the running kernel has
	// under the same name and ifindex.
	Ethtool *Ethtool
	// CharDevices reads the character device mapping.
	CharDevices bool
	// Class is the RDMA class already read (the host snapshot's): its
	// devices, ports, link layers and port netdevs. nil reads the class
	// directory's listings here.
	Class *infiniband.Class
	// Ifindexes is the kept socket of the ethtool query's ifindex
	// lookups; nil opens one for this read.
	Ifindexes *Ifindexes
}

type reader struct {
	host hostfs.Host
	errs []error
}

func (r *reader) fail(err error) { r.errs = append(r.errs, err) }

// text reads a sysfs attribute. A missing file is no error: attributes vary
// by kernel and driver. EINVAL is no error either: carrier and some GID
// entries fail that way when there is nothing to report.
func (r *reader) text(name string) (string, bool) {
	s, ok, _ := r.textOrMissing(name)
	return s, ok
}

// textOrMissing is text, and whether the file does not exist.
func (r *reader) textOrMissing(name string) (s string, ok, missing bool) {
	b, err := r.host.Sys.ReadFile(name)
	if err != nil {
		missing = errors.Is(err, fs.ErrNotExist)
		if !missing && !errors.Is(err, syscall.EINVAL) {
			r.fail(err)
		}
		return "", false, missing
	}
	return string(b), true, false
}

func parsed[T any](r *reader, name string, parse func(string) (T, error)) Opt[T] {
	s, ok := r.text(name)
	return sysattr.Parse(s, ok, parse, r.fail, func() string { return "/sys/" + name })
}

// liveParsed reads live file i (of liveFiles) of nd in dir. Refresh
// (refresh true) skips a file that Read found missing; Read (refresh
// false) records one it finds missing.
func liveParsed[T any](r *reader, nd *Netdev, dir string, i int, refresh bool, parse func(string) (T, error)) Opt[T] {
	bit := liveSet(1) << i
	if refresh && nd.absent&bit != 0 {
		return Opt[T]{}
	}
	name := dir + "/" + liveFiles[i]
	s, ok, missing := r.textOrMissing(name)
	if missing && !refresh {
		nd.absent |= bit
	}
	return sysattr.Parse(s, ok, parse, r.fail, func() string { return "/sys/" + name })
}

// port is an RDMA device port a netdev maps to.
type port struct {
	device string
	num    int
}

// Read takes the netdev snapshot. It returns an error only when ctx ends.
func Read(ctx context.Context, host hostfs.Host, opts Options) (*Snapshot, error) {
	r := &reader{host: host}
	if opts.Mapper == nil {
		opts.Mapper = SysfsMapper{Sys: host.Sys}
	}
	keep := opts.Keep
	if keep == nil {
		keep = func(string) bool { return true }
	}
	s := &Snapshot{}

	// The link layer of every kept port, and the RoCE netdevs from the GID
	// tables.
	linkLayer := map[port]string{}
	roce := map[string]port{}
	kinds := map[string]Kind{}
	gidTypes := map[string]map[string]int{}
	var roceOrder []string
	devices, ports := r.ports(ctx, opts.Class, keep)
	for _, p := range ports {
		linkLayer[port{p.dev, p.num}] = p.linkLayer
		kind, eth := PortKind(p.nodeType, p.linkLayer)
		if !eth {
			continue
		}
		if kind == KindIWARP {
			// The IPoIB mapping must not take an iWARP port for an
			// InfiniBand one (i40iw on old kernels reads "InfiniBand").
			linkLayer[port{p.dev, p.num}] = infiniband.LinkLayerEthernet
		}
		dir := infiniband.ClassDir + "/" + p.dev + "/ports/" + strconv.Itoa(p.num)
		names := r.gids(dir, gidTypes)
		if len(names) == 0 && p.netdev != "" {
			// No GID names a netdev (a kernel without gid_attrs, or an
			// unreadable table): the PCI function's netdev of this port.
			names = []string{p.netdev}
		}
		for _, name := range names {
			if _, dup := roce[name]; !dup {
				roce[name] = port{p.dev, p.num}
				kinds[name] = kind
				roceOrder = append(roceOrder, name)
			}
		}
	}

	// Every IPoIB interface (type 32) in the net class, mapped through its
	// PCI function and dev_port.
	nets, err := host.Sys.ReadDir("class/net")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.fail(err)
	}
	for _, e := range nets {
		if ctx.Err() != nil {
			break
		}
		name := e.Name()
		if p, ok := roce[name]; ok {
			nd := r.netdev(name, kinds[name])
			nd.Device, nd.Port = p.device, p.num
			nd.GIDTypes = gidTypes[name]
			s.Netdevs = append(s.Netdevs, nd)
			delete(roce, name)
			continue
		}
		t := parsed(r, "class/net/"+name+"/type", infiniband.ParseUint)
		if !t.OK || t.V != typeInfiniband {
			continue
		}
		nd := r.netdev(name, KindIPoIB)
		r.mapIPoIB(&nd, opts.Mapper, keep, linkLayer)
		s.Netdevs = append(s.Netdevs, nd)
	}
	// GID entries naming a netdev the net class does not show (a netdev in
	// another network namespace): still a RoCE netdev of the port.
	for _, name := range roceOrder {
		if p, ok := roce[name]; ok {
			s.Netdevs = append(s.Netdevs, Netdev{Name: name, Kind: kinds[name], Device: p.device, Port: p.num, GIDTypes: gidTypes[name]})
		}
	}
	sort.Slice(s.Netdevs, func(i, j int) bool { return s.Netdevs[i].Name < s.Netdevs[j].Name })

	for i := range s.Netdevs {
		nd := &s.Netdevs[i]
		if nd.Kind != KindIPoIB || nd.IPoIB == nil {
			continue
		}
		// Enhanced IPoIB: no connected mode on an mlx5 function.
		if cm := nd.IPoIB.ConnectedModeSupported; cm.OK {
			if mlx5, known := r.isMlx5(nd); known {
				nd.IPoIB.Enhanced = some(!cm.V && mlx5)
			}
		}
	}

	r.ethtoolAll(ctx, s, opts.Ethtool, opts.Ifindexes, true)

	if opts.CharDevices {
		charDevices := opts.Mapper.CharDevices
		if m, ok := opts.Mapper.(SysfsMapper); ok {
			idx := m.charIndex()
			charDevices = func(dev string) []string { return idx[dev] }
		}
		for _, dev := range devices {
			for _, p := range charDevices(dev) {
				s.CharDevices = append(s.CharDevices, CharDevice{Device: dev, Path: p})
			}
		}
	}
	s.Errors = r.errs
	return s, ctx.Err()
}

// gids reads a RoCE port's GID table attributes and returns the netdevs it
// names, counting each entry's type per netdev. Empty entries fail with
// EINVAL and are skipped.
func (r *reader) gids(dir string, types map[string]map[string]int) []string {
	entries, err := r.host.Sys.ReadDir(dir + "/gid_attrs/ndevs")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.fail(err)
		}
		return nil
	}
	var names []string
	for _, e := range entries {
		nd, ok := r.text(dir + "/gid_attrs/ndevs/" + e.Name())
		nd = strings.TrimSpace(nd)
		if !ok || nd == "" {
			continue
		}
		if types[nd] == nil {
			types[nd] = map[string]int{}
			names = append(names, nd)
		}
		if t := parsed(r, dir+"/gid_attrs/types/"+e.Name(), ParseGIDType); t.OK {
			types[nd][t.V]++
		}
	}
	return names
}

// classPort is an RDMA port as the netdev mapping needs it.
type classPort struct {
	dev       string
	num       int
	linkLayer string
	nodeType  infiniband.Opt[infiniband.Enum]
	// netdev is the port's netdev by GID 0 or its PCI function's
	// dev_port (infiniband.Port.Netdev).
	netdev string
}

// ports lists the kept RDMA devices and their ports: from class when the
// snapshot read it, else from the class directory.
func (r *reader) ports(ctx context.Context, class *infiniband.Class, keep func(string) bool) ([]string, []classPort) {
	if class == nil {
		c, err := infiniband.Read(ctx, r.host.Sys, keep)
		if err != nil && !errors.Is(err, infiniband.ErrNoClass) && c == nil {
			r.fail(err)
		}
		class = c
	}
	if class == nil {
		return nil, nil
	}
	var devs []string
	var out []classPort
	for i := range class.Devices {
		d := &class.Devices[i]
		if !keep(d.Name) {
			continue
		}
		devs = append(devs, d.Name)
		for j := range d.Ports {
			p := &d.Ports[j]
			ll := infiniband.LinkLayerInfiniBand
			if !p.IsInfiniBand() {
				ll = p.LinkLayer.V
			}
			out = append(out, classPort{dev: d.Name, num: p.Num, linkLayer: ll, nodeType: d.NodeType, netdev: p.Netdev})
		}
	}
	return devs, out
}

// ethtoolAll queries every netdev of s the running kernel has; module
// also reads the module memories the query asks for.
func (r *reader) ethtoolAll(ctx context.Context, s *Snapshot, et *Ethtool, ix *Ifindexes, module bool) {
	if et == nil || len(s.Netdevs) == 0 {
		return
	}
	// One ioctl per netdev on one socket, not a netlink dump of every
	// interface the kernel has.
	kernel, release, err := ix.Lookup()
	defer release()
	if err != nil {
		r.fail(fmt.Errorf("ethtool: a socket to look up netdevs: %w", err))
		return
	}
	for i := range s.Netdevs {
		if ctx.Err() != nil {
			break
		}
		r.ethtool(&s.Netdevs[i], et, kernel, module)
	}
}

// liveFiles are the attributes of a netdev that change between scrapes;
// the rest (which netdevs carry RDMA, their kind, port, PCI function, GID
// types, IPoIB mode and pkey) changes only when the admin reconfigures.
var liveFiles = [...]string{"operstate", "carrier", "flags", "mtu", "carrier_changes", "carrier_up_count", "carrier_down_count"}

// Indexes into liveFiles.
const (
	liveOperState = iota
	liveCarrier
	liveFlags
	liveMTU
	liveCarrierChanges
	liveCarrierUp
	liveCarrierDown
)

// readLive reads the live attributes of nd (Read: refresh false; Refresh:
// true, skipping the files Read found missing).
func (r *reader) readLive(nd *Netdev, refresh bool) {
	dir := "class/net/" + nd.Name
	nd.MTU = liveParsed(r, nd, dir, liveMTU, refresh, infiniband.ParseUint)
	nd.OperState = liveParsed(r, nd, dir, liveOperState, refresh, ParseOperState)
	nd.Carrier = liveParsed(r, nd, dir, liveCarrier, refresh, ParseBool01)
	// The kernel lacks a carrier counter file before 4.16 (only
	// carrier_changes exists): absent, no error.
	nd.CarrierCounts = CarrierCounts{
		Changes: liveParsed(r, nd, dir, liveCarrierChanges, refresh, infiniband.ParseUint),
		Up:      liveParsed(r, nd, dir, liveCarrierUp, refresh, infiniband.ParseUint),
		Down:    liveParsed(r, nd, dir, liveCarrierDown, refresh, infiniband.ParseUint),
	}
	nd.AdminUp = Opt[bool]{}
	if f := liveParsed(r, nd, dir, liveFlags, refresh, infiniband.ParseHex); f.OK {
		nd.AdminUp = some(f.V&iffUp != 0)
	}
}

// Refresh re-reads the live part of a snapshot: each netdev's operstate,
// carrier, carrier counts, flags and MTU, and the ethtool query (statistics are
// counters). base, read by Read a while ago, is not changed; the result
// shares its other attributes, the module memories among them. Its errors
// are base's other errors and the live reads'.
func Refresh(ctx context.Context, host hostfs.Host, base *Snapshot, et *Ethtool, ix *Ifindexes) (*Snapshot, error) {
	r := &reader{host: host}
	for _, err := range base.Errors {
		if !slices.Contains(liveFiles[:], path.Base(sysattr.ErrorPath(err))) {
			r.fail(err)
		}
	}
	s := &Snapshot{Netdevs: slices.Clone(base.Netdevs), CharDevices: base.CharDevices}
	for i := range s.Netdevs {
		nd := &s.Netdevs[i]
		r.readLive(nd, true)
		nd.Ethtool = nil
	}
	r.ethtoolAll(ctx, s, et, ix, false)
	s.Errors = r.errs
	return s, ctx.Err()
}

// netdev reads the attributes every kind shares, and the IPoIB ones.
func (r *reader) netdev(name string, kind Kind) Netdev {
	dir := "class/net/" + name
	nd := Netdev{Name: name, Kind: kind}
	if link, err := r.host.Sys.ReadLink(dir + "/device"); err == nil {
		nd.PCIAddress = path.Base(link)
	}
	nd.IfIndex = parsed(r, dir+"/ifindex", infiniband.ParseUint)
	r.readLive(&nd, false)
	// /proc/sys/net/ipv6/conf/<if> is missing when IPv6 is disabled for
	// the whole kernel (ipv6.disable=1); then the value is unknown here.
	if b, err := r.host.Proc.ReadFile("sys/net/ipv6/conf/" + name + "/disable_ipv6"); err == nil {
		if v, err := ParseBool01(string(b)); err == nil {
			nd.IPv6Disabled = some(v)
		} else {
			r.fail(&ParseError{Path: "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6", Err: err})
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		r.fail(err)
	}
	if kind != KindIPoIB {
		return nd
	}
	ib := &IPoIB{
		Mode: parsed(r, dir+"/mode", ParseMode),
		Pkey: parsed(r, dir+"/pkey", infiniband.ParseHex),
	}
	if p, ok := r.text(dir + "/parent"); ok {
		ib.Parent = strings.TrimSpace(p)
	}
	if a := parsed(r, dir+"/address", ParseIPoIBAddress); a.OK {
		ib.ConnectedModeSupported = some(a.V.ConnectedModeSupported())
	}
	nd.IPoIB = ib
	return nd
}

// mapIPoIB finds the RDMA device and port of an IPoIB netdev: an RDMA
// device on its PCI function whose port dev_port+1 (dev_id on kernels
// before dev_port) is an InfiniBand port.
func (r *reader) mapIPoIB(nd *Netdev, m Mapper, keep func(string) bool, linkLayer map[port]string) {
	if nd.PCIAddress == "" {
		return
	}
	dir := "class/net/" + nd.Name
	idx := parsed(r, dir+"/dev_port", infiniband.ParseDevPort)
	if !idx.OK {
		idx = parsed(r, dir+"/dev_id", infiniband.ParseDevPort)
	}
	if !idx.OK {
		return
	}
	for _, dev := range m.DevicesForPCI(nd.PCIAddress) {
		if !keep(dev) {
			continue
		}
		p := port{dev, idx.V + 1}
		if ll, ok := linkLayer[p]; ok && ll != "Ethernet" {
			nd.Device, nd.Port = p.device, p.num
			return
		}
	}
}

// isMlx5 reports whether the netdev's RDMA device is driven by mlx5: the
// PCI function's driver link says so, else the device name does (the
// kernel names mlx5 devices mlx5_<n> unless udev renames them). known is
// false when neither is there.
func (r *reader) isMlx5(nd *Netdev) (mlx5, known bool) {
	if nd.PCIAddress != "" {
		if link, err := r.host.Sys.ReadLink("bus/pci/devices/" + nd.PCIAddress + "/driver"); err == nil {
			return path.Base(link) == "mlx5_core", true
		}
	}
	if nd.Device == "" {
		return false, false
	}
	return strings.HasPrefix(nd.Device, "mlx5_"), true
}

// ethtool queries the running kernel when it has this netdev: same name
// and the same ifindex as the sysfs tree says. A fixture tree, or a pod
// without the host network, names interfaces the kernel here does not
// have (or has as something else); those are skipped, not errors.
//
// module reads the module memory too, when the query asks for it, of a
// RoCE or iWARP netdev mapped to a kept RDMA port (an IPoIB port's module belongs
// to the InfiniBand port, and an unmapped netdev to a device the filter
// may exclude).
func (r *reader) ethtool(nd *Netdev, e *Ethtool, kernel *KernelIfindex, module bool) {
	idx, ok := kernel.Index(nd.Name)
	if !nd.IfIndex.OK || !ok || uint64(idx) != nd.IfIndex.V {
		return
	}
	info, err := e.Query(nd.Name)
	if err != nil {
		r.fail(err)
	}
	nd.Ethtool = info
	if module && e.ModuleEEPROM && nd.Ethernet() && nd.Device != "" {
		me, err := readModule(nd.Name)
		if err != nil {
			r.fail(err)
		}
		nd.Module = me
	}
}
