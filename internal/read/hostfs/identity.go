// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

// Identity tells one incarnation of a directory entry from the next: the
// kernel makes a re-registered device's (driver reload, firmware reset,
// hot-plug) sysfs entries anew, with new inodes. Ctime guards against a
// file system that hands a new file the inode of one just removed.
type Identity struct {
	Dev, Ino uint64
	Ctime    int64
}
