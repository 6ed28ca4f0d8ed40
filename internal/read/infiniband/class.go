// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package infiniband reads /sys/class/infiniband into a typed snapshot. It
// holds the one parser for each attribute format (rate, "N: NAME" enums,
// GUIDs, counters), shared by the collectors, the checks and the actions.
package infiniband

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
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
	// PortGUID is the port's GUID as ibstat prints it ("0x0002c9030031fdc1"),
	// the low 64 bits of GID 0 (gids/0): the identity the fabric's tools
	// (iblinkinfo, ibnetdiscover) give this end of the cable. It differs
	// from the node GUID where a device has several ports (mlx4: node
	// ...fdc0, ports ...fdc1 and ...fdc2). Present only on InfiniBand
	// ports: a RoCE or iWARP GID 0 is an address, not a port GUID.
	PortGUID Opt[string]
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

// IsInfiniBand reports whether the port runs InfiniBand. Kernels before
// link_layer existed (2.6.37) had only InfiniBand ports, so a port without
// the file is one; a file that could not be read leaves LinkLayer absent
// too, and the port's error says so.
func (p *Port) IsInfiniBand() bool {
	return !p.LinkLayer.OK || p.LinkLayer.V == LinkLayerInfiniBand
}

// Link layers as ports/N/link_layer prints them.
const (
	LinkLayerInfiniBand = "InfiniBand"
	LinkLayerEthernet   = "Ethernet"
)

// ErrNoClass means the host has no /sys/class/infiniband: no RDMA core loaded.
var ErrNoClass = errors.New("no " + ClassDir + " directory: RDMA core not loaded")

// Read reads every device that keep accepts, without a cache (tests,
// one-off reads). A long-lived reader uses a Reader.
func Read(ctx context.Context, sys hostfs.FS, keep func(name string) bool) (*Class, error) {
	return NewReader(sys, keep, -1, nil).Read(ctx)
}

// Reader reads the class again and again, keeping each device's static
// attributes (node type, GUIDs, firmware, board, HCA type, node
// description, link layers, the PCI parent, the port and counter file
// lists) until the device is re-registered (its directory's identity
// changes) or maxAge passes. Live values (state, rate, LIDs, capability
// mask, counters) are read every time. It is safe for concurrent use.
type Reader struct {
	sys    hostfs.FS
	keep   func(string) bool
	maxAge time.Duration
	now    func() time.Time

	mu     sync.Mutex
	static map[string]*static
}

// NewReader returns a Reader. maxAge <= 0 disables the cache; now nil is
// time.Now.
func NewReader(sys hostfs.FS, keep func(string) bool, maxAge time.Duration, now func() time.Time) *Reader {
	if now == nil {
		now = time.Now
	}
	return &Reader{sys: sys, keep: keep, maxAge: maxAge, now: now, static: map[string]*static{}}
}

// static is what a device read keeps: the static part of the Device, the
// errors met reading it (reported again on every read, so a broken
// attribute stays counted), and the files of the live part.
type static struct {
	id    hostfs.Identity
	hasID bool
	at    time.Time
	dev   Device
	errs  []error
	hw    []counterFile
	ports []portFiles
	// served is set once a read has returned errs: later reads serve
	// them again from the cache, and a refusal among them (a restricted
	// function's EINVAL) is then a remembered one, not a new failure.
	served atomic.Bool
}

type portFiles struct {
	dir          string
	live         [len(liveAttrs)]*hostfs.Attr
	counters, hw []counterFile
}

// liveAttrs are a port's attributes read on every collection, in the
// order port() parses them.
var liveAttrs = [...]string{"state", "phys_state", "rate", "lid", "sm_lid", "sm_sl", "lid_mask_count", "cap_mask"}

type counterFile struct {
	name, path string
	attr       *hostfs.Attr
}

