// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"net"
	"testing"
)

// TestKernelIfindex agrees with the kernel's own interface table (what
// net.Interfaces dumps) on every interface of this machine, and knows no
// interface the kernel does not have.
func TestKernelIfindex(t *testing.T) {
	k, err := NewKernelIfindex()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		t.Fatalf("net.Interfaces: %v, %d", err, len(ifs))
	}
	for _, ifi := range ifs {
		if idx, ok := k.Index(ifi.Name); !ok || idx != ifi.Index {
			t.Errorf("%s: %d %v, want %d", ifi.Name, idx, ok, ifi.Index)
		}
	}
	for _, name := range []string{"rdma-doctor-no", "", "a-name-longer-than-ifnamsiz"} {
		if idx, ok := k.Index(name); ok {
			t.Errorf("%q: index %d for a netdev the kernel does not have", name, idx)
		}
	}
}
