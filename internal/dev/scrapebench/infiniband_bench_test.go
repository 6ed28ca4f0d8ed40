// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package scrapebench measures what a scrape of /sys/class/infiniband costs, against
// what it cannot go below and against what everyone else pays:
//
//   - BenchmarkScrape: the infiniband collector's full scrape, as /metrics
//     runs it (Aggregator bound in a registry, Gather per iteration).
//   - BenchmarkCollect: the same without the registry (Aggregator.Collect
//     into a drained channel), to separate our cost from client_golang's.
//   - BenchmarkRead: infiniband.Read alone, the typed snapshot without metrics.
//   - BenchmarkRawFloor: the floor: the same files read with os.ReadFile,
//     one goroutine per device as Read does, with no parsing and no metrics.
//   - BenchmarkSyscallFloor: the same walk, each file read with bare
//     open/read/close into a stack buffer, without os.File and without a
//     copy. os.ReadFile costs an fstat and a netpoller registration per file
//     that hostfs does not make, so this is the floor hostfs can approach.
//   - BenchmarkProcfs: github.com/prometheus/procfs/sysfs InfiniBandClass, the
//     parser node_exporter uses, on the same tree.
//
// Each runs on two hosts: dgx-h100 (the fixture host, 9 devices) and
// generated-16x2 (16 devices of 2 ports each, every port with the fixture's
// full counters/ and hw_counters/ sets, written into b.TempDir() in the
// kernel's layout). The goal is a scrape within 1.3x of the parallel raw
// floor and at most half of procfs' time: reading sysfs is the cost that
// must dominate, not parsing, allocation or metric building. The files live
// in the page cache here, so the floor is the system call cost; on a real
// host sysfs reads call into the driver and every ratio moves towards 1.
package scrapebench

