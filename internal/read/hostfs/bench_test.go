// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadFile reads a small attribute the way a scrape reads
// hundreds: the cost of a read's bookkeeping shows here.
func BenchmarkReadFile(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rate"), []byte("400 Gb/sec (4X NDR)\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	f := Dir(dir)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.ReadFile("rate"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegistry is the bookkeeping of one read alone (register it as
// in flight, then as returned), less noisy than a whole read on a busy
// machine.
func BenchmarkRegistry(b *testing.B) {
	r := newRegistry()
	p := "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data"
	b.ReportAllocs()
	for b.Loop() {
		start, err := r.begin("read", p)
		if err != nil {
			b.Fatal(err)
		}
		r.end(p, start)
	}
}

// BenchmarkAttrRead re-reads a kept attribute as a scrape reads each
// counter: one pread and the Attr's own stuck-read guard.
func BenchmarkAttrRead(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "port_rcv_data"), []byte("1234567890\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	a := NewAttr(Dir(dir), "port_rcv_data")
	defer a.Close()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}
