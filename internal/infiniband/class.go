// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package infiniband reads /sys/class/infiniband into a typed snapshot. It
// holds the one parser for each attribute format (rate, "N: NAME" enums,
// GUIDs, counters), shared by the collectors, the checks and the actions.
package infiniband

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/sysattr"
)

// ClassDir is the class directory below the sysfs root.
const ClassDir = "class/infiniband"

// Opt is a value that may be missing: a file that does not exist on this
// driver or could not be read or parsed. A missing value is never zero.
type Opt[T any] = sysattr.Opt[T]

func some[T any](v T) Opt[T] { return sysattr.Some(v) }

// Counter is one counter file and its raw value, in the file's own unit.
type Counter struct {
	Name  string
	Value uint64
}

// Device is one RDMA device (/sys/class/infiniband/<name>).
type Device struct {
	Name string
	// PCIAddress is the PCI function the device sits on ("0000:5e:00.0"),
	// from the device symlink; empty for software devices.
	PCIAddress   string
	NodeType     Opt[Enum]
	NodeGUID     Opt[string]
	SysImageGUID Opt[string]
	FirmwareVer  Opt[string]
	HCAType      Opt[string]
	BoardID      Opt[string]
	HWRev        Opt[string]
	NodeDesc     Opt[string]
	HWCounters   []Counter
	Ports        []Port
	// Errors are the read and parse errors met while reading this device.
	// Each names the file.
	Errors []error
}

// Port is one port (ports/<n>).
type Port struct {
	Num          int
	State        Opt[Enum]
	PhysState    Opt[Enum]
	Rate         Opt[Rate]
	LID          Opt[uint64]
	SMLID        Opt[uint64]
	SMSL         Opt[uint64]
	LIDMaskCount Opt[uint64]
	CapMask      Opt[uint64]
	LinkLayer    Opt[string]
	// Netdev is the network device of this port: the RoCE GID 0 netdev, or
	// the netdev of the PCI function whose dev_port matches (IPoIB).
	Netdev     string
	Counters   []Counter
	HWCounters []Counter
}

// Extended reports whether the port has the IETF extended PMA counters
// (64-bit data and packet counters).
func (p *Port) Extended() bool {
	for _, c := range p.Counters {
		if strings.HasPrefix(c.Name, "unicast_") {
			return true
		}
	}
	return false
}

// Class is a snapshot of /sys/class/infiniband.
type Class struct {
	Devices []Device
}

// Errors returns every error met while reading the class, device by device.
func (c *Class) Errors() []error {
	var errs []error
	for i := range c.Devices {
		errs = append(errs, c.Devices[i].Errors...)
	}
	return errs
}

// ErrNoClass means the host has no /sys/class/infiniband: no RDMA core loaded.
var ErrNoClass = errors.New("no " + ClassDir + " directory: RDMA core not loaded")

// Read reads every device that keep accepts, concurrently, one goroutine per
// device. A device that keep rejects is never read at all: on some hosts
// reading restricted functions floods the kernel log.
func Read(ctx context.Context, sys hostfs.FS, keep func(name string) bool) (*Class, error) {
	entries, err := sys.ReadDir(ClassDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNoClass
		}
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if keep == nil || keep(e.Name()) {
			names = append(names, e.Name())
		}
	}
	class := &Class{Devices: make([]Device, len(names))}
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := reader{sysattr.Dir{FS: sys, Path: ClassDir + "/" + name}}
			class.Devices[i] = r.device(ctx, name)
		}()
	}
	wg.Wait()
	return class, ctx.Err()
}

// reader reads one device; it is used by a single goroutine.
type reader struct{ sysattr.Dir }

func nonEmpty(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty file")
	}
	return s, nil
}

func verbatim(s string) (string, error) { return s, nil }

// ParseError is a file that was read but whose content is not in the
// kernel's format.
type ParseError = sysattr.ParseError

