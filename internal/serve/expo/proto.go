// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package expo

import (
	"io"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of io.prometheus.client's metrics.proto (client_model),
// the messages the delimited protobuf exposition carries.
const (
	fieldFamilyName   = 1
	fieldFamilyHelp   = 2
	fieldFamilyType   = 3
	fieldFamilyMetric = 4

	fieldMetricLabel   = 1
	fieldMetricGauge   = 2
	fieldMetricCounter = 3
	fieldMetricSummary = 4

	fieldLabelName  = 1
	fieldLabelValue = 2

	fieldValue = 1 // Gauge.value, Counter.value

	fieldSummaryCount    = 1
	fieldSummarySum      = 2
	fieldSummaryQuantile = 3

	fieldQuantileQ = 1
	fieldQuantileV = 2
)

// WriteProto writes the families and the gathered ones as the delimited
// protobuf exposition (one length-prefixed MetricFamily after another,
// sorted by name), the same messages promhttp sends for the same
// samples, encoded straight from the samples: no dto.Metric, label pair
// or const metric per sample, so that a protobuf scrape holds what a text
// one does, which concurrent scrapes multiply
// (docs/measurements.md#expo). Each family's size is counted
// first and its bytes go through the same bounded buffer as WriteText's,
// so no family, however large (a fabric's), is built whole in memory. A
// Block's families were encoded when it was built: they are spliced or
// decompressed as its text is, never made into samples again.
func WriteProto(w io.Writer, fams map[string]*Family, gathered []*dto.MetricFamily) error {
	return stream(w, fams, gathered,
		func(w io.Writer, mf *dto.MetricFamily) error {
			_, err := protodelim.MarshalTo(w, mf)
			return err
		},
		func(s *streamer, f *Family) error {
			if f.pseg != nil {
				if err := s.flush(); err != nil {
					return err
				}
				return s.writeSegment(f.pseg)
			}
			return f.writeProto(s, true)
		})
}

// writeProto writes the family as one delimited MetricFamily through s;
// count: a sample left out (a label value that is not UTF-8) is counted,
// as it is not when a Block's text pass has counted it already.
func (f *Family) writeProto(s *streamer, count bool) error {
	samples := f.sorted()
	// Label values that are not UTF-8 are left out here, as the text
	// path leaves them out (Group does not look).
	if !validFamily(samples) {
		samples = validOnly(samples, count)
		if len(samples) == 0 {
			return nil
		}
	}
	size := f.protoHeaderSize()
	for _, smp := range samples {
		size += bytesFieldSize(f.metricSize(smp))
	}
	s.buf = protowire.AppendVarint(s.buf, uint64(size))
	s.buf = f.appendProtoHeader(s.buf)
	for _, smp := range samples {
		s.buf = protowire.AppendTag(s.buf, fieldFamilyMetric, protowire.BytesType)
		s.buf = protowire.AppendVarint(s.buf, uint64(f.metricSize(smp)))
		s.buf = f.appendMetric(s.buf, smp)
		if err := s.maybeFlush(); err != nil {
			return err
		}
	}
	return nil
}

// familyNames returns the names of both kinds of family, sorted, and the
// gathered families by name (one with the name of one of ours, or
// without series, is left out, as WriteText does).
func familyNames(fams map[string]*Family, gathered []*dto.MetricFamily) ([]string, map[string]*dto.MetricFamily) {
	names := make([]string, 0, len(fams)+len(gathered))
	byName := make(map[string]*dto.MetricFamily, len(gathered))
	for n := range fams {
		names = append(names, n)
	}
	for _, mf := range gathered {
		if _, dup := fams[mf.GetName()]; dup || len(mf.Metric) == 0 {
			continue
		}
		byName[mf.GetName()] = mf
		names = append(names, mf.GetName())
	}
	slices.Sort(names)
	return names, byName
}

// bytesFieldSize is the size of a length-delimited field of n bytes (a
// field number below 16: a one-byte tag).
func bytesFieldSize(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// doubleFieldSize is the size of a double field: tag and 8 bytes.
const doubleFieldSize = 1 + 8

func (f *Family) protoType() dto.MetricType {
	if f.typ == dto.MetricType_COUNTER || f.typ == dto.MetricType_SUMMARY {
		return f.typ
	}
	return dto.MetricType_GAUGE
}

func (f *Family) protoHeaderSize() int {
	return bytesFieldSize(len(f.desc.Name)) + bytesFieldSize(len(f.desc.Help)) + 1 + protowire.SizeVarint(uint64(f.protoType()))
}

func (f *Family) appendProtoHeader(b []byte) []byte {
	b = protowire.AppendTag(b, fieldFamilyName, protowire.BytesType)
	b = protowire.AppendString(b, f.desc.Name)
	b = protowire.AppendTag(b, fieldFamilyHelp, protowire.BytesType)
	b = protowire.AppendString(b, f.desc.Help)
	b = protowire.AppendTag(b, fieldFamilyType, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(f.protoType()))
}

// validFamily reports whether every label value of the samples is UTF-8.
func validFamily(samples []*Sample) bool {
	for _, s := range samples {
		if !validLabels(s.labels) {
			return false
		}
	}
	return true
}

// validOnly returns the samples whose label values are UTF-8, and, with
// count, counts the others (InvalidUTF8).
func validOnly(samples []*Sample, count bool) []*Sample {
	out := make([]*Sample, 0, len(samples))
	for _, s := range samples {
		if validLabels(s.labels) {
			out = append(out, s)
		} else if count {
			reject(InvalidUTF8, s)
		}
	}
	return out
}

// label is the value of the sample's i-th label (Group left out samples
// with too few; WriteProto those with values that are not UTF-8).
func label(s *Sample, i int) string { return s.labels[i] }

func (f *Family) metricSize(s *Sample) int {
	d := f.desc
	n := 0
	for _, i := range d.order {
		n += bytesFieldSize(bytesFieldSize(len(d.Labels[i])) + bytesFieldSize(len(label(s, i))))
	}
	if s.summary != nil {
		return n + bytesFieldSize(summarySize(s.summary))
	}
	return n + bytesFieldSize(doubleFieldSize)
}

func summarySize(sm *summary) int {
	n := 1 + protowire.SizeVarint(sm.count) + doubleFieldSize
	return n + len(sm.quantiles)*bytesFieldSize(2*doubleFieldSize)
}

// appendMetric appends a dto.Metric's fields in field-number order, as
// the protobuf library marshals them: labels by name, then the value.
func (f *Family) appendMetric(b []byte, s *Sample) []byte {
	d := f.desc
	for _, i := range d.order {
		v := label(s, i)
		b = protowire.AppendTag(b, fieldMetricLabel, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(bytesFieldSize(len(d.Labels[i]))+bytesFieldSize(len(v))))
		b = protowire.AppendTag(b, fieldLabelName, protowire.BytesType)
		b = protowire.AppendString(b, d.Labels[i])
		b = protowire.AppendTag(b, fieldLabelValue, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	switch {
	case s.summary != nil:
		sm := s.summary
		b = protowire.AppendTag(b, fieldMetricSummary, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(summarySize(sm)))
		b = protowire.AppendTag(b, fieldSummaryCount, protowire.VarintType)
		b = protowire.AppendVarint(b, sm.count)
		b = appendDouble(b, fieldSummarySum, s.value)
		for _, q := range sm.quantiles {
			b = protowire.AppendTag(b, fieldSummaryQuantile, protowire.BytesType)
			b = protowire.AppendVarint(b, 2*doubleFieldSize)
			b = appendDouble(b, fieldQuantileQ, q.Q)
			b = appendDouble(b, fieldQuantileV, q.V)
		}
		return b
	case s.typ == dto.MetricType_COUNTER:
		b = protowire.AppendTag(b, fieldMetricCounter, protowire.BytesType)
	default:
		b = protowire.AppendTag(b, fieldMetricGauge, protowire.BytesType)
	}
	b = protowire.AppendVarint(b, doubleFieldSize)
	return appendDouble(b, fieldValue, s.value)
}

func appendDouble(b []byte, field protowire.Number, v float64) []byte {
	b = protowire.AppendTag(b, field, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(v))
}
