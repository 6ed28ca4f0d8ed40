// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package expo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// WriteDebug writes the families and the gathered ones in a protobuf
// debugging format (format's type expfmt.TypeProtoText or
// TypeProtoCompact, with its escaping scheme) as expfmt's encoder writes
// them, one family after another sorted by name, but one series at a
// time: a family in these formats is a MetricFamily message's fields,
// and the text of a message is its fields' texts one after another (in
// the compact form separated by a space), so the family's header and
// each of its series are formatted on their own, so that a scrape never
// holds the whole collection as dto messages, which a fabric's size
// makes hundreds of megabytes (docs/measurements.md#expo). A
// Block's family is read from its protobuf segment, a series at a time;
// the rest is encoded from the samples as WriteProto encodes them.
func WriteDebug(w io.Writer, fams map[string]*Family, gathered []*dto.MetricFamily, format expfmt.Format) error {
	compact := false
	switch format.FormatType() {
	case expfmt.TypeProtoText:
	case expfmt.TypeProtoCompact:
		compact = true
	default:
		return fmt.Errorf("expo: %s is not a protobuf debugging format", format)
	}
	d := debugWriter{w: bufio.NewWriterSize(w, flushAt), compact: compact, scheme: format.ToEscapingScheme()}
	names, byName := familyNames(fams, gathered)
	for _, n := range names {
		var err error
		if mf := byName[n]; mf != nil {
			err = d.gathered(mf)
		} else {
			err = d.family(fams[n])
		}
		if err != nil {
			return err
		}
	}
	return d.w.Flush()
}

type debugWriter struct {
	w       *bufio.Writer
	compact bool
	scheme  model.EscapingScheme
	metric  dto.Metric // reused: one series at a time
	buf     []byte
	s       streamer // its decompressor, for a Block's segments
	r       *bufio.Reader
}

// format appends a message's text as expfmt's encoder makes it.
func (d *debugWriter) format(mf *dto.MetricFamily) string {
	mf = model.EscapeMetricFamily(mf, d.scheme)
	if d.compact {
		return mf.String()
	}
	return prototext.Format(mf)
}

// gathered writes a family of the registry whole, as expfmt does.
func (d *debugWriter) gathered(mf *dto.MetricFamily) error {
	_, err := fmt.Fprintln(d.w, d.format(mf))
	return err
}

// header writes the family's name, help and type fields.
func (d *debugWriter) header(f *Family) error {
	_, err := d.w.WriteString(d.format(&dto.MetricFamily{Name: &f.desc.Name, Help: &f.desc.Help, Type: f.protoType().Enum()}))
	return err
}

// series writes one metric field of family f from its encoded dto.Metric.
func (d *debugWriter) series(f *Family, encoded []byte) error {
	d.metric.Reset()
	if err := proto.Unmarshal(encoded, &d.metric); err != nil {
		return fmt.Errorf("expo: a series of %s: %w", f.desc.Name, err)
	}
	// The name and type travel with the series for escaping (a label
	// name's escaping depends on neither, the name's on the name); the
	// text is the metric field alone.
	one := &dto.MetricFamily{Name: &f.desc.Name, Type: f.protoType().Enum(), Metric: []*dto.Metric{&d.metric}}
	one = model.EscapeMetricFamily(one, d.scheme)
	one.Name, one.Type = nil, nil
	var text string
	if d.compact {
		text = " " + one.String()
	} else {
		text = prototext.Format(one)
	}
	_, err := d.w.WriteString(text)
	return err
}

// family writes one of our families: a Block's from its protobuf
// segment, the others from their samples.
func (d *debugWriter) family(f *Family) error {
	if f.pseg != nil {
		if err := d.segment(f); err != nil {
			return err
		}
	} else {
		samples := f.sorted()
		if !validFamily(samples) {
			samples = validOnly(samples, true)
		}
		if len(samples) == 0 {
			return nil
		}
		if err := d.header(f); err != nil {
			return err
		}
		for _, s := range samples {
			d.buf = f.appendMetric(d.buf[:0], s)
			if err := d.series(f, d.buf); err != nil {
				return err
			}
		}
	}
	return d.w.WriteByte('\n')
}

// errSegment is a Block's protobuf segment that is not one delimited
// MetricFamily: a bug, as the Block encoded it itself.
var errSegment = errors.New("expo: a Block's protobuf segment is not a MetricFamily")

// segment reads a Block family's delimited MetricFamily field by field
// and writes its series one at a time (a fabric's family is 10k series
// or more); the header comes from the family's Desc, as it was encoded
// from it.
func (d *debugWriter) segment(f *Family) error {
	if d.r == nil {
		d.r = bufio.NewReaderSize(nil, 4<<10)
	}
	d.r.Reset(d.s.segmentReader(f.pseg))
	r := d.r
	size, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil // every sample was refused: no family
		}
		return fmt.Errorf("%w: %v", errSegment, err)
	}
	if err := d.header(f); err != nil {
		return err
	}
	left := int64(size)
	for left > 0 {
		tag, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("%w: %v", errSegment, err)
		}
		left -= int64(protowire.SizeVarint(tag))
		num, typ := protowire.DecodeTag(tag)
		var n uint64
		switch typ {
		case protowire.VarintType:
			if n, err = binary.ReadUvarint(r); err != nil {
				return fmt.Errorf("%w: %v", errSegment, err)
			}
			left -= int64(protowire.SizeVarint(n))
			continue
		case protowire.BytesType:
			if n, err = binary.ReadUvarint(r); err != nil || int64(n) > left {
				return fmt.Errorf("%w: field %d of %d bytes (%v)", errSegment, num, n, err)
			}
			left -= int64(protowire.SizeVarint(n)) + int64(n)
		default:
			return fmt.Errorf("%w: wire type %d", errSegment, typ)
		}
		if num != fieldFamilyMetric {
			if _, err := r.Discard(int(n)); err != nil {
				return fmt.Errorf("%w: %v", errSegment, err)
			}
			continue
		}
		if cap(d.buf) < int(n) {
			d.buf = make([]byte, n)
		}
		d.buf = d.buf[:n]
		if _, err := io.ReadFull(r, d.buf); err != nil {
			return fmt.Errorf("%w: %v", errSegment, err)
		}
		if err := d.series(f, d.buf); err != nil {
			return err
		}
	}
	return nil
}