import (
	"context"
	"log/slog"
	"os"
	"path"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/procfs/sysfs"

	"github.com/rdma-doctor/rdma_doctor/collector"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// host is one benchmark host: its resolved paths and how many devices and
// ports it has, to check every contender read all of it.
type host struct {
	name    string
	paths   hostfs.Paths
	devices int
	ports   int
}

// hosts returns the fixture host and a host generated into b.TempDir().
func hosts(b *testing.B) []host {
	b.Helper()
	const genDevices, genPorts = 16, 2
	list := []host{
		{name: "dgx-h100", paths: hostfs.Paths{Rootfs: fixtureRoot(b, "dgx-h100")}, devices: 9, ports: 9},
		{name: "generated-16x2", paths: hostfs.Paths{Rootfs: generateHost(b, b.TempDir(), genDevices, genPorts)},
			devices: genDevices, ports: genDevices * genPorts},
	}
	for i := range list {
		p, err := list[i].paths.Resolve()
		if err != nil {
			b.Fatal(err)
		}
		list[i].paths = p
	}
	return list
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newAggregator(b *testing.B, h host) *collector.Aggregator {
	b.Helper()
	agg, err := collector.New(collector.Env{Host: rdmahost.New(rdmahost.Options{Paths: h.paths}), Config: &config.Config{}, Logger: discard()},
		collector.DefaultFlags(), 10*time.Second, "infiniband")
	if err != nil {
		b.Fatal(err)
	}
	return agg
}

func BenchmarkScrape(b *testing.B) {
	for _, h := range hosts(b) {
		b.Run(h.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(newAggregator(b, h).Bind(context.Background()))
			checkScrape(b, h, reg)
			measure(b, func() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkCollect(b *testing.B) {
	for _, h := range hosts(b) {
		b.Run(h.name, func(b *testing.B) {
			agg := newAggregator(b, h)
			ctx := context.Background()
			measure(b, func() {
				ch := make(chan prometheus.Metric, 256)
				done := make(chan int)
				go func() {
					n := 0
					for range ch {
						n++
					}
					done <- n
				}()
				agg.Collect(ctx, ch)
				close(ch)
				if n := <-done; n == 0 {
					b.Fatal("no metrics collected")
				}
			})
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, h := range hosts(b) {
		b.Run(h.name, func(b *testing.B) {
			sys := h.paths.Open().Sys
			ctx := context.Background()
			class, err := infiniband.Read(ctx, sys, nil)
			if err != nil {
				b.Fatal(err)
			}
			checkClass(b, h, class)
			measure(b, func() {
				if _, err := infiniband.Read(ctx, sys, nil); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkRawFloor(b *testing.B) {
	for _, h := range hosts(b) {
		b.Run(h.name, func(b *testing.B) {
			benchRaw(b, h, osReadFile)
		})
	}
}

func BenchmarkSyscallFloor(b *testing.B) {
	for _, h := range hosts(b) {
		b.Run(h.name, func(b *testing.B) {
			benchRaw(b, h, hostfstest.BareRead)
		})
	}
}

func benchRaw(b *testing.B, h host, read func(string) (int, error)) {
	sys := h.paths.Sysfs
	st, err := rawRead(sys, read)
	if err != nil {
		b.Fatal(err)
	}
	if st.devices != h.devices || st.ports != h.ports {
		b.Fatalf("raw read saw %d devices, %d ports; want %d, %d", st.devices, st.ports, h.devices, h.ports)
	}
	measure(b, func() {
		if _, err := rawRead(sys, read); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(float64(st.files), "files/op")
}

func BenchmarkProcfs(b *testing.B) {
	for _, h := range hosts(b) {
		b.Run(h.name, func(b *testing.B) {
			fs, err := sysfs.NewFS(h.paths.Sysfs)
			if err != nil {
				b.Fatal(err)
			}
			class, err := fs.InfiniBandClass()
			if err != nil {
				b.Fatal(err)
			}
			ports := 0
			for _, d := range class {
				ports += len(d.Ports)
			}
			if len(class) != h.devices || ports != h.ports {
				b.Fatalf("procfs saw %d devices, %d ports; want %d, %d", len(class), ports, h.devices, h.ports)
			}
			measure(b, func() {
				if _, err := fs.InfiniBandClass(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// measure runs op in the benchmark loop and reports, besides ns/op and
// allocations, cpu-ns/op: the process's user and system CPU time per
// operation, all threads and the garbage collector included. On a shared
// machine wall time swings with the load; CPU time is the cost each approach
// puts on the host, and ns/op against cpu-ns/op shows how much of it the
// per-device goroutines run in parallel.
func measure(b *testing.B, op func()) {
	b.Helper()
	b.ReportAllocs()
	start := cpuTime(b)
	n := 0
	for b.Loop() {
		op()
		n++
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(n), "cpu-ns/op")
}

// cpuTime is the process's user plus system CPU time in nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// checkClass fails unless the snapshot has every device and port of h, each
// port with its counters, and no errors: a benchmark of a failing read
// measures the wrong thing.
func checkClass(b *testing.B, h host, class *infiniband.Class) {
	b.Helper()
	if errs := class.Errors(); len(errs) > 0 {
		b.Fatalf("%s: read errors: %v", h.name, errs)
	}
	ports := 0
	for _, d := range class.Devices {
		for _, p := range d.Ports {
			if len(p.Counters) == 0 || len(p.HWCounters) == 0 || !p.Rate.OK || !p.State.OK {
				b.Fatalf("%s: %s port %d is incomplete: %+v", h.name, d.Name, p.Num, p)
			}
			ports++
		}
	}
	if len(class.Devices) != h.devices || ports != h.ports {
		b.Fatalf("%s: read %d devices, %d ports; want %d, %d", h.name, len(class.Devices), ports, h.devices, h.ports)
	}
}

// checkScrape fails unless a scrape succeeds without errors.
func checkScrape(b *testing.B, h host, g prometheus.Gatherer) {
	b.Helper()
	mfs, err := g.Gather()
	if err != nil {
		b.Fatal(err)
	}
	series := 0
	value := func(name string) float64 {
		for _, mf := range mfs {
			if mf.GetName() == name {
				return metricValue(mf.GetMetric()[0])
			}
		}
		b.Fatalf("%s: no %s", h.name, name)
		return 0
	}
	for _, mf := range mfs {
		series += len(mf.GetMetric())
	}
	if s, e := value("rdma_scrape_collector_success"), value("rdma_scrape_collector_errors"); s != 1 || e != 0 {
		b.Fatalf("%s: scrape success %v with %v errors", h.name, s, e)
	}
	if series < h.ports*40 {
		b.Fatalf("%s: only %d series for %d ports", h.name, series, h.ports)
	}
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}

// The attribute files infiniband.Read opens, so that the raw floor makes the
// same system calls (a missing optional file costs a failed open there too).
var (
	rawDeviceAttrs = []string{"node_type", "node_guid", "sys_image_guid", "fw_ver", "hca_type", "board_id", "hw_rev", "node_desc"}
	rawPortAttrs   = []string{"state", "phys_state", "rate", "lid", "sm_lid", "sm_sl", "lid_mask_count", "cap_mask", "link_layer", "gid_attrs/ndevs/0"}
)

type rawStats struct {
	devices, ports, files, bytes int
}

// rawRead is the floor: list the class directory, then one goroutine per
// device reads the device's link and attributes, its device-level
// hw_counters, its netdevs' dev_port, lists its ports and reads every port
// attribute and every file in counters/ and hw_counters/, with read and no
// parsing.
func rawRead(sys string, read func(string) (int, error)) (rawStats, error) {
	class := sys + "/" + infiniband.ClassDir
	entries, err := os.ReadDir(class)
	if err != nil {
		return rawStats{}, err
	}
	stats := make([]rawStats, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { stats[i], errs[i] = rawDevice(class+"/"+e.Name(), read) })
	}
	wg.Wait()
	var total rawStats
	for i, s := range stats {
		if errs[i] != nil {
			return total, errs[i]
		}
		total.devices++
		total.ports += s.ports
		total.files += s.files
		total.bytes += s.bytes
	}
	return total, nil
}

func rawDevice(dir string, readFile func(string) (int, error)) (rawStats, error) {
	var st rawStats
	read := func(name string) {
		if n, err := readFile(name); err == nil {
			st.files++
			st.bytes += n
		}
	}
	readAll := func(dir string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() {
				read(dir + "/" + e.Name())
			}
		}
	}
	if link, err := os.Readlink(dir + "/device"); err == nil {
		st.bytes += len(path.Base(link))
	}
	for _, a := range rawDeviceAttrs {
		read(dir + "/" + a)
	}
	readAll(dir + "/hw_counters")
	if nets, err := os.ReadDir(dir + "/device/net"); err == nil {
		for _, n := range nets {
			read(dir + "/device/net/" + n.Name() + "/dev_port")
		}
	}
	ports, err := os.ReadDir(dir + "/ports")
	if err != nil {
		return st, err
	}
	for _, p := range ports {
		pd := dir + "/ports/" + p.Name()
		for _, a := range rawPortAttrs {
			read(pd + "/" + a)
		}
		readAll(pd + "/counters")
		readAll(pd + "/hw_counters")
		st.ports++
	}
	return st, nil
}

// osReadFile reads name with os.ReadFile and returns how many bytes it read.
func osReadFile(name string) (int, error) {
	b, err := os.ReadFile(name)
	return len(b), err
}