// close closes every kept file of a static entry that is replaced or
// dropped (a read still using it goes on without keeping them).
func (st *static) close() {
	for _, c := range st.hw {
		c.attr.Close()
	}
	for i := range st.ports {
		pf := &st.ports[i]
		for _, a := range pf.live {
			a.Close()
		}
		for _, c := range pf.counters {
			c.attr.Close()
		}
		for _, c := range pf.hw {
			c.attr.Close()
		}
	}
}

// Read reads every device that keep accepts, concurrently, one goroutine
// per device. A device that keep rejects is never read at all: on some
// hosts reading restricted functions floods the kernel log. When ctx ends
// first, the devices read so far are returned with ctx's error: one wedged
// file costs its device, not the whole class.
func (r *Reader) Read(ctx context.Context) (*Class, error) {
	entries, err := r.List()
	if err != nil {
		return nil, err
	}
	return r.ReadListed(ctx, entries)
}

// ReadListed is Read of the devices List listed (the host snapshot lists
// them once for every reader of the class).
func (r *Reader) ReadListed(ctx context.Context, entries []Entry) (*Class, error) {
	r.forget(entries)

	results := make(chan indexed, len(entries))
	for i, e := range entries {
		hostfs.Go(func() { results <- indexed{i, r.device(ctx, e)} })
	}
	got := make([]*Device, len(entries))
	var done int
	for done < len(entries) {
		select {
		case res := <-results:
			got[res.i] = &res.dev
			done++
		case <-ctx.Done():
			return collect(got), ctx.Err()
		}
	}
	return collect(got), ctx.Err()
}

// Entry is a device of the class directory and the identity of its
// entry there (HasID false when it cannot be told: an FS without
// identities). The entry is the link the kernel makes anew with each
// registration of the device (device_add; device_del removes it), so a
// re-registered device (driver reload, firmware reset) has a new
// identity.
type Entry struct {
	Name  string
	ID    hostfs.Identity
	HasID bool
}

// List lists the devices keep accepts, as DeviceNames does, each with
// its entry's identity: one getdents and a short lookup per device
// (hostfs.List).
func (r *Reader) List() ([]Entry, error) {
	listed, err := hostfs.List(r.sys, ClassDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNoClass
		}
		return nil, err
	}
	out := make([]Entry, 0, len(listed))
	for _, e := range listed {
		if r.keep == nil || r.keep(e.Name) {
			out = append(out, Entry{Name: e.Name, ID: e.ID, HasID: e.HasID})
		}
	}
	return out, nil
}

type indexed struct {
	i   int
	dev Device
}

func collect(got []*Device) *Class {
	c := &Class{Devices: make([]Device, 0, len(got))}
	for _, d := range got {
		if d != nil {
			c.Devices = append(c.Devices, *d)
		}
	}
	return c
}

// forget drops the cache entries of devices no longer listed: a vanished
// device's attributes are never served.
func (r *Reader) forget(entries []Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.static) == 0 {
		return
	}
	keep := make(map[string]bool, len(entries))
	for _, e := range entries {
		keep[e.Name] = true
	}
	for n, st := range r.static {
		if !keep[n] {
			st.close()
			delete(r.static, n)
		}
	}
}

// staticOf returns the device's static part, from the cache while it is
// the same directory and young enough, else read now.
func (r *Reader) staticOf(e Entry) *static {
	name, id, hasID := e.Name, e.ID, e.HasID
	dir := ClassDir + "/" + name
	if r.maxAge <= 0 {
		return readStatic(r.sys, dir, name)
	}
	now := r.now()
	r.mu.Lock()
	st := r.static[name]
	r.mu.Unlock()
	if st != nil && st.hasID == hasID && st.id == id && now.Sub(st.at) < r.maxAge {
		return st
	}
	st = readStatic(r.sys, dir, name)
	st.id, st.hasID, st.at = id, hasID, now
	r.mu.Lock()
	if old := r.static[name]; old != nil {
		old.close()
	}
	r.static[name] = st
	r.mu.Unlock()
	return st
}

