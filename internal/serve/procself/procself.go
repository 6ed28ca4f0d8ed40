// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package procself is a shim: the exporter's own process_* series as
// client_golang's process collector (collectors.NewProcessCollector)
// exports them on Linux, the same names, help, types and values
// (TestSameAsClientGolang), read for less. It is the one hand-written
// replacement of a client_golang collector left; go_* and promhttp_*
// are the library's own (internal/serve/scrape).
//
// Why it exists: every collection, the library's collector takes the
// process start time from procfs's ProcStat.StartTime, which parses
// /proc/stat whole for its btime line (on a large host the kernel sums
// every IRQ over every CPU to print that file), reads /proc/self/limits,
// and opens, reads and closes /proc/self/stat and /proc/self/net/netstat
// (client_golang v1.25.0, procfs v0.22.0): a large part of a scrape's CPU
// for values that do not change (docs/measurements.md#procself;
// BenchmarkCollect measures one gather of each). Here the start time is
// computed once (it does not change), the limits come from getrlimit, and
// stat and netstat are kept open and re-read in place (hostfs.Attr).
//
// Upstream: reading the start time once and keeping it was proposed in
// https://github.com/prometheus/client_golang/issues/289 (closed; the
// collector still reads /proc/stat on every collection). Delete this
// package for collectors.NewProcessCollector when that changes.
//
// These files are the exporter's own process's, not the host's: they are
// read below the real /proc whatever --path.procfs says, as client_golang
// reads them; this package is the one place that does.
package procself

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// procRoot is the exporter's own /proc (see the package comment).
const procRoot = "/proc"

// userHZ is the clock tick of /proc/PID/stat's times, as procfs assumes.
const userHZ = 100

// Collector is a prometheus.Collector of the process_* metrics.
type Collector struct {
	proc          hostfs.FS
	stat, netstat *hostfs.Attr

	cpu, openFDs, maxFDs, vsize, maxVsize, rss, start, in, out *expo.Desc

	mu  sync.Mutex
	buf []byte
	// startTime is the process start in seconds since the epoch, from
	// the first stat read that had it (0: not yet).
	startTime float64
}

// New returns the collector. Nothing is read yet.
func New() *Collector {
	proc := hostfs.Dir(procRoot)
	d := func(name, help string) *expo.Desc { return expo.NewDesc(name, help) }
	return &Collector{
		proc: proc,
		stat: hostfs.NewAttr(proc, "self/stat"),
		// One record (proc_create_net_single): it comes whole in one
		// read that the buffer holds, and reading on to end of file would
		// have the kernel print it all again for the empty answer.
		netstat:  hostfs.NewAttr(proc, "self/net/netstat"),
		cpu:      d("process_cpu_seconds_total", "Total user and system CPU time spent in seconds."),
		openFDs:  d("process_open_fds", "Number of open file descriptors."),
		maxFDs:   d("process_max_fds", "Maximum number of open file descriptors."),
		vsize:    d("process_virtual_memory_bytes", "Virtual memory size in bytes."),
		maxVsize: d("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes."),
		rss:      d("process_resident_memory_bytes", "Resident memory size in bytes."),
		start:    d("process_start_time_seconds", "Start time of the process since unix epoch in seconds."),
		in:       d("process_network_receive_bytes_total", "Number of bytes received by the process over the network."),
		out:      d("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network."),
		buf:      make([]byte, 0, 4096),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*expo.Desc{c.cpu, c.openFDs, c.maxFDs, c.vsize, c.maxVsize, c.rss, c.start, c.in, c.out} {
		ch <- d.Prometheus()
	}
}

// Collect implements prometheus.Collector. A value that cannot be read is
// left out, as client_golang's collector (without ReportErrors) does. The
// metrics are expo samples: the text path writes them directly.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.AppendMetrics(nil) {
		ch <- m
	}
}

