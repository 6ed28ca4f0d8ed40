// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fakeDumpFTS is a dump_fts printing the recorded ibsim tables
// (internal/read/fabric/testdata/lft) and exiting rc.
func fakeDumpFTS(t *testing.T, rc int) string {
	t.Helper()
	rec, err := filepath.Abs("../internal/read/fabric/testdata/lft/dump_fts.stdout")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dump_fts")
	script := fmt.Sprintf("#!/bin/sh\ncat %q\nexit %d\n", rec, rc)
	if rc != 0 {
		script = fmt.Sprintf("#!/bin/sh\necho 'ibwarn: [1] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1)' >&2\nexit %d\n", rc)
	}
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFabricPortRoutes: rdma_fabric_port_routes of the recorded ibsim
// tables: every port of each switch, the channel-adapter LIDs it forwards.
func TestFabricPortRoutes(t *testing.T) {
	opts := FabricOptions{}
	opts.Routes, opts.DumpFTSPath = true, fakeDumpFTS(t, 0)
	c := ibsimFabric(t, opts)
	got := fabricSeries(t, c, "rdma_fabric_port_routes")
	for k, want := range map[string]float64{
		"guid=0x0000000000200000,port=1": 4, // spine001 down to leaf001's four hosts
		"guid=0x0000000000200000,port=5": 0, // unplugged
		"guid=0x0000000000200005,port=1": 1, // leaf004's host0013
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	// 6 switches of 8 ports.
	if len(got) != 48 {
		t.Errorf("%d port series, want 48", len(got))
	}
	if s := fabricSeries(t, c, "rdma_fabric_routes_read_success"); s[""] != 1 {
		t.Errorf("read success %v", s)
	}
}

// TestFabricPortRoutesUnknown: a failed read leaves no route series (never
// zeros) and says so.
func TestFabricPortRoutesUnknown(t *testing.T) {
	opts := FabricOptions{}
	opts.Routes, opts.DumpFTSPath = true, fakeDumpFTS(t, 255)
	c := ibsimFabric(t, opts)
	if got := fabricSeries(t, c, "rdma_fabric_port_routes"); len(got) != 0 {
		t.Errorf("%d route series after a failed read", len(got))
	}
	if s := fabricSeries(t, c, "rdma_fabric_routes_read_success"); s[""] != 0 {
		t.Errorf("read success %v", s)
	}
	if s := fabricSeries(t, c, "rdma_fabric_routes_switches_unknown"); s[""] != 6 {
		t.Errorf("switches unknown %v", s)
	}
	if s := fabricSeries(t, c, "rdma_fabric_routes_read_failures_total"); s["reason=mad_failed"] != 1 {
		t.Errorf("failures %v", s)
	}
}

// TestFabricRoutesOff: --no-collector.fabric.routes runs no read.
func TestFabricRoutesOff(t *testing.T) {
	opts := FabricOptions{}
	opts.DumpFTSPath = fakeDumpFTS(t, 0)
	c := ibsimFabric(t, opts)
	if got := fabricSeries(t, c, "rdma_fabric_routes_reads_total"); len(got) != 0 {
		t.Errorf("routes series with the reader off: %v", got)
	}
}
