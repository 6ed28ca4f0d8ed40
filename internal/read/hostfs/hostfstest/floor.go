// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfstest

import "syscall"

// BareRead reads name with open, read until end of file and close into a
// page-sized stack buffer (a sysfs attribute is at most a page) and
// returns how many bytes it read: the system calls any reader of the file
// must make and nothing else, the floor the benchmarks compare a scrape
// with. It allocates nothing but the path's C string.
func BareRead(name string) (int, error) {
	var buf [4096]byte
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	total := 0
	for {
		n, err := syscall.Read(fd, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		total += n
	}
}