func readStatic(sys hostfs.FS, dir, name string) *static {
	r := &sysattr.Dir{FS: sys, Path: dir}
	st := &static{}
	d := &st.dev
	d.Name = name
	if link, err := sys.ReadLink(dir + "/device"); err == nil {
		d.PCIAddress = path.Base(link)
	}
	d.NodeType = sysattr.Get(r, "node_type", true, ParseEnum)
	d.NodeGUID = sysattr.Get(r, "node_guid", true, ParseGUID)
	d.SysImageGUID = sysattr.Get(r, "sys_image_guid", true, ParseGUID)
	// Empty is a value here: qib, rxe and siw have a fw_ver holding only
	// a newline (ibstat prints an empty "Firmware version:").
	d.FirmwareVer = text(r, "fw_ver")
	d.HCAType = text(r, "hca_type")
	d.BoardID = text(r, "board_id")
	d.HWRev = text(r, "hw_rev")
	d.NodeDesc = text(r, "node_desc")
	st.hw = counterFiles(r, dir+"/hw_counters", false)

	netdevs := portNetdevs(sys, dir)
	ports, err := sys.ReadDir(dir + "/ports")
	if err != nil {
		r.Fail(err)
	}
	for _, e := range ports {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pdir := dir + "/ports/" + e.Name()
		r.Path = pdir
		p := Port{Num: n}
		p.LinkLayer = sysattr.Get(r, "link_layer", false, nonEmpty)
		// Only a port that says it is InfiniBand: an unreadable link_layer
		// may hide a RoCE port, and an RNIC (i40iw) prints "InfiniBand"
		// while its GID 0 is its MAC. Every InfiniBand port has GID 0
		// (ibstat cannot do without it), so a missing one is an error.
		rnic := d.NodeType.OK && d.NodeType.V.Value == NodeTypeRNIC
		if p.LinkLayer.OK && p.LinkLayer.V == LinkLayerInfiniBand && !rnic {
			p.PortGUID = sysattr.Get(r, "gids/0", true, ParsePortGUID)
		}
		// RoCE: GID 0 names its netdev (a bond for a LAG device). IPoIB:
		// the PCI function's netdev with this port's dev_port.
		if s, ok := r.Text("gid_attrs/ndevs/0", false); ok && s != "" {
			p.Netdev = names.Label(s)
		} else {
			p.Netdev = netdevs[n]
		}
		d.Ports = append(d.Ports, p)
		pf := portFiles{dir: pdir, counters: counterFiles(r, pdir+"/counters", true), hw: counterFiles(r, pdir+"/hw_counters", false)}
		for i, name := range liveAttrs {
			pf.live[i] = hostfs.NewAttr(sys, pdir+"/"+name)
		}
		st.ports = append(st.ports, pf)
	}
	sort.Sort(byPort{d.Ports, st.ports})
	st.errs = r.Errs
	return st
}

type byPort struct {
	ports []Port
	files []portFiles
}

func (b byPort) Len() int           { return len(b.ports) }
func (b byPort) Less(i, j int) bool { return b.ports[i].Num < b.ports[j].Num }
func (b byPort) Swap(i, j int) {
	b.ports[i], b.ports[j] = b.ports[j], b.ports[i]
	b.files[i], b.files[j] = b.files[j], b.files[i]
}

// counterFiles lists a counters directory. lifespan in hw_counters is the
// driver's cache time in milliseconds, not a counter.
func counterFiles(r *sysattr.Dir, dir string, pma bool) []counterFile {
	entries, err := r.FS.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.Fail(err)
		}
		return nil
	}
	// Each file's name becomes a label value: a name that is not a
	// kernel identifier is refused, and past names.MaxNamesPerFamily
	// (in name order) the rest are left out, counted (a host gave 12,036
	// counter files).
	out := make([]counterFile, 0, min(len(entries), names.MaxNamesPerFamily))
	refused, over := 0, 0
	for _, e := range entries {
		if e.IsDir() || e.Name() == "lifespan" && !pma {
			continue
		}
		switch {
		case !names.Token(e.Name()):
			refused++
			continue
		case len(out) == names.MaxNamesPerFamily:
			over++
			continue
		}
		p := dir + "/" + e.Name()
		out = append(out, counterFile{name: e.Name(), path: p, attr: hostfs.NewAttr(r.FS, p)})
	}
	names.Limit(names.Refused, refused)
	names.Limit(names.OverCap, over)
	return out
}

