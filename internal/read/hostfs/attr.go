// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

// readAttrFS reads an attribute of an FS that is not Dir's (a test double)
// into buf, as Attr.Read does for Dir's.
func readAttrFS(f FS, name string, buf []byte) ([]byte, error) {
	b, err := f.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return append(buf[:0], b...), nil
}
