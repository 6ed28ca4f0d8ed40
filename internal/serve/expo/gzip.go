// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package expo

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/flate"
)

// This file is a gzip writer that can splice in text compressed once
// beforehand (a Block's families), so a scrape of a fabric's series
// copies their compressed bytes instead of rendering and compressing tens
// of megabytes of text again. A gzip member is one deflate stream; a
// deflate stream is a run of blocks, each of which may start on any byte
// boundary. A segment is the blocks a fresh compressor made of one
// family's text, ended by a sync flush (byte-aligned, not final); the
// writer flushes its own compressor the same way, copies the segment, and
// starts its compressor afresh, so that nothing it writes later refers
// back across the segment. The gzip trailer's CRC-32 is combined from the
// parts' (crc32Combine), so the segment's text is not kept.

// Segment is text compressed into non-final deflate blocks.
type Segment struct {
	deflate []byte
	crc     uint32
	n       int64
}

// segmentWriter compresses text into a Segment at the scrape's level
// (BestSpeed, as the gzip writers).
type segmentWriter struct {
	out bytes.Buffer
	fw  *flate.Writer
	crc uint32
	n   int64
}

func newSegmentWriter() *segmentWriter {
	w := &segmentWriter{}
	w.fw, _ = flate.NewWriter(&w.out, flate.BestSpeed) // a valid level: no error
	return w
}

// Write never fails: it writes to memory.
func (w *segmentWriter) Write(p []byte) (int, error) {
	w.crc = crc32.Update(w.crc, crc32.IEEETable, p)
	w.n += int64(len(p))
	return w.fw.Write(p)
}

func (w *segmentWriter) segment() Segment {
	_ = w.fw.Flush() // to memory: no error
	return Segment{deflate: bytes.Clone(w.out.Bytes()), crc: w.crc, n: w.n}
}

// compressFamily renders a family's text straight into a Segment, through
// a bounded buffer (a fabric's family is megabytes of text); false when
// every sample was refused.
func compressFamily(f *Family) (Segment, bool) {
	w := newSegmentWriter()
	flush := func(b []byte) ([]byte, error) {
		_, _ = w.Write(b)
		return b[:0], nil
	}
	b, _ := f.appendText(make([]byte, 0, 2*flushAt), flush) // flush does not fail
	if len(b) == 0 && w.n == 0 {
		return Segment{}, false
	}
	_, _ = w.Write(b)
	return w.segment(), true
}

// compressProto encodes a family as one delimited MetricFamily straight
// into a Segment (a Block's, for protobuf scrapes), through a bounded
// buffer; false when every sample was refused. Refused samples are not
// counted again: compressFamily counted them.
func compressProto(f *Family) (Segment, bool) {
	w := newSegmentWriter()
	s := streamer{w: w, buf: make([]byte, 0, flushAt+4<<10)}
	_ = f.writeProto(&s, false) // to memory: no error
	_ = s.flush()
	if w.n == 0 {
		return Segment{}, false
	}
	return w.segment(), true
}

// finalBlock is an empty stored block marked final: what a segment lacks
// to be a whole deflate stream on its own.
var finalBlock = []byte{0x01, 0x00, 0x00, 0xff, 0xff}

// stream is the segment as a whole deflate stream.
func (s *Segment) stream() io.Reader {
	return io.MultiReader(bytes.NewReader(s.deflate), bytes.NewReader(finalBlock))
}

// segmentReader returns the streamer's decompressor reset to seg's text.
func (s *streamer) segmentReader(seg *Segment) io.Reader {
	if s.inflate == nil {
		s.inflate = flate.NewReader(seg.stream())
		return s.inflate
	}
	_ = s.inflate.(flate.Resetter).Reset(seg.stream(), nil) // flate's own reader: a Resetter
	return s.inflate
}

