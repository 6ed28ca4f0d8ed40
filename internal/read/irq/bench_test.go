// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package irq

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// BenchmarkParseInterrupts parses a generated /proc/interrupts of 512 CPUs
// and 4096 IRQs (about 23 MB of text, two million count fields), the size
// the issue asks for. MB/s is over the file's bytes.
func BenchmarkParseInterrupts(b *testing.B) {
	for _, size := range []struct {
		name       string
		cpus, irqs int
	}{
		{"512cpu-4096irq", 512, 4096},
		{"224cpu-186irq-dgx", 224, 186},
	} {
		b.Run(size.name, func(b *testing.B) {
			data := generateInterrupts(size.cpus, size.irqs)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				in, err := ParseInterrupts(data)
				if err != nil || len(in.IRQs) != size.irqs {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadInterrupts streams the same generated files from disk as
// Read does: a line at a time through hostfs.ReadLines, keeping only the
// IRQs of two RDMA functions (128 of them) and their totals. Its bytes/op
// is what reading the host costs in memory, against the file's size in
// MB/s; ParseInterrupts above is the parse alone, keeping everything.
func BenchmarkReadInterrupts(b *testing.B) {
	for _, size := range []struct {
		name       string
		cpus, irqs int
	}{
		{"512cpu-4096irq", 512, 4096},
		{"224cpu-186irq-dgx", 224, 186},
	} {
		b.Run(size.name, func(b *testing.B) {
			dir := b.TempDir()
			data := generateInterrupts(size.cpus, size.irqs)
			if err := os.WriteFile(filepath.Join(dir, "interrupts"), data, 0o644); err != nil {
				b.Fatal(err)
			}
			proc := hostfs.Dir(dir)
			keep := func(q *IRQ) bool {
				a := Classify(q.Name).Address
				return a == "0000:1a:00.0" || a == "0000:1a:00.1"
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				in, err := ReadInterrupts(context.Background(), proc, &Scanner{Keep: keep})
				if err != nil || in.Rows != size.irqs {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead is the whole snapshot on the DGX fixture host: PCI
// functions, /proc/interrupts, 170 IRQs' affinity files, the process scan.
func BenchmarkRead(b *testing.B) {
	host := fixtureHost(b, "dgx-h100")
	b.ReportAllocs()
	for b.Loop() {
		s, err := Read(context.Background(), host, nil)
		if err != nil || len(s.Errors) > 0 {
			b.Fatal(err, s.Errors)
		}
	}
}
