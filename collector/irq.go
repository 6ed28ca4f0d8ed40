// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/irq"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type irqCollector struct {
	perIRQ bool

	irqs, offNode, cpus, irqbalance *expo.Desc
	irqInfo, irqTotal, irqOffNode   *expo.Desc

	// out is the samples of the last placement (a slow source).
	out rendered[*irq.Snapshot]
}

func irqSpec() Spec {
	return Spec{Name: "irq", Default: true,
		Help: "completion IRQs of each RDMA device, where they may and do run against the device's NUMA-local CPUs, and whether irqbalance runs",
		Flags: func(app *kingpin.Application, f *Flags) {
			app.Flag("collector.irq.per-irq",
				"Also export one series per RDMA IRQ (rdma_device_irq_info, rdma_device_irq_interrupts_total, rdma_device_irq_off_node): tens to hundreds per device.").BoolVar(&f.IRQ.PerIRQ)
		},
		New: func(env Env, f *Flags) (Collector, error) { return NewIRQCollector(env, f.IRQ.PerIRQ), nil }}
}

// IRQOptions are the irq collector's flags.
type IRQOptions struct {
	// PerIRQ adds one series per RDMA IRQ.
	PerIRQ bool
}

// NewIRQCollector builds the irq collector; perIRQ adds the per-IRQ series.
// It is a thin layer over irq.Read, whose snapshot the placement checks
// judge the same way.
func NewIRQCollector(_ Env, perIRQ bool) Collector {
	dl := []string{"device"}
	il := []string{"device", "irq"}
	return &irqCollector{
		perIRQ: perIRQ,
		irqs:   desc("rdma_device_irqs", "Completion IRQs of the RDMA device's PCI function in /proc/interrupts.", dl...),
		offNode: desc("rdma_device_irqs_off_node",
			"Completion IRQs allowed (smp_affinity_list) on at least one CPU outside the device's local_cpulist.", dl...),
		cpus: desc("rdma_device_irq_cpus",
			"Distinct CPUs the device's completion IRQs are delivered to; 1 means all on one CPU.", dl...),
		irqbalance: desc("rdma_host_irqbalance_running",
			"1 when an irqbalance process runs in this PID namespace (it rewrites IRQ affinity, undoing manual pinning)."),
		irqInfo: desc("rdma_device_irq_info", "One RDMA IRQ: action name, kind (completion, control, subfunction, other) and affinity lists; always 1.",
			[]string{"device", "irq", "name", "kind", "smp_affinity_list", "effective_affinity_list"}...),
		irqTotal: desc("rdma_device_irq_interrupts_total", "Interrupts of one RDMA IRQ, summed over the online CPUs.", il...),
		irqOffNode: desc("rdma_device_irq_off_node",
			"1 when the IRQ is allowed on a CPU outside the device's local_cpulist.", il...),
	}
}

func (c *irqCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	// The PCI functions are the pci collector's read: one source.
	s, err := snap.Placement(ctx)
	if err != nil {
		if errors.Is(err, infiniband.ErrNoClass) {
			return nil
		}
		if s == nil {
			return err
		}
	}
	rerr := c.out.append(out, s, err, func(out *sink) error {
		for i := range s.Devices {
			d := &s.Devices[i]
			if n, ok := d.CompletionCount(); ok {
				gauge(out, c.irqs, float64(n), d.Name)
			}
			if n, ok := d.OffNode(); ok {
				gauge(out, c.offNode, float64(n), d.Name)
			}
			if used, ok := d.CPUsUsed(); ok {
				gauge(out, c.cpus, float64(used.Len()), d.Name)
			}
			if c.perIRQ {
				c.each(out, d)
			}
		}
		if s.Irqbalance.OK {
			gauge(out, c.irqbalance, b2f(len(s.Irqbalance.V) > 0))
		}
		return errors.Join(s.Errors...)
	})
	return errors.Join(rerr, err)
}

func (c *irqCollector) each(out *sink, d *irq.Device) {
	for k := range d.IRQs {
		q := &d.IRQs[k]
		num := strconv.Itoa(q.Number)
		var aff, eff string
		if q.Affinity.OK {
			aff = q.Affinity.V.String()
		}
		if q.Effective.OK {
			eff = q.Effective.V.String()
		}
		gauge(out, c.irqInfo, 1, d.Name, num, q.Name, q.Vector.Kind.String(), aff, eff)
		counter(out, c.irqTotal, float64(q.Total), d.Name, num)
		if off, ok := d.IRQOffNode(q); ok {
			gauge(out, c.irqOffNode, b2f(off), d.Name, num)
		}
	}
}
