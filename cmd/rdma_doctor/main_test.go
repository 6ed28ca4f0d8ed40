// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// Flag values that used to panic the mux or fail every collector stop
// start-up with a one-line error.
func TestCheckServeFlags(t *testing.T) {
	for _, tc := range []struct {
		path    string
		timeout time.Duration
		max     int
		ok      bool
	}{
		{"/metrics", 10 * time.Second, 40, true},
		{"/", 10 * time.Second, 0, true},
		{"", 10 * time.Second, 40, false},
		{"diagnose", 10 * time.Second, 40, false},
		{"/diagnose", 10 * time.Second, 40, false},
		{"/probe", 10 * time.Second, 40, false},
		{"/metrics", 0, 40, false},
		{"/metrics", -time.Second, 40, false},
		{"/metrics", time.Second, -1, false},
	} {
		if err := checkServeFlags(tc.path, tc.timeout, tc.max); (err == nil) != tc.ok {
			t.Errorf("%q %v %d: %v", tc.path, tc.timeout, tc.max, err)
		}
	}
}

// The host's background sources follow the collector flags, typed once:
// sminfo runs unless --no-collector.sm, the fabric scan only with
// --collector.fabric, its sweep unless --no-collector.fabric.counters,
// and a bad shard stops start-up.
func TestHostOptionsBackground(t *testing.T) {
	paths, err := hostfs.Paths{Rootfs: "../../fixtures/hosts/numa-remote"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (host.Options, error) {
		app := kingpin.New("test", "")
		f := collector.AddFlags(app)
		if _, err := app.Parse(args); err != nil {
			t.Fatal(err)
		}
		return hostOptions(paths, host.LiveOff, &config.Config{}, f)
	}
	o, err := parse()
	if err != nil || o.SM == nil || o.SM.SminfoPath != "sminfo" || o.SM.Interval != time.Minute || o.Fabric != nil {
		t.Errorf("defaults: SM %+v, Fabric %+v (err %v); want sminfo every 1m, no fabric", o.SM, o.Fabric, err)
	}
	if o, _ := parse("--no-collector.sm"); o.SM != nil {
		t.Errorf("--no-collector.sm: SM %+v, want none", o.SM)
	}
	o, err = parse("--collector.fabric", "--collector.fabric.shard=1/3", "--collector.fabric.ca=mlx5_1")
	if err != nil || o.Fabric == nil || !o.Fabric.Counters || o.Fabric.Shard != 1 || o.Fabric.Shards != 3 || o.Fabric.CA != "mlx5_1" {
		t.Errorf("--collector.fabric: %+v (err %v), want the sweep of shard 1/3 from mlx5_1", o.Fabric, err)
	}
	if o, _ := parse("--collector.fabric", "--no-collector.fabric.counters"); o.Fabric == nil || o.Fabric.Counters {
		t.Errorf("--no-collector.fabric.counters: %+v, want the scan without the sweep", o.Fabric)
	}
	if _, err := parse("--collector.fabric", "--collector.fabric.shard=3/3"); err == nil {
		t.Error("shard 3/3 accepted")
	}
}
