// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package portwatch

import (
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// BenchmarkPortwatchRound is one sampler round on the DGX fixture (9
// ports: three preads each on kept descriptors, and every RescanEvery-th
// round the port list re-read, as the running sampler does). cpu-ns/op
// at a 1 s interval is the sampler's share of one core:
// 5e6 cpu-ns/op would be 0.5 % (docs/performance.md, issue 17's goal).
// The fixture's files are page cache; on mlx5 a state read asks the
// driver (ib_query_port), which this cannot measure.
func BenchmarkPortwatchRound(b *testing.B) {
	b.Run("dgx-h100", func(b *testing.B) {
		w := New(Options{Sys: hostfstest.Fixture(b, "dgx-h100").Sys, Window: 10 * time.Minute})
		defer w.close()
		w.Sample()
		if n := len(w.Ports()); n != 9 {
			b.Fatalf("watching %d ports of dgx-h100, want 9", n)
		}
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			w.Sample()
		}
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		for _, h := range w.Ports() {
			if h.Err != nil {
				b.Fatalf("%s/%d: %v", h.Device, h.Port, h.Err)
			}
		}
	})
}

// cpuTime is the process's user and system CPU time: on a shared machine
// wall time mostly measures the other processes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
