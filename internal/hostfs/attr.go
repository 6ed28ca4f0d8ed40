// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

// AttrReader is an FS that reads a small attribute into the caller's
// buffer. Dir's FS is one.
type AttrReader interface {
	ReadAttr(name string, buf []byte) ([]byte, error)
}

// ReadAttr reads a sysfs attribute into buf (grown if it is too small)
// and returns the filled part, which is only valid until buf is reused: a
// scrape reads thousands of counters, and this costs neither a heap copy
// nor a second read() to see end of file. An FS that is not an
// AttrReader is read with ReadFile.
func ReadAttr(f FS, name string, buf []byte) ([]byte, error) {
	if a, ok := f.(AttrReader); ok {
		return a.ReadAttr(name, buf)
	}
	b, err := f.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return append(buf[:0], b...), nil
}

// ReadAttr implements AttrReader. A read that returns less than the
// buffer holds is the whole attribute: sysfs produces an attribute in one
// show() call of at most a page and hands it out in the first read, and a
// regular file (a fixture tree) only reads short at its end. A read that
// fills the buffer goes on until end of file, as ReadFile does. Stuck and
// special files are refused as ReadFile refuses them.
func (d *dirFS) ReadAttr(name string, buf []byte) ([]byte, error) {
	if cap(buf) < 64 {
		buf = make([]byte, 0, 4096)
	}
	p := d.path(name)
	start, err := d.enter("read", p)
	if err != nil {
		return nil, err
	}
	defer d.reads.end(p, start)
	return readInto(p, buf, true)
}
