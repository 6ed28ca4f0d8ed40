// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// MaxLineSize bounds one line of a file read line by line. The longest
// line rdma_doctor streams is a row of /proc/interrupts: the kernel prints
// " %10u" per online CPU (wider only past 10 digits) plus the chip and
// action columns, so 8192 CPUs take about 90 KiB, and 170 KiB even if every
// count had 20 digits. A longer line is not what we think it is.
const MaxLineSize = 256 << 10

// MaxStreamSize bounds the bytes of one streamed read: far above any
// /proc/interrupts a kernel prints (8192 CPUs × 40,000 IRQs is 3.6 GB),
// it only stops a file that never ends when the caller set no deadline.
const MaxStreamSize = 4 << 30

// lineChunk is the first read buffer of a streamed read: enough for a
// row of 5,000 CPUs, so the buffer rarely grows.
const lineChunk = 64 << 10

// ErrLineTooLong is the error (errors.Is) of a streamed read that met a
// line longer than MaxLineSize.
var ErrLineTooLong = errors.New("line longer than limit")

// LineError is a streamed read stopped at a line: its 1-based number.
type LineError struct {
	Path string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("read %s: line %d: %v (%d bytes)", e.Path, e.Line, e.Err, MaxLineSize)
}

func (e *LineError) Unwrap() error { return e.Err }

// LineReader is an FS that reads a file a line at a time in bounded
// memory. Dir's FS is one.
type LineReader interface {
	ReadLines(ctx context.Context, name string, fn func(num int, line []byte) error) error
}

// ReadLines calls fn with each line of name in order: its 1-based number
// and its text without the newline, valid only until fn returns. It holds
// one buffer of at most MaxLineSize+1 bytes whatever the file's size, so a
// procfs table too large to read whole (/proc/interrupts on a 512-CPU,
// 4,096-IRQ host is 23 MB) streams through it. A line longer than
// MaxLineSize stops the read with a *LineError naming it; an error from fn
// stops it and is returned as it is; ctx ending stops it between reads.
// The read is registered with the FS's stuck-read registry like any other
// (ErrStuck), and a FIFO, socket or device is refused (ErrNotRegular).
//
// An FS that is not a LineReader (a test double) is read with ReadFile
// and split the same way.
func ReadLines(ctx context.Context, f FS, name string, fn func(num int, line []byte) error) error {
	if r, ok := f.(LineReader); ok {
		return r.ReadLines(ctx, name, fn)
	}
	if err := ctx.Err(); err != nil {
		return &fs.PathError{Op: "read", Path: name, Err: err}
	}
	b, err := f.ReadFile(name)
	if err != nil {
		return err
	}
	s := lineSplitter{path: name, fn: fn}
	if err := s.feed(b); err != nil {
		return err
	}
	return s.finish(b)
}

// ReadLines implements LineReader.
func (d *dirFS) ReadLines(ctx context.Context, name string, fn func(num int, line []byte) error) error {
	p := d.path(name)
	start, err := d.enter("read", p)
	if err != nil {
		return err
	}
	defer d.reads.end(p, start)
	return readLines(ctx, p, fn)
}

func readLines(ctx context.Context, p string, fn func(int, []byte) error) error {
	fd, err := open(p)
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer syscall.Close(fd)
	// One fstat up front: a streamed file is large by definition, so the
	// call costs nothing next to its reads, and a FIFO is refused before
	// any line reaches fn.
	if err := special(fd, p, nil); err != nil {
		return err
	}
	s := lineSplitter{path: p, fn: fn}
	buf := make([]byte, lineChunk)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if s.start > 0 && s.start == s.end {
			s.start, s.end, s.scanned = 0, 0, 0
		}
		if s.end == len(buf) {
			switch {
			case s.start > 0:
				// Move the partial last line to the front.
				n := copy(buf, buf[s.start:s.end])
				s.scanned -= s.start
				s.start, s.end = 0, n
			case len(buf) <= MaxLineSize:
				grown := make([]byte, min(2*len(buf), MaxLineSize+1))
				copy(grown, buf[:s.end])
				buf = grown
			default:
				return &LineError{Path: p, Line: s.num + 1, Err: ErrLineTooLong}
			}
		}
		n, err := syscall.Read(fd, buf[s.end:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return special(fd, p, err)
		case err != nil:
			return &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			return s.finish(buf)
		}
		if total += int64(n); total > MaxStreamSize {
			return &fs.PathError{Op: "read", Path: p, Err: ErrTooLarge}
		}
		s.end += n
		if err := s.lines(buf); err != nil {
			return err
		}
	}
}

// lineSplitter hands the whole lines of buf[start:end] to fn; the
// partial line after the last newline stays for the next read.
type lineSplitter struct {
	path string
	fn   func(int, []byte) error
	num  int
	// start is where the current line begins, scanned how far it has been
	// searched for a newline, end where the bytes read end.
	start, scanned, end int
}

func (s *lineSplitter) lines(buf []byte) error {
	for {
		i := bytes.IndexByte(buf[s.scanned:s.end], '\n')
		if i < 0 {
			s.scanned = s.end
			if s.end-s.start > MaxLineSize {
				return &LineError{Path: s.path, Line: s.num + 1, Err: ErrLineTooLong}
			}
			return nil
		}
		eol := s.scanned + i
		s.num++
		if eol-s.start > MaxLineSize {
			return &LineError{Path: s.path, Line: s.num, Err: ErrLineTooLong}
		}
		if err := s.fn(s.num, buf[s.start:eol]); err != nil {
			return err
		}
		s.start, s.scanned = eol+1, eol+1
	}
}

// feed splits a whole file held in b (the fallback's ReadFile).
func (s *lineSplitter) feed(b []byte) error {
	s.end = len(b)
	return s.lines(b)
}

// finish hands fn the last line when the file does not end in a newline.
func (s *lineSplitter) finish(buf []byte) error {
	if s.start == s.end {
		return nil
	}
	s.num++
	if err := s.fn(s.num, buf[s.start:s.end]); err != nil {
		return err
	}
	s.start = s.end
	return nil
}
