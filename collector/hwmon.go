// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hwmon"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type hwmonCollector struct {
	temp, crit, highest *expo.Desc
}

func hwmonSpec() Spec {
	return Spec{Name: "hwmon", Default: true,
		Help: "temperature sensors of each RDMA device's adapter from the kernel's hwmon class (mlx5 ASIC and module, Linux 6.6+), read on the slow interval: each read is a firmware command",
		New:  func(env Env, _ *Flags) (Collector, error) { return NewHwmonCollector(env), nil }}
}

// NewHwmonCollector builds the hwmon collector: the temperature sensors
// the kernel's hwmon class registers on each kept RDMA device's PCI
// function, from the snapshot's slow source (each read is a firmware
// command on mlx5).
func NewHwmonCollector(Env) Collector {
	l := []string{"device", "sensor"}
	return &hwmonCollector{
		temp: desc("rdma_device_temperature_celsius",
			"Temperature of a sensor of the RDMA device's adapter in degrees Celsius (hwmon: mlx5 asic, Module0).", l...),
		crit: desc("rdma_device_temperature_crit_celsius",
			"Critical temperature threshold of the sensor in degrees Celsius (hwmon temp*_crit).", l...),
		highest: desc("rdma_device_temperature_highest_celsius",
			"Highest temperature the sensor saw since the driver loaded or the history was reset (hwmon temp*_highest).", l...),
	}
}

func (c *hwmonCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	s, err := snap.Temperatures(ctx)
	if s == nil {
		return err
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		for j := range d.Sensors {
			sn := &d.Sensors[j]
			for _, v := range []struct {
				d *expo.Desc
				o hwmon.Opt[float64]
			}{{c.temp, sn.Input}, {c.crit, sn.Crit}, {c.highest, sn.Highest}} {
				if v.o.OK {
					gauge(out, v.d, v.o.V, d.Name, sn.Label)
				}
			}
		}
	}
	return errors.Join(append(s.Errors, err)...)
}
