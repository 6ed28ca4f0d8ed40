// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package expo

import (
	"bytes"
	"compress/gzip"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

func TestCRC32Combine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 4096, 100003} {
		a := make([]byte, r.IntN(5000))
		b := make([]byte, n)
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want := crc32.ChecksumIEEE(append(append([]byte{}, a...), b...))
		if got := crc32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), int64(len(b))); got != want {
			t.Errorf("len %d+%d: %08x, want %08x", len(a), len(b), got, want)
		}
	}
}

// TestGzipSplice: text written and segments spliced read back, with the
// standard library's reader (Prometheus's), as one member holding all of
// it in order.
func TestGzipSplice(t *testing.T) {
	parts := [][]byte{[]byte("# HELP a x\n"), bytes.Repeat([]byte("b_total{guid=\"0x1\",port=\"2\"} 3\n"), 5000), []byte("c 1\n"), bytes.Repeat([]byte("dd 4\n"), 100000), nil}
	for _, spliceFirst := range []bool{false, true} {
		var out bytes.Buffer
		g := NewGzipWriter()
		g.Reset(&out)
		var want []byte
		for i, p := range parts {
			want = append(want, p...)
			if i%2 == 1 == !spliceFirst {
				seg := compressSegment(p)
				if err := g.Splice(&seg); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := g.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(&out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("splice first %v: err %v, %d bytes back of %d", spliceFirst, err, len(got), len(want))
		}
	}
}

var (
	blockPort = NewDesc("rdma_fabric_port_symbol_errors_total", "Symbol errors.", "guid", "port")
	blockInfo = NewDesc("rdma_fabric_node_info", "A node.", "guid", "node")
	blockHost = NewDesc("rdma_host_thing", "Not in the block.")
)

// blockSamples are a fabric's series in the order the collector sends
// them (ports 1..n of each node: not sorted as text).
func blockSamples() []prometheus.Metric {
	var ms []prometheus.Metric
	for g := range 30 {
		guid := "0x" + strconv.Itoa(1000+g)
		ms = append(ms, Gauge(blockInfo, 1, guid, "leaf \"x\"\n"+strconv.Itoa(g)))
		for p := 1; p <= 36; p++ {
			ms = append(ms, Counter(blockPort, float64(p*g), guid, strconv.Itoa(p)))
		}
	}
	return ms
}

// TestBlockWritesAsSamples: a Block's families are written byte for byte
// as the same samples would be, in gzip (spliced), plain text and
// protobuf, among other families; Expand gives the samples back.
func TestBlockWritesAsSamples(t *testing.T) {
	host := []prometheus.Metric{Gauge(blockHost, 7)}
	direct := func(proto bool) []byte {
		fams, _ := Group(host, blockSamples())
		var b bytes.Buffer
		write := WriteText
		if proto {
			write = WriteProto
		}
		if err := write(&b, fams, nil); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	b := NewBlock(blockSamples)
	viaBlock := func(proto, gz bool) []byte {
		fams, other := Group(host, []prometheus.Metric{b})
		if len(other) != 0 {
			t.Fatalf("%d metrics not grouped", len(other))
		}
		var out bytes.Buffer
		var w io.Writer = &out
		var g *GzipWriter
		if gz {
			g = NewGzipWriter()
			g.Reset(&out)
			w = g
		}
		write := WriteText
		if proto {
			write = WriteProto
		}
		if err := write(w, fams, nil); err != nil {
			t.Fatal(err)
		}
		if !gz {
			return out.Bytes()
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(&out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	text := direct(false)
	for _, gz := range []bool{false, true} {
		if got := viaBlock(false, gz); !bytes.Equal(got, text) {
			t.Errorf("text (gzip %v) through a Block differs:\n%s\nwant\n%s", gz, head(got), head(text))
		}
	}
	if got, want := viaBlock(true, false), direct(true); !bytes.Equal(got, want) {
		t.Errorf("protobuf through a Block differs (%d bytes, want %d)", len(got), len(want))
	}
	if n := len(Expand([]prometheus.Metric{Gauge(blockHost, 1), b})); n != 1+30*37 {
		t.Errorf("Expand gave %d metrics", n)
	}
	if blockSize(b) == 0 || blockSize(b) > len(text)/4 {
		t.Errorf("block of %d compressed bytes for %d of text", blockSize(b), len(text))
	}
}

// TestBlockProtoFromSegments: a protobuf scrape, plain or gzip, and the
// debugging formats write a Block's families from what the Block keeps,
// never making its samples again (issue 35: every protobuf scrape of
// 10,800 switch ports made 118k samples again, 86 MB a scrape).
func TestBlockProtoFromSegments(t *testing.T) {
	builds := 0
	b := NewBlock(func() []prometheus.Metric { builds++; return blockSamples() })
	if builds != 1 {
		t.Fatalf("NewBlock built %d times", builds)
	}
	fams, _ := Group([]prometheus.Metric{b})
	for _, w := range []func(io.Writer) error{
		func(w io.Writer) error { return WriteProto(w, fams, nil) },
		func(w io.Writer) error {
			g := NewGzipWriter()
			g.Reset(w)
			return errors.Join(WriteProto(g, fams, nil), g.Close())
		},
		func(w io.Writer) error { return WriteDebug(w, fams, nil, expfmt.NewFormat(expfmt.TypeProtoText)) },
		func(w io.Writer) error { return WriteDebug(w, fams, nil, expfmt.NewFormat(expfmt.TypeProtoCompact)) },
	} {
		var out bytes.Buffer
		if err := w(&out); err != nil || out.Len() < 1000 {
			t.Fatalf("%d bytes written, %v", out.Len(), err)
		}
	}
	if builds != 1 {
		t.Errorf("the Block's samples were made again %d times", builds-1)
	}
}

// TestBlockClash: a Block whose family meets samples of the same name is
// taken as its samples: the duplicates are refused as the registry would.
func TestBlockClash(t *testing.T) {
	b := NewBlock(blockSamples)
	before := Rejected(Duplicate)
	fams, _ := Group([]prometheus.Metric{Counter(blockPort, 1, "0x1000", "1")}, []prometheus.Metric{b})
	f := fams[blockPort.Name]
	if f == nil || f.seg != nil || len(f.sorted()) != 30*36 {
		t.Fatalf("clashing family: %+v", f)
	}
	if Rejected(Duplicate) != before+1 {
		t.Errorf("duplicate not counted")
	}
}

func head(b []byte) []byte {
	if len(b) > 400 {
		return b[:400]
	}
	return b
}

// compressSegment compresses text into a Segment, as a Block's family.
func compressSegment(text []byte) Segment {
	w := newSegmentWriter()
	_, _ = w.Write(text)
	return w.segment()
}

// blockSize is a Block's compressed size.
func blockSize(b *Block) int {
	n := 0
	for _, f := range b.fams {
		n += len(f.seg.deflate)
	}
	return n
}

// writeCounter counts the writes it is given.
type writeCounter struct {
	bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestGzipWriterWritesInPieces: the member reaches its writer in pieces
// of gzipOut bytes (the last may be shorter), not in the compressor's
// 246-byte ones: each write to a response sets a write deadline. Spliced
// segments go through the same pieces, in order.
func TestGzipWriterWritesInPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var text []byte
	for len(text) < 1<<20 { // random hex: it hardly compresses, so many pieces
		text = strconv.AppendUint(text, r.Uint64(), 16)
		text = append(text, '\n')
	}
	var out writeCounter
	g := NewGzipWriter()
	g.Reset(&out)
	if _, err := g.Write(text[:len(text)/2]); err != nil {
		t.Fatal(err)
	}
	seg := compressSegment(text[len(text)/2:])
	if err := g.Splice(&seg); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if max := (out.Len() + gzipOut - 1) / gzipOut; out.writes > max {
		t.Errorf("%d bytes in %d writes, want at most %d (pieces of %d bytes)", out.Len(), out.writes, max, gzipOut)
	}
	zr, err := gzip.NewReader(&out.Buffer)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, text) {
		t.Fatalf("err %v, %d bytes back of %d", err, len(got), len(text))
	}
}
