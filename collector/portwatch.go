// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/portwatch"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// portwatchCollector exports the port state sampler's history: what a
// scrape every 15 s cannot see of a port that flaps between two scrapes.
type portwatchCollector struct {
	transitions, downSeconds, changed *expo.Desc
	rounds, busy                      *expo.Desc
}

func portwatchSpec() Spec {
	return Spec{Name: "portwatch", Default: true,
		Help: "port states read by the server at each scrape, at each link notification of the live kernel and from link_downed (every --collector.portwatch.interval too when set): transitions, time down, flaps between two scrapes",
		Flags: func(app *kingpin.Application, f *Flags) {
			app.Flag("collector.portwatch.interval",
				"Interval of port state rounds nobody asked for (three reads per port: state, phys_state, link_downed); 0, the default, runs rounds at each scrape and link notification only, so an idle host costs no wake-ups (see docs/device-health.md for the flaps each way catches).").
				Default("0s").DurationVar(&f.Portwatch.Interval)
		},
		New: func(env Env, _ *Flags) (Collector, error) { return NewPortwatchCollector(env), nil }}
}

// PortwatchOptions are the portwatch collector's flags.
type PortwatchOptions struct {
	// Interval is the port state sampler's period, 0 for none (rounds
	// on demand only).
	Interval time.Duration
}

// NewPortwatchCollector builds the portwatch collector; the sampler is the
// host's (Host.PortWorker), run by the server's worker group.
func NewPortwatchCollector(Env) Collector {
	pl := []string{"device", "port"}
	return &portwatchCollector{
		transitions: desc("rdma_port_state_transitions_total",
			"Changes of the port's logical state seen since the exporter started, by the state entered.",
			"device", "port", "to"),
		downSeconds: desc("rdma_port_down_seconds_total",
			"Seconds the port was not ACTIVE after it had been ACTIVE once.", pl...),
		changed: desc("rdma_port_state_changed_timestamp_seconds",
			"When the port sampler last saw the port's logical state change (its first read counts).", pl...),
		rounds: desc("rdma_port_sampler_rounds_total", "Rounds of the port state sampler (each scrape, link notification and --collector.portwatch.interval)."),
		busy:   desc("rdma_port_sampler_busy_seconds_total", "Time the port state sampler spent reading, its own cost."),
	}
}

func (c *portwatchCollector) Update(_ context.Context, snap *host.Snapshot, out *sink) error {
	hs, ok := snap.PortHistory()
	if !ok {
		return nil // no sampler (a CLI snapshot): nothing to say
	}
	w := snap.Host().PortWatcher()
	rounds, busy := w.Cost()
	counter(out, c.rounds, float64(rounds))
	counter(out, c.busy, busy.Seconds())
	for _, h := range hs {
		if h.Changed.IsZero() {
			continue // not read yet, or unreadable: absent, not 0
		}
		port := strconv.Itoa(h.Port)
		// down and active always, 0 included, so increase() sees the
		// first flap; the other states once entered (a bounded set).
		for _, to := range portwatch.StateLabels {
			if n := h.Transitions[to]; n > 0 || to == "down" || to == "active" {
				counter(out, c.transitions, float64(n), h.Device, port, to)
			}
		}
		counter(out, c.downSeconds, h.DownSeconds, h.Device, port)
		gauge(out, c.changed, float64(h.Changed.UnixNano())/1e9, h.Device, port)
	}
	return nil
}
