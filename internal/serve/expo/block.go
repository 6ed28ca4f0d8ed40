// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package expo

import (
	"errors"
	"io"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Block is whole families rendered once and served by every scrape until
// their source changes: a fabric's per-port and per-link series, which
// change once a sweep and are too many to sort, render and compress on
// every scrape. A Block keeps each family as a compressed text Segment,
// not its samples, which would hold many times the heap
// (docs/measurements.md#expo): a gzip text scrape splices the segments in
// (GzipWriter), a plain text one decompresses them, and a protobuf
// scrape, or a registry (Expand), gets the samples made again by the
// function the Block was built from.
//
// A Block travels among a collector's metrics as a prometheus.Metric so
// that it goes where they go; only Group, Expand and Aggregator.Collect
// look into it. Its families' samples are checked, sorted and rendered
// once, when it is built: a sample the registry would refuse is counted
// (Rejected) once per Block, not once per scrape.
type Block struct {
	fams    []blockFamily
	builds  []func() []prometheus.Metric
	samples int
}

type blockFamily struct {
	desc *Desc
	typ  dto.MetricType
	seg  Segment // the text exposition
	// pseg is the family as one delimited protobuf MetricFamily: a
	// protobuf scrape splices or decompresses it as a text one does seg,
	// so that it never makes a fabric's samples again.
	pseg Segment
}

// blockDesc is what a Block answers as a prometheus.Metric: a registry
// that was handed one unexpanded refuses it by its Write error.
var blockDesc = prometheus.NewDesc("rdma_expo_block", "A block of families rendered once (internal/serve/expo); expand it before a registry.", nil, nil)

// NewBlock renders the samples the builds return into a Block, which
// keeps the builds to make them again for a protobuf scrape or a
// registry. Each build must return the same samples each time (the
// Block's source is immutable), only Samples, and whole families: the
// builds are rendered one at a time, so only one build's samples are in
// memory at once (a fabric's saturation flags alone are 170k samples at
// 4000 hosts).
func NewBlock(builds ...func() []prometheus.Metric) *Block {
	b := &Block{builds: builds}
	for _, build := range builds {
		ms := build()
		b.samples += len(ms)
		fams, _ := Group(ms)
		for _, f := range fams {
			if slices.ContainsFunc(b.fams, func(x blockFamily) bool { return x.desc.Name == f.desc.Name }) {
				// Two builds with one family: a bug; the first is kept,
				// as Group keeps the first of two clashing samples.
				for _, s := range f.samples {
					reject(Duplicate, s)
				}
				continue
			}
			seg, ok := compressFamily(f)
			if !ok {
				continue // every sample refused: no family
			}
			pseg, _ := compressProto(f) // the same samples, sorted and checked
			b.fams = append(b.fams, blockFamily{desc: f.desc, typ: f.typ, seg: seg, pseg: pseg})
		}
	}
	slices.SortFunc(b.fams, func(x, y blockFamily) int {
		switch {
		case x.desc.Name < y.desc.Name:
			return -1
		case x.desc.Name > y.desc.Name:
			return 1
		}
		return 0
	})
	return b
}

// Len is the number of samples the Block was built from (what a
// registry's memory grows with: Expand makes them again).
func (b *Block) Len() int { return b.samples }

// Samples makes the Block's samples again.
func (b *Block) Samples() []prometheus.Metric {
	out := make([]prometheus.Metric, 0, b.samples)
	for _, build := range b.builds {
		out = append(out, build()...)
	}
	return out
}

// Desc implements prometheus.Metric.
func (b *Block) Desc() *prometheus.Desc { return blockDesc }

// Write implements prometheus.Metric: a Block is not one sample.
func (b *Block) Write(*dto.Metric) error {
	return errors.New("expo: a Block reached a registry unexpanded (expo.Expand)")
}

// Expand replaces the Blocks among ms by their samples, for a registry.
func Expand(ms []prometheus.Metric) []prometheus.Metric {
	n := slices.IndexFunc(ms, func(m prometheus.Metric) bool { _, ok := m.(*Block); return ok })
	if n < 0 {
		return ms
	}
	out := append([]prometheus.Metric{}, ms[:n]...)
	for _, m := range ms[n:] {
		if b, ok := m.(*Block); ok {
			out = append(out, b.Samples()...)
			continue
		}
		out = append(out, m)
	}
	return out
}

// writeSegment writes a rendered family: spliced into a GzipWriter,
// decompressed into any other writer through the streamer's one
// decompressor, reset for each segment rather than made anew per family:
// each is tens of kilobytes.
func (s *streamer) writeSegment(seg *Segment) error {
	if g, ok := s.w.(*GzipWriter); ok {
		return g.Splice(seg)
	}
	r := s.segmentReader(seg)
	// Through the streamer's buffer, which is empty here: io.Copy
	// would allocate one of its own.
	for {
		n, err := r.Read(s.buf[len(s.buf):cap(s.buf)])
		if n > 0 {
			if _, werr := s.w.Write(s.buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// expandBlocks returns fams with every family of a Block replaced by its
// samples, each Block built once: the protobuf path.
func expandBlocks(fams map[string]*Family) map[string]*Family {
	var blocks []*Block
	for _, f := range fams {
		if f.block != nil && !slices.Contains(blocks, f.block) {
			blocks = append(blocks, f.block)
		}
	}
	if len(blocks) == 0 {
		return fams
	}
	out := make(map[string]*Family, len(fams))
	var ms [][]prometheus.Metric
	for n, f := range fams {
		if f.block == nil {
			out[n] = f
		}
	}
	for _, b := range blocks {
		ms = append(ms, b.Samples())
	}
	more, _ := Group(ms...)
	for n, f := range more {
		out[n] = f
	}
	return out
}