// device reads one device: its static part (cached) and its live part.
func (r *Reader) device(ctx context.Context, e Entry) Device {
	st := r.staticOf(e)
	if r.maxAge <= 0 {
		defer st.close() // no cache: nothing is kept open either
	}
	d := st.dev
	d.Errors = append([]error(nil), st.errs...)
	if st.served.Swap(true) {
		for i, err := range d.Errors {
			if hostfs.IsRefusal(err) && !errors.Is(err, hostfs.ErrRefused) {
				d.Errors[i] = &hostfs.RefusedError{Err: err}
			}
		}
	}
	lr := live{buf: make([]byte, 0, 256)}

	d.HWCounters = lr.counters(st.hw)
	d.Ports = make([]Port, len(st.dev.Ports))
	for i := range st.dev.Ports {
		if ctx.Err() != nil {
			d.Ports = d.Ports[:i]
			break
		}
		d.Ports[i] = lr.port(st.dev.Ports[i], &st.ports[i])
	}
	d.Errors = append(d.Errors, lr.errs...)
	return d
}

// live reads the attributes that change, into one reused buffer.
type live struct {
	buf  []byte
	errs []error
}

// read returns an attribute's content trimmed of white space, valid until
// the next read. A missing file that is not required is no error.
func (l *live) read(a *hostfs.Attr, required bool) ([]byte, bool) {
	b, err := a.Read(l.buf)
	if err != nil {
		if required || !errors.Is(err, fs.ErrNotExist) {
			l.errs = append(l.errs, err)
		}
		return nil, false
	}
	l.buf = b[:0]
	return bytes.TrimSpace(b), true
}

func liveGet[T any](l *live, a *hostfs.Attr, required bool, parse func(string) (T, error)) Opt[T] {
	b, ok := l.read(a, required)
	return sysattr.Parse(string(b), ok, parse, func(err error) { l.errs = append(l.errs, err) }, a.Name)
}

func (l *live) port(p Port, f *portFiles) Port {
	a := &f.live // in liveAttrs order
	p.State = liveGet(l, a[0], true, ParseEnum)
	p.PhysState = liveGet(l, a[1], true, ParseEnum)
	p.Rate = liveGet(l, a[2], true, ParseRate)
	p.LID = liveGet(l, a[3], false, ParseHex)
	p.SMLID = liveGet(l, a[4], false, ParseHex)
	p.SMSL = liveGet(l, a[5], false, ParseUint)
	p.LIDMaskCount = liveGet(l, a[6], false, ParseUint)
	// Live: opensm starting or stopping on this host flips IsSM.
	p.CapMask = liveGet(l, a[7], false, ParseHex)
	p.Counters = l.counters(f.counters)
	p.HWCounters = l.counters(f.hw)
	return p
}

// counters reads counter files. A counter that reads N/A (old kernels'
// "no PMA") is absent, not zero, and not an error.
func (l *live) counters(files []counterFile) []Counter {
	if len(files) == 0 {
		return nil
	}
	out := make([]Counter, 0, len(files))
	for _, f := range files {
		b, ok := l.read(f.attr, true)
		if !ok {
			continue
		}
		v, err := parseCounterBytes(b)
		if errors.Is(err, ErrNoPMA) {
			continue
		}
		if err != nil {
			l.errs = append(l.errs, &ParseError{Path: f.path, Err: err})
			continue
		}
		out = append(out, Counter{Name: f.name, Value: v})
	}
	return out
}

