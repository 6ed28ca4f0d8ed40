// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package sbsresult is the results files of tools/sidebyside and
// tools/wakeups, which tools/perfreport turns into docs/performance.md:
// the one declaration of each schema, written by the one and read by the
// other.
package sbsresult

// Results is one side-by-side run.
type Results struct {
	Date         string  `json:"date"`
	Command      string  `json:"command"`
	Machine      Machine `json:"machine"`
	RDMADoctor   string  `json:"rdma_doctor"`
	NodeExporter string  `json:"node_exporter"`
	// Yuuki is yuuki/rdma_exporter's version line, when it was measured
	// (its binary given: it is not on the Go module proxy).
	Yuuki      string   `json:"yuuki_rdma_exporter,omitempty"`
	Skipped    []string `json:"skipped"`
	Scrapes    int      `json:"scrapes"`
	Warmup     int      `json:"warmup"`
	Repeats    int      `json:"repeats"`
	RSSAfter   int      `json:"rss_after"`
	SlowDelays string   `json:"slow_delays"`
	SlowGap    string   `json:"slow_gap"`
	Runs       []Run    `json:"runs"`
	Memory     []Memory `json:"memory,omitempty"`
}

// Memory is where one exporter's resident memory lies, read from
// /proc/PID/status after Scrapes scrapes of Host.
type Memory struct {
	Name string `json:"name"`
	Host string `json:"host"`
	// LoadBytes is the size of the binary's loadable ELF segments: what
	// it can map from its file at most.
	LoadBytes uint64 `json:"load_bytes"`
	RSS       uint64 `json:"rss"`
	Anon      uint64 `json:"rss_anon"`
	File      uint64 `json:"rss_file"`
	Scrapes   int    `json:"scrapes"`
	// OpenFiles is the files the exporter holds open after the scrapes
	// (its /proc/PID/fd entries that are files: not sockets, pipes,
	// anonymous inodes or devices), such as rdma_doctor's kept
	// descriptors. On sysfs each pins kernel memory that VmRSS does not
	// show (hostfs.MaxKept, docs/measurements.md#hostfs).
	OpenFiles int `json:"open_files"`
}

// Machine is where it ran.
type Machine struct {
	NProc  int    `json:"nproc"`
	Kernel string `json:"kernel"`
	CPU    string `json:"cpu"`
	Go     string `json:"go"`
}

// Stats is one contender over one repeat.
type Stats struct {
	MedianNS int64 `json:"median_ns"`
	P90NS    int64 `json:"p90_ns"`
	// CPUNS is CPU time per scrape: utime+stime from /proc/PID/stat over the
	// repeat divided by its scrapes (the floor: the harness's getrusage
	// over its reads alone).
	CPUNS int64 `json:"cpu_ns"`
}

// Repeat is one repeat of the interleaved loop.
type Repeat struct {
	RD    Stats `json:"rdma_doctor"`
	NE    Stats `json:"node_exporter"`
	Floor Stats `json:"floor"`
	// PreadFloor and HTTPFloor are the floors of what rdma_doctor does
	// per scrape, timed in the same loop on the page cache (nil on the
	// slow sysfs): one pread at offset 0 of each floor file on a kept
	// descriptor, and tools/bareexporter serving rdma_doctor's own
	// exposition over net/http, gzip-compressed per request, without
	// making it.
	PreadFloor *Stats `json:"pread_floor,omitempty"`
	HTTPFloor  *Stats `json:"http_floor,omitempty"`
	// Yuuki is yuuki/rdma_exporter with its defaults on the same tree,
	// in the same loop (nil when not measured).
	Yuuki *Stats `json:"yuuki_rdma_exporter,omitempty"`
}

// Run is one host, one rdma_doctor configuration, page cache or slow
// sysfs.
type Run struct {
	Host         string   `json:"host"`
	Devices      int      `json:"devices"`
	Ports        int      `json:"ports"`
	FloorFiles   int      `json:"floor_files"`
	Config       string   `json:"config"`
	Slow         bool     `json:"slow"`
	Repeats      []Repeat `json:"repeats"`
	RSSRD        uint64   `json:"rss_rdma_doctor"`
	RSSNE        uint64   `json:"rss_node_exporter"`
	RSSYuuki     uint64   `json:"rss_yuuki_rdma_exporter,omitempty"`
	RSSScrapes   int      `json:"rss_scrapes"`
	SamplesRD    int      `json:"samples_rdma_doctor"`
	SamplesNE    int      `json:"samples_node_exporter"`
	SamplesYuuki int      `json:"samples_yuuki_rdma_exporter,omitempty"`
	// GzipYuuki is whether yuuki/rdma_exporter answered the scrape's
	// Accept-Encoding: gzip with gzip.
	GzipYuuki   bool     `json:"gzip_yuuki_rdma_exporter,omitempty"`
	FailedRD    []string `json:"failed_rdma_doctor,omitempty"`
	FailedNE    []string `json:"failed_node_exporter,omitempty"`
	ContentType string   `json:"content_type"`
}

// Wakeup is one command's result from tools/wakeups: an idle server's
// context switches over a window.
type Wakeup struct {
	Label   string   `json:"label"`
	Command []string `json:"command"`
	// Seconds is the measured window; Switches the threads' context
	// switches in it (voluntary + nonvoluntary), Voluntary the first part.
	Seconds   float64 `json:"seconds"`
	Switches  uint64  `json:"switches"`
	Voluntary uint64  `json:"voluntary"`
	// PerSecond is Switches / Seconds.
	PerSecond float64 `json:"per_second"`
	// Threads is the number of threads at the end of the window.
	Threads int `json:"threads"`
	// Exited is the threads gone during the window, whose switches
	// after the first look are lost (a lower bound then).
	Exited int `json:"exited,omitempty"`
}
