// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/devlink"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/jobs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/opensm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/portwatch"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/read/roce"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// Defaults of the freshness options.
const (
	// DefaultSlowRefresh is the diagnose sampler's default interval: the
	// sampler then finds the slow state fresh and reads none of it.
	DefaultSlowRefresh = 30 * time.Second
	// DefaultStaticMaxAge bounds how long a cached static attribute is
	// served: firmware can be updated and activated without the device
	// directory changing on some drivers.
	DefaultStaticMaxAge = 10 * time.Minute
)

// Options say what to read and where. main builds them once from flags
// and the config file.
type Options struct {
	// Paths are the resolved --path.rootfs, --path.sysfs, --path.procfs.
	Paths hostfs.Paths
	// FS overrides the file systems Paths open (tests inject faults).
	FS *hostfs.Host
	// Devices selects the RDMA devices read by every source.
	Devices DeviceFilter
	// Tuning selects the processes whose memlock limit is read.
	Tuning tuning.Options
	// Jobs bounds the read of the Slurm jobs (the jobs collector).
	Jobs jobs.Options
	// PodResources is the kubelet's pod-resources socket the jobs
	// collector asks which pods hold which device (--collector.jobs.pods:
	// podres.SocketPath below the rootfs); empty asks none.
	PodResources string
	// OpenSMConfig is the opensm.conf to read instead of the search
	// (--collector.sm.opensm-config).
	OpenSMConfig string
	// Ethtool, if set, queries each RDMA netdev the running kernel has
	// (driver, firmware, statistics).
	Ethtool *netdev.Ethtool
	// Mapper answers the netdev reader's PCI and character device
	// questions; nil reads the sysfs tree.
	Mapper netdev.Mapper
	// Live says whether the tree is the running kernel's (DetectLive), and
	// why; Kernel, Devlink and Mapper are set only when it is.
	Live Live
	// Kernel is the running kernel's netlink, for the sources only it
	// answers (RDMA netlink, DCB netlink and the pause ioctl); nil on a
	// tree that is not the live /sys (a fixture host), whose netdevs and
	// devices the kernel here does not have.
	Kernel rdmanl.Conn
	// RDMANetlink selects the RDMA netlink queries (collector
	// rdma_netlink); its Keep is the device filter.
	RDMANetlink rdmanl.Options
	// Devlink is the running kernel's devlink family (devlink.go); nil on
	// a tree that is not the live /sys, as Kernel is.
	Devlink devlink.Conn
	// SlowRefresh is how long slow host state is reused; 0 is
	// DefaultSlowRefresh, negative reads it on every snapshot.
	SlowRefresh time.Duration
	// SM runs sminfo (sm.go); nil never runs it (--no-collector.sm).
	SM *SMOptions
	// Fabric scans the fabric and sweeps its counters (fabric.go); nil
	// runs neither (the fabric collector off).
	Fabric *FabricOptions
	// StaticMaxAge bounds the static attribute cache; 0 is
	// DefaultStaticMaxAge, negative disables the cache.
	StaticMaxAge time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Host reads one host. It is safe for concurrent use.
type Host struct {
	opts Options
	fs   hostfs.Host
	// netFS is fs with the netdevs' live attributes kept open.
	netFS hostfs.Host
	// ifindexes is the socket of the ethtool query's ifindex lookups,
	// kept open for every snapshot.
	ifindexes netdev.Ifindexes
	ib        *infiniband.Reader
	now       func() time.Time
	slowT     time.Duration

	// caches is the slow sources' cached readings and the background
	// ones' feeds, one per entry of sources (sources.go); slots is each
	// source's pin in a Snapshot. Both are made in New and never written
	// after.
	caches map[source]cache
	slots  map[source]int
	// smLogs keeps where each OpenSM log was read to: a refresh parses
	// only the lines added since.
	smLogs opensm.LogReader
	// fabricSwept is called with each counter sweep before it is
	// published (OnFabricSweep).
	fabricSwept hooks[*fabric.Sweep]

	// latest is the newest class read, which a snapshot that accepts an
	// older class (the sampler) reuses; active holds every port seen
	// ACTIVE since start (device/port), which diagnose requires to stay up.
	// ports is the port state sampler, when a server runs one.
	ports portWatch
	// kernelLog is the kernel log reader, when a server runs one.
	kernelLog kernelLog

	latestMu sync.Mutex
	latest   timed[*infiniband.Class]
	active   map[portKey]bool
}

type portKey struct {
	device string
	port   int
}

type timed[T any] struct {
	v   T
	err error
	at  time.Time
	ok  bool
}

// New returns the Host that opts describe.
func New(opts Options) *Host {
	h := &Host{opts: opts, now: opts.Now}
	h.caches, h.slots = newCaches()
	if opts.FS != nil {
		h.fs = *opts.FS
	} else {
		h.fs = opts.Paths.Open()
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.netFS = h.fs
	h.netFS.Sys = hostfs.Kept(h.fs.Sys)
	switch {
	case opts.SlowRefresh == 0:
		h.slowT = DefaultSlowRefresh
	case opts.SlowRefresh > 0:
		h.slowT = opts.SlowRefresh
	}
	staticAge := opts.StaticMaxAge
	if staticAge == 0 {
		staticAge = DefaultStaticMaxAge
	}
	h.ib = infiniband.NewReader(h.fs.Sys, opts.Devices.Keep, staticAge, h.now)
	return h
}

// FS is the host's file systems, for code that must read something no
// source covers (remediate's writers, the sminfo targets' umad files).
func (h *Host) FS() hostfs.Host { return h.fs }

// Options are the options the Host was made with.
func (h *Host) Options() *Options { return &h.opts }

// Live says whether the live-kernel sources are on, and why.
func (h *Host) Live() Live { return h.opts.Live }

// Keep reports whether a device is read (the device filter).
func (h *Host) Keep(name string) bool { return h.opts.Devices.Keep(name) }

// Snapshot starts one collection: every source it is asked for is read
// at most once, live sources now, slow ones from the shared cache, and
// every later call returns that first reading (Snapshot).
func (h *Host) Snapshot() *Snapshot {
	return &Snapshot{h: h, Time: h.now(), pins: make([]once[any], len(h.slots))}
}

// SnapshotReusing is Snapshot, but the class may be one read up to maxAge
// ago by another snapshot (a scrape): the diagnose sampler then reads
// nothing a scrape just read. Time is then the class's read time, so
// delta checks divide by the right interval.
func (h *Host) SnapshotReusing(maxAge time.Duration) *Snapshot {
	s := h.Snapshot()
	h.latestMu.Lock()
	l := h.latest
	h.latestMu.Unlock()
	if l.ok && maxAge > 0 && s.Time.Sub(l.at) <= maxAge && l.err == nil {
		s.class.get(func() (*infiniband.Class, error) { return l.v, l.err })
		s.Time = l.at
	}
	return s
}

// record keeps the ports seen ACTIVE and, when whole, the class itself.
func (h *Host) record(c *infiniband.Class, err error, at time.Time, whole bool) {
	h.latestMu.Lock()
	defer h.latestMu.Unlock()
	if whole {
		h.latest = timed[*infiniband.Class]{v: c, err: err, at: at, ok: true}
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		for j := range d.Ports {
			if p := &d.Ports[j]; p.State.OK && (p.State.V.Value == infiniband.StateActive || p.State.V.Value == infiniband.StateActiveDefer) {
				if h.active == nil {
					h.active = map[portKey]bool{}
				}
				h.active[portKey{d.Name, p.Num}] = true
			}
		}
	}
}

// WasActive reports whether a port was ACTIVE in any class read since the
// Host was made: such a port going down is a fault, not a spare.
func (h *Host) WasActive(device string, port int) bool {
	h.latestMu.Lock()
	defer h.latestMu.Unlock()
	return h.active[portKey{device, port}]
}

// Snapshot is one collection's view of the host: one moment. Each
// source is read (or taken from the Host's cache, or from a background
// source's latest result) on its first call, and every later call
// returns the same value and error, slow and background sources
// included, however the Host's caches change meanwhile: two checks, or a
// check and the collector beside it, judge the same reading. A nil
// source with its error says why it could not be read.
type Snapshot struct {
	h *Host
	// Time is when the snapshot was taken (or its reused class read).
	Time time.Time

	// pins is each registered source's reading (sources.go), by its
	// Host's slot: taken on first use, returned after.
	pins []once[any]
	// listing is the class directory's kept devices and their
	// identities, listed once for the class read and the device check.
	listing once[[]infiniband.Entry]
	bus     once[[]pci.BusFunction]

	// The live sources, read by the snapshot itself.
	class     once[*infiniband.Class]
	netdevs   once[*netdev.Snapshot]
	rdmanl    once[*rdmanl.Snapshot]
	roce      once[*roce.Snapshot]
	devlink   once[*Devlink]
	ports     once[[]portwatch.History]
	kernelLog once[*KernelLog]
	// devCheck compares the class with the slow PCI source's devices
	// (checkDevices).
	devCheck sync.Once
}

// Host is the Host the snapshot reads.
func (s *Snapshot) Host() *Host { return s.h }

// FS is the host's file systems.
func (s *Snapshot) FS() hostfs.Host { return s.h.fs }

// Class is /sys/class/infiniband: live values read now, static ones from
// the device cache. infiniband.ErrNoClass means no RDMA core.
func (s *Snapshot) Class(ctx context.Context) (*infiniband.Class, error) {
	return s.class.get(func() (*infiniband.Class, error) {
		entries, err := s.devices()
		if err != nil {
			return nil, err
		}
		c, err := s.h.ib.ReadListed(ctx, entries)
		if c != nil {
			s.h.record(c, err, s.Time, ctx.Err() == nil)
		}
		return c, err
	})
}

// NeedClass judges a Class reading: no RDMA core, unreadable, not read.
var NeedClass = &Need[*infiniband.Class]{name: "infiniband", why: func(c *infiniband.Class, err error) string {
	switch {
	case c != nil:
		return ""
	case errors.Is(err, infiniband.ErrNoClass):
		return "no RDMA devices: " + err.Error()
	case err != nil:
		return "cannot read /sys/class/infiniband: " + err.Error()
	}
	return "/sys/class/infiniband was not read"
}}

// Bus is the network functions of the PCI bus, every vendor, and their
// drivers: why devices are missing. Only a host short of devices asks
// for it (an SR-IOV host has hundreds of functions).
func (s *Snapshot) Bus() ([]pci.BusFunction, error) {
	return s.bus.get(func() ([]pci.BusFunction, error) { return pci.ReadNetworkFunctions(s.h.fs.Sys) })
}

// devices lists the class directory's kept devices with the identities of
// their entries, once per snapshot.
func (s *Snapshot) devices() ([]infiniband.Entry, error) { return s.listing.get(s.h.ib.List) }

// PortHistory is what the server's port state sampler saw of every
// port, refreshed by the snapshot's first call; false where none runs
// (the CLI, --no-collector.portwatch).
func (s *Snapshot) PortHistory() ([]portwatch.History, bool) {
	h, err := s.ports.get(func() ([]portwatch.History, error) {
		if h, ok := s.readPortHistory(); ok {
			return h, nil
		}
		return nil, errNotWatched
	})
	return h, err == nil
}

// NeedPortHistory judges whether a port state sampler runs (a
// PortHistory's second result).
var NeedPortHistory = &Need[bool]{name: "portwatch", why: func(watched bool, _ error) string {
	if !watched {
		return "needs the port state sampler of rdma_doctor serve (a single read cannot see a link go down and up); " +
			"it is off with --no-collector.portwatch"
	}
	return ""
}}

// KernelLog is the kernel log reader's report, mapped to the class's
// devices by the snapshot's first call; false when none runs (the CLI,
// --no-collector.kmsg).
func (s *Snapshot) KernelLog(ctx context.Context) (*KernelLog, bool) {
	l, err := s.kernelLog.get(func() (*KernelLog, error) {
		if l, ok := s.readKernelLog(ctx); ok {
			return l, nil
		}
		return nil, errNotWatched
	})
	return l, err == nil
}

// NeedKernelLog judges a KernelLog reading, nil where no reader runs.
var NeedKernelLog = &Need[*KernelLog]{name: "kmsg", why: func(l *KernelLog, _ error) string {
	switch {
	case l == nil:
		return "needs the kernel log reader of rdma_doctor serve (events are counted from when it starts); " +
			"it is off with --no-collector.kmsg"
	case !l.Status.Reading:
		return "cannot read the kernel log (" + l.Status.Reason + "): " + errText(l.Status.Err) +
			"; reading /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1"
	}
	return ""
}}

// errNotWatched is a watcher's reading where none runs.
var errNotWatched = errors.New("no watcher runs")

// once is a reading taken at most once per snapshot, on its first call
// (whose ctx bounds it: sync.OnceValues cannot take one).
type once[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (o *once[T]) get(read func() (T, error)) (T, error) {
	o.once.Do(func() { o.v, o.err = read() })
	return o.v, o.err
}

// slow is a source shared across snapshots and reused for a while. One
// read runs at a time; others wait for it, or, when their context ends
// first (a wedged read), get the previous value: a stuck source never
// piles up readers.
type slow[T any] struct {
	mu     sync.Mutex
	last   timed[T]
	flight chan struct{}
	// stale makes the next get read again however young last is; last
	// is still served to a reader whose context ends first.
	stale bool
}

// peek returns the cached value without reading.
func (c *slow[T]) peek() (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last.v, c.last.ok
}

// invalidate makes the next get read again.
func (c *slow[T]) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stale = true
}

func (c *slow[T]) readAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last.at
}

func (c *slow[T]) get(ctx context.Context, now time.Time, maxAge time.Duration, read func(context.Context) (T, error)) (T, error) {
	v, _, err := c.fetch(ctx, now, maxAge, read)
	return v, err
}

// fetch is get, and whether this call ran read (the others got the
// cached value, or waited for another caller's read).
func (c *slow[T]) fetch(ctx context.Context, now time.Time, maxAge time.Duration, read func(context.Context) (T, error)) (T, bool, error) {
	c.mu.Lock()
	for {
		if c.last.ok && !c.stale && now.Sub(c.last.at) < maxAge {
			l := c.last
			c.mu.Unlock()
			return l.v, false, l.err
		}
		f := c.flight
		if f == nil {
			break
		}
		c.mu.Unlock()
		select {
		case <-f:
		case <-ctx.Done():
			c.mu.Lock()
			l := c.last
			c.mu.Unlock()
			if l.ok {
				return l.v, false, l.err
			}
			var zero T
			return zero, false, ctx.Err()
		}
		c.mu.Lock()
	}
	f := make(chan struct{})
	c.flight = f
	c.mu.Unlock()

	v, err := read(ctx)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.flight = nil
	close(f)
	if ctx.Err() == nil {
		// A read cut short by its deadline is not kept: the next
		// snapshot reads again.
		c.last = timed[T]{v: v, err: err, at: now, ok: true}
		c.stale = false
	}
	return v, true, err
}

// AtRoot is a Host with default options below rootfs (tests, tools).
func AtRoot(rootfs string) (*Host, error) {
	p, err := hostfs.Paths{Rootfs: rootfs}.Resolve()
	if err != nil {
		return nil, err
	}
	return New(Options{Paths: p}), nil
}
