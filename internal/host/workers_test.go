// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/worker"
)

// The port sampler and the kernel log reader are workers: pending until
// their first round, then healthy; the kernel log reader is failing where
// it cannot read the log (here absent), since what it would report is
// unknown. Both return when their context ends.
func TestWatchWorkers(t *testing.T) {
	// A record of internal/read/kmsg's testdata/recorded.txt.
	withLog := newTestHost(t, map[string]string{"dev/kmsg": "6,100,18865848172,-;mlx5_core 0000:3b:00.0 enp1s0f0np0: Link down\n"})
	without := newTestHost(t, map[string]string{"proc/stat": "btime 1767225600\n"})
	for _, c := range []struct {
		name string
		h    *Host
		kmsg string
	}{{"log", withLog, ""}, {"no log", without, worker.Failing}} {
		pw, err := c.h.PortWorker(context.Background(), 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		kw, err := c.h.KernelLogWorker(nil, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if st := kw.Status(); st.Problem != worker.FirstRoundPending {
			t.Errorf("%s: kmsg %+v before its first round, want pending", c.name, st)
		}
		g, err := worker.NewGroup(nil, pw, kw)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		g.Start(ctx)
		<-c.h.ports.first
		<-c.h.kernelLog.first
		if st := pw.Status(); st != (worker.Status{}) {
			t.Errorf("%s: portwatch %+v after its first round, want healthy without an age", c.name, st)
		}
		if st := kw.Status(); st.Problem != c.kmsg {
			t.Errorf("%s: kmsg %+v, want problem %q", c.name, st, c.kmsg)
		}
		cancel()
		if !g.Wait(time.Minute) {
			t.Fatalf("%s: the watchers still run a minute after their context ended", c.name)
		}
	}
}