// parseCounterBytes is ParseCounter without a string: plain decimal
// digits (every counter but a broken one) are parsed in place.
func parseCounterBytes(b []byte) (uint64, error) {
	if n := len(b); n > 0 && n < 20 {
		var v uint64
		for _, c := range b {
			if c < '0' || c > '9' {
				return ParseCounter(string(b))
			}
			v = v*10 + uint64(c-'0')
		}
		return v, nil
	}
	return ParseCounter(string(b))
}

func nonEmpty(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty file")
	}
	return s, nil
}

// text reads an optional text attribute. A file holding only a newline
// is a value, the empty string: the kernel printed nothing (empty by
// design). A file with no bytes at all was not printed by the kernel's
// show() (sysfs always ends a value with a newline): it is unreadable or
// truncated, and an error.
func text(r *sysattr.Dir, name string) Opt[string] {
	p := r.Path + "/" + name
	b, err := r.FS.ReadFile(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.Fail(err)
		}
		return Opt[string]{}
	}
	if len(b) == 0 {
		// Not even the newline sysfs ends every value with.
		r.Fail(&ParseError{Path: p, Err: errors.New("empty file")})
		return Opt[string]{}
	}
	// Free text that becomes a label value (node_desc, fw_ver, ...):
	// bounded by the label policy (a host gave a 100 KB node_desc).
	return some(names.Label(strings.TrimSpace(string(b))))
}

// ParseError is a file that was read but whose content is not in the
// kernel's format.
type ParseError = sysattr.ParseError

// portNetdevs maps port numbers to the netdevs of the device's PCI
// function (device/net/<name>/dev_port, the 0-based port).
func portNetdevs(sys hostfs.FS, dir string) map[int]string {
	entries, err := sys.ReadDir(dir + "/device/net")
	if err != nil {
		return nil
	}
	m := make(map[int]string, len(entries))
	for _, e := range entries {
		ndir := dir + "/device/net/" + e.Name()
		// A pkey child (ib0.8001) shares its parent's port; the port's
		// netdev is the parent (internal/read/netdev maps the same way).
		if _, err := sys.ReadFile(ndir + "/parent"); err == nil {
			continue
		}
		n, ok := ReadDevPort(sys, ndir)
		if !ok {
			continue
		}
		if _, dup := m[n+1]; !dup {
			m[n+1] = names.Label(e.Name())
		}
	}
	return m
}

// ReadDevPort reads a netdev's 0-based port on its PCI function:
// dev_port, or dev_id on kernels before dev_port existed (3.15). The one
// parser of both files.
func ReadDevPort(sys hostfs.FS, netdevDir string) (int, bool) {
	b, err := sys.ReadFile(netdevDir + "/dev_port")
	if err != nil {
		if b, err = sys.ReadFile(netdevDir + "/dev_id"); err != nil {
			return 0, false
		}
	}
	n, err := ParseDevPort(string(b))
	return n, err == nil
}

// ParseDevPort parses dev_port (decimal) or the legacy dev_id ("0x1"),
// both the 0-based port of the device.
func ParseDevPort(s string) (int, error) {
	s = strings.TrimSpace(s)
	base := 10
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		s, base = h, 16
	}
	v, err := strconv.ParseUint(s, base, 8)
	if err != nil {
		return 0, fmt.Errorf("port index %q: not a small unsigned number", s)
	}
	return int(v), nil
}

// DeviceNames lists the RDMA devices of sys's class directory that keep
// accepts (nil keeps all), in directory order: the one listing every
// reader of per-device files starts from, so that an excluded device is
// never touched. It returns ErrNoClass when the host has no RDMA core.
func DeviceNames(sys hostfs.FS, keep func(string) bool) ([]string, error) {
	entries, err := sys.ReadDir(ClassDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNoClass
		}
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if keep == nil || keep(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