// gzipHeader is a gzip member header without name, time or extra fields
// (OS unknown), as compress/gzip writes one for a zero Header.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// GzipWriter writes one gzip member, with Splice for precompressed
// segments. Reset it for each response; reuse it across responses (its
// compressor is hundreds of kilobytes).
type GzipWriter struct {
	// out gathers the compressed bytes for the member's writer: the compressor writes 246
	// bytes at a time, and each write to a response sets a write
	// deadline and goes through the server's buffers.
	out         *bufio.Writer
	fw          *flate.Writer
	crc         uint32
	n           int64
	wroteHeader bool
	err         error
}

// gzipOut is the size of a GzipWriter's writes (the last of a member's
// may be shorter).
const gzipOut = 16 << 10

// NewGzipWriter returns a writer at BestSpeed; Reset it before use.
func NewGzipWriter() *GzipWriter {
	fw, _ := flate.NewWriter(io.Discard, flate.BestSpeed) // a valid level
	return &GzipWriter{fw: fw, out: bufio.NewWriterSize(io.Discard, gzipOut)}
}

// Reset starts a new member on w.
func (g *GzipWriter) Reset(w io.Writer) {
	g.crc, g.n, g.wroteHeader, g.err = 0, 0, false, nil
	g.out.Reset(w)
	g.fw.Reset(g.out)
}

func (g *GzipWriter) header() error {
	if !g.wroteHeader && g.err == nil {
		g.wroteHeader = true
		_, g.err = g.out.Write(gzipHeader)
	}
	return g.err
}

// Write compresses p.
func (g *GzipWriter) Write(p []byte) (int, error) {
	if err := g.header(); err != nil {
		return 0, err
	}
	n, err := g.fw.Write(p)
	g.crc = crc32.Update(g.crc, crc32.IEEETable, p[:n])
	g.n += int64(n)
	if err != nil {
		g.err = err
	}
	return n, err
}

// Splice writes a precompressed segment: its text follows what was
// written before, as if written with Write.
func (g *GzipWriter) Splice(s *Segment) error {
	if err := g.header(); err != nil {
		return err
	}
	if g.err = g.fw.Flush(); g.err != nil {
		return g.err
	}
	if _, g.err = g.out.Write(s.deflate); g.err != nil {
		return g.err
	}
	g.fw.Reset(g.out) // no back-reference across the segment
	g.crc = crc32Combine(g.crc, s.crc, s.n)
	g.n += s.n
	return nil
}

// Close ends the member: the final block and the trailer.
func (g *GzipWriter) Close() error {
	if err := g.header(); err != nil {
		return err
	}
	if g.err = g.fw.Close(); g.err != nil {
		return g.err
	}
	var t [8]byte
	binary.LittleEndian.PutUint32(t[:4], g.crc)
	binary.LittleEndian.PutUint32(t[4:], uint32(g.n)) // ISIZE: the length mod 2^32
	if _, g.err = g.out.Write(t[:]); g.err != nil {
		return g.err
	}
	g.err = g.out.Flush()
	return g.err
}

// crc32Combine returns the CRC-32 (IEEE) of A followed by B from crc1 =
// CRC(A), crc2 = CRC(B) and len2 = len(B), without A or B: the length of
// B applied as zero bits to crc1 through the CRC's GF(2) matrix (squared
// for each bit of len2), as zlib's crc32_combine does.
func crc32Combine(crc1, crc2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crc1
	}
	var even, odd [32]uint32
	// The operator for one zero bit: the reflected polynomial, then
	// shifts.
	odd[0] = crc32.IEEE
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(even[:], odd[:]) // two zero bits
	gf2Square(odd[:], even[:]) // four
	for {
		// Eight zero bits (one byte), then doubling per bit of len2.
		gf2Square(even[:], odd[:])
		if len2&1 != 0 {
			crc1 = gf2Times(even[:], crc1)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
		gf2Square(odd[:], even[:])
		if len2&1 != 0 {
			crc1 = gf2Times(odd[:], crc1)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
	}
	return crc1 ^ crc2
}

func gf2Times(mat []uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat []uint32) {
	for n := range 32 {
		square[n] = gf2Times(mat, mat[n])
	}
}
