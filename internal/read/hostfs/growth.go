// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"fmt"
	"io/fs"
	"syscall"
)

// Growth is what ReadGrowth read of a file that grows at its end, a log:
// the whole lines added since the previous read, or, when the file is new,
// was replaced (rotated), shrank (truncated) or grew by more than the limit,
// its last lines afresh.
type Growth struct {
	// Data holds whole lines: a last line without its newline yet is
	// left for the next read.
	Data []byte
	// Next is where the next read starts: just after Data.
	Next int64
	// Dev and Ino identify the file read; a log's ctime changes with every
	// line, so it is not part of the identity here.
	Dev, Ino uint64
	// Fresh is set when Data does not continue the previous read, so the
	// reader parses it afresh rather than adding it to what it had.
	Fresh bool
}

// GrowthReader is an FS that reads a file from an offset. Dir's FS is one.
type GrowthReader interface {
	ReadGrowth(name string, prev Growth, limit int64) (Growth, error)
}

// ReadGrowth reads what was added to name since prev (the zero Growth for
// a first read), at most limit bytes: more than that, and only the last
// limit bytes are read, Fresh. An FS that is not a GrowthReader (a test
// double) is read whole, through ReadTail, every time.
func ReadGrowth(f FS, name string, prev Growth, limit int64) (Growth, error) {
	if limit <= 0 {
		return Growth{}, fmt.Errorf("read growth of %s: %d bytes asked", name, limit)
	}
	if g, ok := f.(GrowthReader); ok {
		return g.ReadGrowth(name, prev, limit)
	}
	b, err := ReadTail(f, name, limit)
	if err != nil {
		return Growth{}, err
	}
	return Growth{Data: b, Fresh: true}, nil
}

// ReadGrowth implements GrowthReader.
func (d *dirFS) ReadGrowth(name string, prev Growth, limit int64) (Growth, error) {
	p := d.path(name)
	if limit <= 0 {
		return Growth{}, fmt.Errorf("read growth of %s: %d bytes asked", p, limit)
	}
	start, err := d.enter("read", p)
	if err != nil {
		return Growth{}, err
	}
	defer d.reads.end(p, start)
	return readGrowth(p, prev, limit)
}

func readGrowth(p string, prev Growth, limit int64) (Growth, error) {
	fd, err := open(p)
	if err != nil {
		return Growth{}, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		return Growth{}, &fs.PathError{Op: "fstat", Path: p, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return Growth{}, &fs.PathError{Op: "read", Path: p, Err: ErrNotRegular}
	}
	g := Growth{Dev: uint64(st.Dev), Ino: st.Ino}
	same := prev.Next > 0 && prev.Dev == g.Dev && prev.Ino == g.Ino && st.Size >= prev.Next
	off := prev.Next
	if !same || st.Size-prev.Next > limit {
		// One byte before the limit: a cut right after a newline keeps
		// its line.
		g.Fresh, off = true, max(st.Size-limit-1, 0)
	}
	if st.Size == off {
		g.Next = off // nothing new: one fstat, no read
		return g, nil
	}
	// The file may grow between the stat and the read: read what was
	// there at the stat.
	buf := make([]byte, st.Size-off)
	m, err := preadFull(fd, buf, off)
	if err != nil {
		return Growth{}, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	buf = buf[:m]
	next := off
	if g.Fresh && off > 0 {
		cut := len(buf) - len(fromLine(buf))
		buf, next = buf[cut:], off+int64(cut)
	}
	// Keep a line still being written for the next read.
	end := len(buf)
	for end > 0 && buf[end-1] != '\n' {
		end--
	}
	g.Data, g.Next = buf[:end], next+int64(end)
	return g, nil
}