func (r *reader) device(ctx context.Context, name string) Device {
	d := Device{Name: name}
	if link, err := r.FS.ReadLink(r.Path + "/device"); err == nil {
		d.PCIAddress = path.Base(link)
	}
	d.NodeType = sysattr.Get(&r.Dir, "node_type", true, ParseEnum)
	d.NodeGUID = sysattr.Get(&r.Dir, "node_guid", true, ParseGUID)
	d.SysImageGUID = sysattr.Get(&r.Dir, "sys_image_guid", true, ParseGUID)
	d.FirmwareVer = sysattr.Get(&r.Dir, "fw_ver", false, nonEmpty)
	d.HCAType = sysattr.Get(&r.Dir, "hca_type", false, nonEmpty)
	d.BoardID = sysattr.Get(&r.Dir, "board_id", false, nonEmpty)
	d.HWRev = sysattr.Get(&r.Dir, "hw_rev", false, nonEmpty)
	d.NodeDesc = sysattr.Get(&r.Dir, "node_desc", false, verbatim)
	d.HWCounters = r.counters("hw_counters", false)

	netdevs := r.netdevs()
	ports, err := r.FS.ReadDir(r.Path + "/ports")
	if err != nil {
		r.Fail(err)
	}
	for _, e := range ports {
		if ctx.Err() != nil {
			break
		}
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		d.Ports = append(d.Ports, r.port(n, netdevs))
	}
	sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Num < d.Ports[j].Num })
	d.Errors = r.Errs
	return d
}

func (r *reader) port(n int, netdevs map[int]string) Port {
	p := Port{Num: n}
	dir := r.Path
	r.Path = dir + "/ports/" + strconv.Itoa(n)
	defer func() { r.Path = dir }()

	p.State = sysattr.Get(&r.Dir, "state", true, ParseEnum)
	p.PhysState = sysattr.Get(&r.Dir, "phys_state", true, ParseEnum)
	p.Rate = sysattr.Get(&r.Dir, "rate", true, ParseRate)
	p.LID = sysattr.Get(&r.Dir, "lid", false, ParseHex)
	p.SMLID = sysattr.Get(&r.Dir, "sm_lid", false, ParseHex)
	p.SMSL = sysattr.Get(&r.Dir, "sm_sl", false, ParseUint)
	p.LIDMaskCount = sysattr.Get(&r.Dir, "lid_mask_count", false, ParseUint)
	p.CapMask = sysattr.Get(&r.Dir, "cap_mask", false, ParseHex)
	p.LinkLayer = sysattr.Get(&r.Dir, "link_layer", false, nonEmpty)
	p.Counters = r.counters("counters", true)
	p.HWCounters = r.counters("hw_counters", false)

	// RoCE: GID 0 names its netdev (a bond for a LAG device). IPoIB: the
	// PCI function's netdev with this port's dev_port.
	if s, ok := r.Text("gid_attrs/ndevs/0", false); ok && s != "" {
		p.Netdev = s
	} else {
		p.Netdev = netdevs[n]
	}
	return p
}

// counters reads every file of a counters directory. lifespan in
// hw_counters is the driver's cache time in milliseconds, not a counter.
func (r *reader) counters(sub string, pma bool) []Counter {
	entries, err := r.FS.ReadDir(r.Path + "/" + sub)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.Fail(err)
		}
		return nil
	}
	out := make([]Counter, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if name == "lifespan" && !pma {
			continue
		}
		if e.IsDir() {
			continue
		}
		s, ok := r.Text(sub+"/"+name, true)
		if !ok {
			continue
		}
		v, err := ParseCounter(s)
		if errors.Is(err, ErrNoPMA) {
			continue // absent, not zero, and not an error
		}
		if err != nil {
			r.Fail(&ParseError{Path: r.Path + "/" + sub + "/" + name, Err: err})
			continue
		}
		out = append(out, Counter{Name: name, Value: v})
	}
	return out
}

// netdevs maps port numbers to the netdevs of the device's PCI function
// (device/net/<name>/dev_port, or dev_id before it existed, is the 0-based
// port).
func (r *reader) netdevs() map[int]string {
	entries, err := r.FS.ReadDir(r.Path + "/device/net")
	if err != nil {
		return nil
	}
	m := make(map[int]string, len(entries))
	for _, e := range entries {
		dir := r.Path + "/device/net/" + e.Name()
		// A pkey child (ib0.8001) shares its parent's port; the port's
		// netdev is the parent (internal/netdev maps the same way).
		if _, err := r.FS.ReadFile(dir + "/parent"); err == nil {
			continue
		}
		b, err := r.FS.ReadFile(dir + "/dev_port")
		if err != nil {
			// Kernels before dev_port (3.15) have only dev_id ("0x1").
			if b, err = r.FS.ReadFile(dir + "/dev_id"); err != nil {
				continue
			}
		}
		n64, err := strconv.ParseInt(strings.TrimSpace(string(b)), 0, 16)
		if err != nil || n64 < 0 {
			continue
		}
		n := int(n64)
		if _, dup := m[n+1]; !dup {
			m[n+1] = e.Name()
		}
	}
	return m
}
