// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hwmon"
)

var hwmonSource = register(&Source[*hwmon.Snapshot]{name: "hwmon", read: func(ctx context.Context, s *Snapshot) (*hwmon.Snapshot, error) {
	return hwmon.Read(ctx, s.h.fs.Sys, hwmon.Options{Keep: s.h.Keep})
}})

// Temperatures are the temperature sensors of every kept RDMA device
// (internal/read/hwmon). Slow: on mlx5 every temp file read is one MTMP
// access-register command to the firmware (three per sensor: input,
// crit, highest), and NIC temperatures move over tens of seconds, so a
// reading SlowRefresh old (30 s by default) is as good as a fresh one
// and a 15 s scrape interval does not double the firmware traffic. A
// device without hwmon (kernel before 6.6, VFs, software devices) has
// no entry and no error.
func (s *Snapshot) Temperatures(ctx context.Context) (*hwmon.Snapshot, error) {
	return get(ctx, s, hwmonSource)
}

// NeedTemperatures judges a Temperatures reading.
var NeedTemperatures = cannotRead[hwmon.Snapshot]("hwmon", "the temperature sensors")
