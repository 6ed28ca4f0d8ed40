// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package names

import "testing"

func TestDevice(t *testing.T) {
	for s, want := range map[string]bool{"mlx5_0": true, "mlx5_bond_0": true, "rocep1s0f1": true, "siw_eth0": true,
		"-i": false, "": false, "mlx5 0": false, "a;b": false} {
		if got := Device(s); got != want {
			t.Errorf("Device(%q) = %v", s, got)
		}
	}
}

func TestHost(t *testing.T) {
	for h, ok := range map[string]bool{"10.0.0.1": true, "fe80::1": true, "node-01.cluster.example": true, "node01.": true,
		"": false, "-oProxyCommand=x": false, "a..b": false, "host_name": false, "a b": false} {
		if err := Host(h); (err == nil) != ok {
			t.Errorf("Host(%q) = %v", h, err)
		}
	}
}
