// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/kmsg"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// kmsgCollector exports the kernel log reader's counts: what the drivers
// said about the RDMA devices, which no sysfs file shows (a firmware that
// died while the link still shows up).
type kmsgCollector struct {
	events, history                                 *expo.Desc
	reading                                         *expo.Desc
	records, bytes, lost, overruns, unparsable, ovf *expo.Desc
	evicted, duplicates, resets                     *expo.Desc
}

func kmsgSpec() Spec {
	return Spec{Name: "kmsg", Default: true,
		Help: "kernel log events of the RDMA drivers (firmware health, command timeouts, power, temperature, modules, transmit timeouts, link downs, PCIe errors) read from /dev/kmsg below --path.rootfs by the server; needs CAP_SYSLOG where kernel.dmesg_restrict=1",
		Flags: func(app *kingpin.Application, f *Flags) {
			app.Flag("collector.kmsg.interval",
				"How often the kernel log reader drains a regular file or FIFO in place of /dev/kmsg (fixture trees); the kernel's own log is waited on through the runtime's poller, not polled.").
				Default("250ms").DurationVar(&f.Kmsg.Interval)
		},
		New: func(env Env, _ *Flags) (Collector, error) { return NewKmsgCollector(env), nil }}
}

// KmsgOptions are the kmsg collector's flags.
type KmsgOptions struct {
	// Interval is how often the kernel log reader drains a regular file
	// or FIFO in place of /dev/kmsg (the kernel's log is waited on).
	Interval time.Duration
}

// NewKmsgCollector builds the kmsg collector; the reader is the host's
// (Host.KernelLogWorker), run by the server's worker group.
func NewKmsgCollector(Env) Collector {
	el := []string{"device", "event", "severity"}
	return &kmsgCollector{
		events: desc("rdma_kernel_events_total",
			"RDMA driver kernel log messages that mean trouble since the exporter started, by device, event and severity.", el...),
		history: desc("rdma_kernel_events_history",
			"The same kernel log messages found in the ring buffer when the exporter started (not counted as new events).", el...),
		reading: desc("rdma_kernel_log_reading",
			"Whether the kernel log (/dev/kmsg) is read (1) or not (0); reason says why not.", "reason"),
		records:    desc("rdma_kernel_log_records_total", "Kernel log records read, ring-buffer history included."),
		bytes:      desc("rdma_kernel_log_read_bytes_total", "Bytes of kernel log records read."),
		lost:       desc("rdma_kernel_log_lost_records_total", "Kernel log records overwritten in the ring buffer before rdma_doctor read them (gaps in the sequence numbers)."),
		overruns:   desc("rdma_kernel_log_overruns_total", "Reads of /dev/kmsg answered EPIPE: the reader fell behind the ring buffer."),
		unparsable: desc("rdma_kernel_log_unparsable_records_total", "Records or lines that are not /dev/kmsg records (left out)."),
		ovf: desc("rdma_kernel_log_unattributed_events_total",
			"Events counted under device \"\" because every slot of the bound on distinct message subjects was taken."),
		evicted: desc("rdma_kernel_log_evicted_subjects_total",
			"Message subjects that gave their slot up to a message about one of the host's RDMA devices."),
		duplicates: desc("rdma_kernel_log_duplicate_records_total",
			"Kernel log records skipped because their sequence number was read already (a reopen reads the ring buffer again)."),
		resets: desc("rdma_kernel_log_sequence_resets_total",
			"Jumps of the kernel log's sequence number that no ring buffer explains; counting goes on from the new number."),
	}
}

func (c *kmsgCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	kl, ok := snap.KernelLog(ctx)
	if !ok {
		return nil // no reader (a CLI snapshot): nothing to say
	}
	if !kl.Status.Reading {
		// Unreadable: the reason, and no event series (not zeros).
		gauge(out, c.reading, 0, kl.Status.Reason)
		return nil
	}
	gauge(out, c.reading, 1, "")
	st := kl.Stats
	counter(out, c.records, float64(st.Records))
	counter(out, c.bytes, float64(st.Bytes))
	counter(out, c.lost, float64(st.Lost))
	counter(out, c.overruns, float64(st.Overruns))
	counter(out, c.unparsable, float64(st.Unparsable))
	counter(out, c.ovf, float64(st.Overflow))
	counter(out, c.evicted, float64(st.Evicted))
	counter(out, c.duplicates, float64(st.Duplicates))
	counter(out, c.resets, float64(st.SeqResets))
	seen := map[[2]string]bool{}
	for _, e := range kl.Events {
		seen[[2]string{e.Device, e.Event.Name}] = true
		counter(out, c.events, float64(e.Live), e.Device, e.Event.Name, string(e.Event.Severity))
		if e.History > 0 {
			gauge(out, c.history, float64(e.History), e.Device, e.Event.Name, string(e.Event.Severity))
		}
	}
	// Zeros for the fatal events of every RDMA device, so an alert's
	// increase() sees the first one.
	class, _ := snap.Class(ctx)
	if class == nil {
		return nil
	}
	for i := range class.Devices {
		d := class.Devices[i].Name
		for _, ev := range kmsg.Events {
			if ev.Severity == kmsg.Fatal && !seen[[2]string{d, ev.Name}] {
				counter(out, c.events, 0, d, ev.Name, string(ev.Severity))
			}
		}
	}
	return nil
}
