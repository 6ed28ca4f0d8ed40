// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// TestPCIPayload: the recorded CX-7s' DevCtl sizes as root reads them, and
// nothing (no series, no error) for a function whose config read returned
// the 64-byte header an unprivileged reader gets.
func TestPCIPayload(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, fixtureHosts+"hgx-h100", root)
	cfg := filepath.Join(root, "sys/class/infiniband/mlx5_1/device/config")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, b[:64], 0o644); err != nil {
		t.Fatal(err)
	}
	env := hostEnv(t, root)
	got := seriesMap(t, gatherOne(t, "pci", on(env, NewPCICollector(env))))
	for k, v := range map[string]string{
		`rdma_device_pcie_max_payload_bytes{device="mlx5_0"}`:      "256",
		`rdma_device_pcie_max_read_request_bytes{device="mlx5_0"}`: "4096",
		`rdma_device_pcie_max_payload_bytes{device="mlx5_9"}`:      "256",
		`rdma_device_pcie_max_read_request_bytes{device="mlx5_9"}`: "4096",
		`rdma_scrape_collector_errors{collector="pci"}`:            "0",
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %s", k, got[k], v)
		}
	}
	for _, k := range []string{`rdma_device_pcie_max_payload_bytes{device="mlx5_1"}`, `rdma_device_pcie_max_read_request_bytes{device="mlx5_1"}`} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %s without root", k, v)
		}
	}
}