// AppendMetrics appends what Collect sends to out: the metrics handler
// takes them as a slice, without a goroutine and a channel per scrape.
func (c *Collector) AppendMetrics(out []prometheus.Metric) []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	gauge := func(d *expo.Desc, v float64) { out = append(out, expo.Gauge(d, v)) }
	if b, err := c.stat.Read(c.buf); err == nil {
		c.buf = b[:0]
		if st, err := ParseStat(b); err == nil {
			out = append(out, expo.Counter(c.cpu, float64(st.UTime+st.STime)/userHZ))
			gauge(c.vsize, float64(st.VSize))
			gauge(c.rss, float64(st.RSS*int64(os.Getpagesize())))
			if c.startTime == 0 {
				if boot, err := bootTime(c.proc); err == nil {
					c.startTime = float64(boot) + float64(st.StartTime)/userHZ
				}
			}
			if c.startTime != 0 {
				gauge(c.start, c.startTime)
			}
		}
	}
	if n, err := openFDs(); err == nil {
		gauge(c.openFDs, float64(n))
	}
	var nofile, as syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile) == nil && syscall.Getrlimit(syscall.RLIMIT_AS, &as) == nil {
		gauge(c.maxFDs, float64(nofile.Cur))
		gauge(c.maxVsize, float64(as.Cur))
	}
	if b, err := c.netstat.Read(c.buf); err == nil {
		c.buf = b[:0]
		if in, sent, err := ParseNetstat(b); err == nil {
			out = append(out, expo.Counter(c.in, in), expo.Counter(c.out, sent))
		}
	}
	return out
}

// Stat is what the collector takes from /proc/PID/stat: CPU times and
// start in clock ticks, virtual size in bytes, resident size in pages.
type Stat struct {
	UTime, STime, StartTime uint64
	VSize                   uint64
	RSS                     int64
}

// ParseStat parses /proc/PID/stat. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses: the fields
// after it start after the last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("stat: no ')' after the command name")
	}
	// fields[0] is field 3 of proc(5) (state).
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 22 {
		return Stat{}, fmt.Errorf("stat: %d fields after the command name, want at least 22", len(fields))
	}
	var st Stat
	var err error
	u := func(k int) uint64 {
		v, e := strconv.ParseUint(string(fields[k-3]), 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("stat field %d %q: %w", k, fields[k-3], e)
		}
		return v
	}
	st.UTime, st.STime, st.StartTime, st.VSize = u(14), u(15), u(22), u(23)
	rss, e := strconv.ParseInt(string(fields[24-3]), 10, 64)
	if e != nil && err == nil {
		err = fmt.Errorf("stat field 24 %q: %w", fields[24-3], e)
	}
	st.RSS = rss
	return st, err
}

// ParseNetstat returns IpExt's InOctets and OutOctets from
// /proc/PID/net/netstat (pairs of lines: "IpExt: names..." then
// "IpExt: values..."). A field the kernel does not print is 0, as
// client_golang exports it.
func ParseNetstat(b []byte) (in, out float64, err error) {
	var names [][]byte
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("IpExt:"))
		if !ok {
			continue
		}
		if names == nil {
			names = bytes.Fields(rest)
			continue
		}
		values := bytes.Fields(rest)
		if len(values) != len(names) {
			return 0, 0, fmt.Errorf("netstat: IpExt has %d names and %d values", len(names), len(values))
		}
		for k, n := range names {
			var dst *float64
			switch string(n) {
			case "InOctets":
				dst = &in
			case "OutOctets":
				dst = &out
			default:
				continue
			}
			v, err := strconv.ParseFloat(string(values[k]), 64)
			if err != nil {
				return 0, 0, fmt.Errorf("netstat: IpExt %s %q: %w", n, values[k], err)
			}
			*dst = v
		}
		return in, out, nil
	}
	return 0, 0, errors.New("netstat: no IpExt lines")
}

// bootTime reads btime from /proc/stat.
func bootTime(proc hostfs.FS) (uint64, error) {
	b, err := proc.ReadFile("stat")
	if err != nil {
		return 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, errors.New("/proc/stat: no btime line")
}

// openFDs counts the process's open descriptors: the size of
// /proc/self/fd where the kernel reports it (Linux 6.2 and later), else
// its entries.
func openFDs() (int, error) {
	p := procRoot + "/self/fd"
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err == nil && st.Size > 0 {
		return int(st.Size), nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return 0, err
	}
	return len(entries), nil
}
