// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/kmsg"
	"github.com/rdma-doctor/rdma_doctor/internal/read/opensm"
)

// kernelLog is the kernel log reader a server runs (nil in the CLI: a
// single diagnosis has no "since" to count from).
type kernelLog struct {
	w atomic.Pointer[kmsg.Watcher]
	// devices is the latest index of the RDMA devices, which tells the
	// reader whose messages keep their slots (kmsg.Options.IsRDMA):
	// built when the reader starts and renewed with every snapshot's
	// KernelLog.
	devices atomic.Pointer[deviceIndex]
	// first is closed once the ring buffer's history is read
	// (AwaitWatchers); set with w, before the server's workers start.
	first chan struct{}
}

// KernelLogWorker is the reader of <rootfs>/dev/kmsg (internal/read/kmsg) as
// a worker, reading every interval (0: kmsg.DefaultInterval); a server
// runs one. The error says the reader could not be made.
func (h *Host) KernelLogWorker(logger *slog.Logger, interval time.Duration) (worker.Worker, error) {
	// Bounded: a wedged sysfs read must not hold the server's start (the
	// class read waits for its reads under ctx); every snapshot's
	// KernelLog renews the index anyway.
	first, cancel := context.WithTimeout(context.Background(), firstRoundWait)
	if class, _ := h.Snapshot().Class(first); class != nil {
		x := newDeviceIndex(class)
		h.kernelLog.devices.Store(&x)
	}
	cancel()
	w, err := kmsg.New(kmsg.Options{
		Path:     filepath.Join(h.opts.Paths.Rootfs, "dev", "kmsg"),
		Interval: interval,
		Redact:   opensm.Redact,
		BootTime: h.bootTime(),
		Logger:   logger,
		NotLive:  h.opts.Live.Reason == LiveReasonNotSysfs,
		Now:      h.now,
		IsRDMA: func(s kmsg.Subject) bool {
			x := h.kernelLog.devices.Load()
			if x == nil {
				return false
			}
			_, ok := x.device(s)
			return ok
		},
	})
	if err != nil {
		return nil, err
	}
	h.kernelLog.w.Store(w)
	h.kernelLog.first = make(chan struct{})
	// Not reading the log (absent, refused) is failing: what it would
	// report is unknown, and unknown is not healthy.
	return &watchWorker{name: "kmsg", first: h.kernelLog.first, run: w.Run,
		failing: func() bool { return !w.Status().Reading }}, nil
}

// bootTime is /proc/stat's btime, zero when unreadable: it dates the
// records already in the ring buffer.
func (h *Host) bootTime() time.Time {
	b, err := h.fs.Proc.ReadFile("stat")
	if err != nil {
		return time.Time{}
	}
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(l, []byte("btime ")); ok {
			if s, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil && s > 0 {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}

// KernelLog is what the kernel log reader saw, its subjects mapped to the
// RDMA devices of the snapshot's class.
type KernelLog struct {
	Status kmsg.Status
	Stats  kmsg.Stats
	// Events are the counts and last message per device and event,
	// sorted by device then table order. Device is "" for a message that
	// names no RDMA device (a function the device filter excludes, a
	// netdev without RDMA); RDMAOnly events of other devices are left out.
	Events []KernelEvent
}

// KernelEvent is one device's record of one event.
type KernelEvent struct {
	Device string
	Event  kmsg.Event
	// Family is the driver family of the messages (kmsg.RemedyFor picks
	// the remedy by it).
	Family kmsg.Family
	// Live counts since rdma_doctor started, History those in the ring
	// buffer when it started.
	Live, History uint64
	// Last is the latest message of the event for the device.
	Last kmsg.Last
	// HasLast is false when the message table dropped it (bounded).
	HasLast bool
}

// readKernelLog is the kernel log reader's report, and false when none runs
// (the CLI, --no-collector.kmsg).
func (s *Snapshot) readKernelLog(ctx context.Context) (*KernelLog, bool) {
	w := s.h.kernelLog.w.Load()
	if w == nil {
		return nil, false
	}
	r := w.Report()
	class, _ := s.Class(ctx)
	x := newDeviceIndex(class)
	if class != nil {
		s.h.kernelLog.devices.Store(&x)
	}
	return mapKernelLog(r, x), true
}

// deviceIndex finds the RDMA device a message's subject names.
type deviceIndex struct {
	pci, netdev map[string]string
	ib          map[string]bool
}

func newDeviceIndex(c *infiniband.Class) deviceIndex {
	x := deviceIndex{pci: map[string]string{}, netdev: map[string]string{}, ib: map[string]bool{}}
	if c == nil {
		return x
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		x.ib[d.Name] = true
		if d.PCIAddress != "" {
			x.pci[d.PCIAddress] = d.Name
		}
		for j := range d.Ports {
			if n := d.Ports[j].Netdev; n != "" {
				x.netdev[n] = d.Name
			}
		}
	}
	return x
}

func (x deviceIndex) device(s kmsg.Subject) (string, bool) {
	if d, ok := x.pci[s.PCI]; ok && s.PCI != "" {
		return d, true
	}
	if d, ok := x.netdev[s.Netdev]; ok && s.Netdev != "" {
		return d, true
	}
	if s.IBDev != "" && x.ib[s.IBDev] {
		return s.IBDev, true
	}
	return "", false
}

type devEvent struct {
	device string
	event  int
}

func mapKernelLog(r kmsg.Report, x deviceIndex) *KernelLog {
	out := &KernelLog{Status: r.Status, Stats: r.Stats}
	merged := map[devEvent]*KernelEvent{}
	get := func(s kmsg.Subject, ev int) *KernelEvent {
		dev, ok := x.device(s)
		if !ok && r.Events[ev].RDMAOnly {
			return nil
		}
		k := devEvent{dev, ev}
		e := merged[k]
		if e == nil {
			e = &KernelEvent{Device: dev, Event: r.Events[ev]}
			merged[k] = e
		}
		return e
	}
	for _, c := range r.Counts {
		if e := get(c.Subject, c.Event); e != nil {
			e.Live += c.Live
			e.History += c.History
			if e.Family == "" {
				e.Family = c.Family
			}
		}
	}
	for _, l := range r.Last {
		if e := get(l.Subject, l.Event); e != nil && (!e.HasLast || l.Last.After(e.Last.Last)) {
			e.Last, e.HasLast = l, true
			if l.Family != "" {
				e.Family = l.Family
			}
		}
	}
	order := map[string]int{}
	for i, e := range r.Events {
		order[e.Name] = i
	}
	for _, e := range merged {
		out.Events = append(out.Events, *e)
	}
	sort.Slice(out.Events, func(i, j int) bool {
		a, b := out.Events[i], out.Events[j]
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		return order[a.Event.Name] < order[b.Event.Name]
	})
	return out
}

// KernelLogWatcher is the running kernel log reader, nil when none runs.
func (h *Host) KernelLogWatcher() *kmsg.Watcher { return h.kernelLog.w.Load() }
