// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kmsg

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// burst is 100,000 kernel records: mostly other drivers' lines (the
// recorded non-matching ones and generic boot noise), one in fifty a
// recorded RDMA event.
func burst(b *testing.B) []byte {
	recs := loadRecorded(b)
	noise := []string{
		"usb 2-3: current rate 16000 is different from the runtime rate 48000",
		"IPv6: ADDRCONF(NETDEV_CHANGE): enp65s0f1: link becomes ready",
		"EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
		"amdgpu 0000:0d:00.0: ring comp_1.0.0 uses VM inv eng 1 on hub 0",
		"mlx5_core 0004:01:00.0: E-Switch: Total vports 10, per vport: max uc(1024) max mc(16384)",
	}
	for _, r := range recs {
		if r.event == "-" {
			noise = append(noise, r.msg)
		}
	}
	var sb strings.Builder
	for i := 0; i < 100000; i++ {
		msg := noise[i%len(noise)]
		if i%50 == 0 {
			msg = recs[(i/50)%len(recs)].msg
		}
		fmt.Fprintf(&sb, "6,%d,%d,-;%s\n", i, i*1000, msg)
	}
	return []byte(sb.String())
}

// BenchmarkBurst feeds a 100k-record burst as a file's bytes through the
// splitter, parser, matcher and counters. Goal: 50 MB/s or more.
func BenchmarkBurst(b *testing.B) {
	data := burst(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	now := time.Now()
	for i := 0; i < b.N; i++ {
		w, err := New(Options{Path: "unused", Now: func() time.Time { return now }})
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < len(data); off += readBuf {
			w.feed(data[off:min(off+readBuf, len(data))], false)
		}
		w.flush(false)
		if r := w.Report(); r.Stats.Records != 100000 {
			b.Fatalf("%d records", r.Stats.Records)
		}
	}
}
