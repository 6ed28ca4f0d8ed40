// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package probe schedules the verbs probe and keeps its results: targets
// from the config (loopback on this host, or peers whose responder starts
// the perftest server), a Prober that runs one test against one target, a
// Store of the latest, last good and last failed result per target and
// test, the Prometheus collector and the /probe Handler that export the
// store, the Scheduler that runs the rotation in the server, and Command,
// `rdma_doctor probe` (one run or the transport comparison, from the
// command line's flags).
//
// Diagnose reads the Store through Reader: every result carries the mode
// (loopback on one HCA, loopback across the cable, peer through the
// fabric), the values in base units and the port rate its bandwidth ratio
// was computed against.
package probe

import (
	"time"
)

// Mode says what path a probe measured; the guide's thresholds depend on
// it (latency < 2 µs in loopback, < 5 µs through a switch).
type Mode string

// Modes.
const (
	// ModeLoopback: server and client on the same HCA port; the traffic
	// loops inside the HCA (HCA, driver, PCIe; not the cable).
	ModeLoopback Mode = "loopback"
	// ModeLoopbackCable: two local devices or ports; the traffic crosses
	// the cable and, if cabled through one, the switch.
	ModeLoopbackCable Mode = "loopback-cable"
	// ModePeer: another host's responder ran the server.
	ModePeer Mode = "peer"
)

// Memory says where a probe's buffers were: the memory label of every
// rdma_probe_* series.
type Memory string

// Memories.
const (
	// MemoryHost: ordinary host memory (every loopback and peer target).
	MemoryHost Memory = "host"
	// MemoryGPU: a GPU's memory through GPUDirect RDMA (probe.gpu targets,
	// perftest --use_cuda).
	MemoryGPU Memory = "gpu"
)

// orHost is m, or MemoryHost when unset.
func (m Memory) orHost() Memory {
	if m == "" {
		return MemoryHost
	}
	return m
}

// GPUUse is the GPU a MemoryGPU run used and how it sits against the HCA.
type GPUUse struct {
	// Index is the GPU's place in PCI bus order (rdma_gpu_info's gpu).
	Index int `json:"index"`
	// Address is its PCI function; empty when the run failed before the
	// GPU was found.
	Address string `json:"address,omitempty"`
	// Link is the nvidia-smi relation to the HCA used (PIX, PXB, PHB,
	// NODE, SYS); empty when unknown.
	Link string `json:"link,omitempty"`
}

// Latency statistics in seconds (perftest's, halved round trips for send
// and write, full round trips for read). perftest's t_stdev is not kept:
// it has been truncated to whole microseconds since 2022.
type Latency struct {
	Min     float64 `json:"min_seconds"`
	Typical float64 `json:"typical_seconds"`
	Avg     float64 `json:"avg_seconds"`
	Max     float64 `json:"max_seconds"`
	// P99 and P999 are absent (0, HasPercentiles false) in old perftest
	// output.
	P99            float64 `json:"p99_seconds"`
	P999           float64 `json:"p999_seconds"`
	HasPercentiles bool    `json:"has_percentiles"`
}

// Bandwidth in bytes per second.
type Bandwidth struct {
	// Peak is 0 with PeakMeasured false when perftest did not compute it
	// (duration mode, more than 20000 iterations).
	Peak              float64 `json:"peak_bytes_per_second"`
	PeakMeasured      bool    `json:"peak_measured"`
	Average           float64 `json:"average_bytes_per_second"`
	MessagesPerSecond float64 `json:"messages_per_second,omitempty"`
}

// Result is one probe run.
type Result struct {
	// Peer is the target's name, the peer label of the metrics
	// ("loopback", "loopback:mlx5_1/1", a peer's name).
	Peer string `json:"peer"`
	Test string `json:"test"`
	Mode Mode   `json:"mode"`
	// Device and Port are the local HCA port (the client's).
	Device string `json:"device"`
	Port   int    `json:"port"`
	// PeerDevice and PeerPort are the other side's: the second local
	// port of a loopback, or the peer's device.
	PeerDevice string `json:"peer_device,omitempty"`
	PeerPort   int    `json:"peer_port,omitempty"`
	// Memory is where the buffers were; GPU is set for MemoryGPU.
	Memory Memory  `json:"memory"`
	GPU    *GPUUse `json:"gpu,omitempty"`

	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration_ns"`
	Success  bool          `json:"success"`
	// ErrorKind is a perftest.ErrorKind ("retry_exceeded", "no_device",
	// ...) or a responder refusal ("unauthorized", "busy", ...).
	ErrorKind string `json:"error_kind,omitempty"`
	Error     string `json:"error,omitempty"`

	// Size and Iterations are of the result row.
	Size       int64      `json:"size,omitempty"`
	Iterations int64      `json:"iterations,omitempty"`
	Latency    *Latency   `json:"latency,omitempty"`
	Bandwidth  *Bandwidth `json:"bandwidth,omitempty"`
	// PortRate is the local port's active rate in bytes per second when
	// the probe ran (sysfs ports/N/rate); 0 when unknown.
	PortRate float64 `json:"port_rate_bytes_per_second,omitempty"`
	// ClientCPU and ServerCPU are the CPU time (user + system) of the two
	// perftest processes. Both busy-poll a core for the whole run.
	ClientCPU time.Duration `json:"client_cpu_ns,omitempty"`
	ServerCPU time.Duration `json:"server_cpu_ns,omitempty"`
	// Notes are warnings perftest printed (CPU frequency, peak not
	// measured).
	Notes []string `json:"notes,omitempty"`
}

// End is when the run finished.
func (r *Result) End() time.Time { return r.Start.Add(r.Duration) }

// BandwidthRatio is the average bandwidth over the port rate: the guide's
// "≥ 90 % of nominal". ok is false without a bandwidth or a known rate.
func (r *Result) BandwidthRatio() (ratio float64, ok bool) {
	if r.Bandwidth == nil || r.PortRate <= 0 {
		return 0, false
	}
	return r.Bandwidth.Average / r.PortRate, true
}
