// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ReadBounded reads a file an operator names (the configuration file, the
// node name map), of at most limit bytes. It is
// opened with O_NONBLOCK and must be a regular file (a symbolic link to
// one is fine: a Kubernetes ConfigMap mounts as links): a FIFO would
// otherwise block start-up until someone writes to it, and a device could
// never end.
func ReadBounded(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fileKind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte (%d MiB) limit", path, fi.Size(), limit, limit>>20)
	}
	// Read at most one byte past the limit: the file may grow after the
	// stat.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over the %d-byte (%d MiB) limit", path, limit, limit>>20)
	}
	return b, nil
}

// fileKind names a file type that is not a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
