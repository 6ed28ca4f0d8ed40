// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"fmt"
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

// Ifindexes opens its socket once and answers from it concurrently: the
// same KernelIfindex every time, lookups that agree with the kernel from
// several goroutines at once.
func TestIfindexesKept(t *testing.T) {
	var ix Ifindexes
	first, err := ix.Kernel()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 8)
	for range 8 {
		go func() {
			k, err := ix.Kernel()
			switch {
			case err != nil:
				done <- err
			case k != first:
				done <- fmt.Errorf("a second socket: %p, first %p", k, first)
			default:
				if idx, ok := k.Index("lo"); !ok || idx != lo.Index {
					done <- fmt.Errorf("lo: %d %v, want %d", idx, ok, lo.Index)
					return
				}
				done <- nil
			}
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
