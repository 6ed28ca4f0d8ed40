// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"sync"

	"golang.org/x/sys/unix"
)

// KernelIfindex answers the running kernel's ifindex of netdev names, one
// SIOCGIFINDEX ioctl per name on one socket: what a scrape needs to tell
// whether the kernel has a netdev of the sysfs tree under the same name
// and index. (net.Interfaces dumps every interface over netlink on each
// call, a cost that grows with every netdev of the host, hundreds of VFs
// included: docs/measurements.md#netdev.) Close releases the socket.
type KernelIfindex struct{ fd int }

// NewKernelIfindex opens the socket the lookups use.
func NewKernelIfindex() (*KernelIfindex, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &KernelIfindex{fd: fd}, nil
}

// Index is name's ifindex in the running kernel, and false when the
// kernel has no such netdev (or the name cannot be one).
func (k *KernelIfindex) Index(name string) (int, bool) {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, false
	}
	if err := unix.IoctlIfreq(k.fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, false
	}
	return int(ifr.Uint32()), true
}

// Close closes the socket.
func (k *KernelIfindex) Close() error { return unix.Close(k.fd) }

// Ifindexes is a KernelIfindex opened on first use and kept open by its
// owner (the host, for the life of the process): a socket opened and
// closed on every scrape is a large part of the netdev refresh's CPU
// (docs/caches.md). The
// zero value is ready; safe for concurrent use (the ioctls share the
// socket). A socket that could not be opened is tried again next time.
type Ifindexes struct {
	mu sync.Mutex
	k  *KernelIfindex
}

// Kernel returns the kept KernelIfindex, opening it if need be.
func (s *Ifindexes) Kernel() (*KernelIfindex, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.k == nil {
		k, err := NewKernelIfindex()
		if err != nil {
			return nil, err
		}
		s.k = k
	}
	return s.k, nil
}

// Lookup returns s's kept KernelIfindex, or, when s is nil, one opened
// for the caller alone; release closes that one (and nothing of s's).
func (s *Ifindexes) Lookup() (k *KernelIfindex, release func(), err error) {
	if s != nil {
		k, err = s.Kernel()
		return k, func() {}, err
	}
	if k, err = NewKernelIfindex(); err != nil {
		return nil, func() {}, err
	}
	return k, func() { k.Close() }, nil
}
