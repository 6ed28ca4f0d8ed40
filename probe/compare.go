// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdma-doctor/rdma_doctor/probe/control"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
	"github.com/rdma-doctor/rdma_doctor/probe/tcpprobe"
)

// Transport is one row of the comparison.
type Transport struct {
	// Name is RDMA, IPoIB or Ethernet.
	Name string `json:"transport"`
	// Path says what was measured: the HCA or the responder address.
	Path string `json:"path"`
	// LatencySeconds is the typical one-way latency (perftest t_typical,
	// or half the TCP round trip's median).
	LatencySeconds float64 `json:"latency_seconds,omitempty"`
	BytesPerSecond float64 `json:"bandwidth_bytes_per_second,omitempty"`
	// SenderCPU and ReceiverCPU are the two ends' CPU use during the
	// bandwidth run, in percent of one core.
	SenderCPU   float64 `json:"sender_cpu_percent,omitempty"`
	ReceiverCPU float64 `json:"receiver_cpu_percent,omitempty"`
	// Errors are the failures of its latency and bandwidth runs.
	Errors []string `json:"errors,omitempty"`
}

// Comparison is the guide's §7 table from live measurements.
type Comparison struct {
	Peer       string      `json:"peer"`
	Transports []Transport `json:"transports"`
}

// CompareSettings are the runs of a comparison.
type CompareSettings struct {
	// RDMA latency and bandwidth tests (ib_send_lat and ib_write_bw, as
	// the guide measures).
	LatencyTest, BandwidthTest perftest.Test
	// TCP probe requests.
	TCPLatency, TCPBandwidth control.Request
}

// DefaultCompareSettings follow the guide: ib_send_lat, ib_write_bw; TCP
// with 64-byte pings and 128 KiB blocks.
func DefaultCompareSettings() CompareSettings {
	return CompareSettings{
		LatencyTest:   perftest.SendLat,
		BandwidthTest: perftest.WriteBW,
		TCPLatency:    control.Request{Test: "tcp_lat", Size: tcpprobe.DefaultLatencySize, Iterations: tcpprobe.DefaultIterations},
		TCPBandwidth:  control.Request{Test: "tcp_bw", Size: tcpprobe.DefaultBandwidthSize, Duration: tcpprobe.DefaultDuration},
	}
}

// Compare measures t over RDMA (perftest through its responder) and over
// TCP to its IPoIB and Ethernet addresses (the TCP probe through the same
// responder). A transport without an address is left out; a failing run
// is reported in its row.
func (p *Prober) Compare(ctx context.Context, t *Target, s CompareSettings) Comparison {
	c := Comparison{Peer: t.Name}
	rdma := Transport{Name: "RDMA", Path: t.Device + " -> " + t.Name}
	if r := p.Run(ctx, t, s.LatencyTest); r.Success {
		rdma.LatencySeconds = r.Latency.Typical
	} else {
		rdma.Errors = append(rdma.Errors, string(s.LatencyTest)+": "+r.Error)
	}
	if r := p.Run(ctx, t, s.BandwidthTest); r.Success {
		rdma.BytesPerSecond = r.Bandwidth.Average
		if r.Duration > 0 {
			rdma.SenderCPU = 100 * r.ClientCPU.Seconds() / r.Duration.Seconds()
			rdma.ReceiverCPU = 100 * r.ServerCPU.Seconds() / r.Duration.Seconds()
		}
	} else {
		rdma.Errors = append(rdma.Errors, string(s.BandwidthTest)+": "+r.Error)
	}
	c.Transports = append(c.Transports, rdma)
	for _, tr := range []struct{ name, addr string }{{"IPoIB", t.IPoIBAddress}, {"Ethernet", t.EthernetAddress}} {
		if tr.addr == "" {
			continue
		}
		c.Transports = append(c.Transports, p.compareTCP(ctx, tr.name, tr.addr, s))
	}
	return c
}

func (p *Prober) compareTCP(ctx context.Context, name, addr string, s CompareSettings) Transport {
	row := Transport{Name: name, Path: addr}
	if p.Client == nil {
		row.Errors = append(row.Errors, "no probe.secret_file configured")
		return row
	}
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if r, err := p.Client.TCP(runCtx, addr, s.TCPLatency); err != nil {
		row.Errors = append(row.Errors, "tcp_lat: "+err.Error())
	} else {
		row.LatencySeconds = r.Latency.Typical
	}
	if r, err := p.Client.TCP(runCtx, addr, s.TCPBandwidth); err != nil {
		row.Errors = append(row.Errors, "tcp_bw: "+err.Error())
	} else {
		row.BytesPerSecond = r.Bandwidth.BytesPerSecond
		row.SenderCPU, row.ReceiverCPU = r.Bandwidth.CPU.ClientPercent, r.Bandwidth.CPU.ServerPercent
	}
	return row
}

// WriteTable prints the comparison as the guide's §7 table.
func (c Comparison) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Transport comparison with %s (the guide's §7 field result: Ethernet 45 µs / 10 Gb/s / 35 %% CPU,\n"+
		"IPoIB 12 µs / 56 Gb/s / 18 %%, RDMA 1.2 µs / 98 Gb/s / 1 %%)\n\n", c.Peer)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSPORT\tPATH\tLATENCY\tBANDWIDTH\tCPU SEND\tCPU RECV\t")
	for _, t := range c.Transports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", t.Name, t.Path,
			orDash(t.LatencySeconds > 0, FormatSeconds(t.LatencySeconds)),
			orDash(t.BytesPerSecond > 0, FormatRate(t.BytesPerSecond)),
			orDash(t.BytesPerSecond > 0, fmt.Sprintf("%.0f %%", t.SenderCPU)),
			orDash(t.BytesPerSecond > 0, fmt.Sprintf("%.0f %%", t.ReceiverCPU)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	for _, t := range c.Transports {
		for _, e := range t.Errors {
			notes = append(notes, fmt.Sprintf("  %s: %s", t.Name, e))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nFailed runs:\n%s\n", strings.Join(notes, "\n"))
	}
	fmt.Fprintln(w, "\nLatency is one way (typical). CPU is each end's CPU time during the bandwidth run, in % of one core;\n"+
		"perftest busy-polls a core on both ends, so RDMA shows about 100 % here where an application using\n"+
		"completion events would not.")
	return nil
}

func orDash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

// FormatSeconds prints a latency in µs or ms.
func FormatSeconds(s float64) string {
	switch {
	case s < 1e-3:
		return fmt.Sprintf("%.2f µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.2f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

// FormatRate prints bytes per second as Gb/s or Mb/s, as perftest and the
// guide do.
func FormatRate(bps float64) string {
	bits := bps * 8
	if bits >= 1e9 {
		return fmt.Sprintf("%.2f Gb/s", bits/1e9)
	}
	return fmt.Sprintf("%.1f Mb/s", bits/1e6)
}
