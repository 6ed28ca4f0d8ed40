// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package expo is the scrape's fast path: metric samples that are
// prometheus.Metrics (so a registry, promhttp's protobuf path and the
// tests' testutil take them as they are) but that a scrape in the text
// format writes straight to the response, without client_golang's label
// pairs, dto conversion and per-family encoding, which cost most of a
// scrape (docs/measurements.md#expo). The output is
// the text format 0.0.4 byte for byte as promhttp writes it: families
// sorted by name, series by their label values in label-name order. A
// sample the registry would refuse is left out and counted (Reject); the
// rest is what promhttp with ContinueOnError writes (the test
// TestExpositionMatchesClientGolang in internal/serve/scrape compares the two
// on every fixture host, in both formats).
package expo

import (
	"cmp"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// Desc describes a metric family: what prometheus.Desc holds, readable.
type Desc struct {
	Name, Help string
	Labels     []string
	// order is the label indexes sorted by label name, as client_golang
	// orders label pairs.
	order []int
	prom  *prometheus.Desc
	// header is the family's HELP line and the start of its TYPE line
	// ("# HELP name help\n# TYPE name "), escaped once here instead of on
	// every scrape.
	header []byte
}

// NewDesc returns the Desc of a family with variable labels.
func NewDesc(name, help string, labels ...string) *Desc {
	d := &Desc{Name: name, Help: help, Labels: labels, prom: prometheus.NewDesc(name, help, labels, nil)}
	d.order = make([]int, len(labels))
	for i := range d.order {
		d.order[i] = i
	}
	sort.SliceStable(d.order, func(i, j int) bool { return labels[d.order[i]] < labels[d.order[j]] })
	h := append([]byte("# HELP "), name...)
	h = append(h, ' ')
	h = appendEscaped(h, help, false)
	h = append(h, "\n# TYPE "...)
	d.header = append(h, name...)
	return d
}

// Prometheus is the client_golang Desc (Describe).
func (d *Desc) Prometheus() *prometheus.Desc { return d.prom }

// Sample is one series' value. It is immutable, so a collection's samples
// can be shared by concurrent scrapes.
type Sample struct {
	desc   *Desc
	typ    dto.MetricType
	value  float64 // a summary's: the sum
	labels []string
	// summary is a summary's count and quantiles: behind a pointer, so
	// that the gauges and counters, thousands a scrape, carry one word
	// for them, not four.
	summary *summary
}

type summary struct {
	count     uint64
	quantiles []Quantile // in increasing order of Q
}

// Quantile is one quantile of a summary: Q in [0, 1], its value V.
type Quantile struct{ Q, V float64 }

// Gauge and Counter make samples; labels are in the Desc's order. A
// label count that does not match the Desc is a bug in the collector:
// Group leaves the sample out (LabelCount), Write returns the registry's
// error.
func Gauge(d *Desc, v float64, labels ...string) *Sample {
	return &Sample{desc: d, typ: dto.MetricType_GAUGE, value: v, labels: labels}
}

// Counter makes a counter sample.
func Counter(d *Desc, v float64, labels ...string) *Sample {
	return &Sample{desc: d, typ: dto.MetricType_COUNTER, value: v, labels: labels}
}

// Summary makes a summary sample: its count and sum since start, and
// quantiles in increasing order of Q.
func Summary(d *Desc, count uint64, sum float64, quantiles []Quantile, labels ...string) *Sample {
	return &Sample{desc: d, typ: dto.MetricType_SUMMARY, value: sum, labels: labels, summary: &summary{count, quantiles}}
}

// Desc implements prometheus.Metric.
func (s *Sample) Desc() *prometheus.Desc { return s.desc.prom }

// Write implements prometheus.Metric: the slow path (protobuf, tests).
func (s *Sample) Write(m *dto.Metric) error {
	c, err := s.Const()
	if err != nil {
		return err
	}
	return c.Write(m)
}

// Const is the sample as client_golang's const metric: what an exporter
// built on client_golang makes of each series at each scrape (the
// exposition benchmark in internal/dev/scrapebench compares the two ways).
func (s *Sample) Const() (prometheus.Metric, error) {
	if s.typ == dto.MetricType_SUMMARY {
		q := make(map[float64]float64, len(s.summary.quantiles))
		for _, x := range s.summary.quantiles {
			q[x.Q] = x.V
		}
		return prometheus.NewConstSummary(s.desc.prom, s.summary.count, s.value, q, s.labels...)
	}
	vt := prometheus.GaugeValue
	if s.typ == dto.MetricType_COUNTER {
		vt = prometheus.CounterValue
	}
	return prometheus.NewConstMetric(s.desc.prom, vt, s.value, s.labels...)
}

// Family is the samples of one metric name, or a Block's rendered family
// (seg, with block its source).
type Family struct {
	desc    *Desc
	typ     dto.MetricType
	samples []*Sample
	block   *Block
	seg     *Segment
	pseg    *Segment
}

// Group sorts samples into families by name; metrics that are not
// Samples are returned apart (they take the slow path). It takes several
// slices so that a caller can add its own to a shared collection's
// without appending to it. A sample the registry would refuse (Reject)
// is left out and counted: a wrong number of label values, a type or
// Desc other than its family's; duplicates are left out when the family
// is sorted, where they meet, and label values that are not UTF-8 when
// it is written, by the scan the writing makes anyway (a second scan
// here would cost a visible share of the writing:
// docs/measurements.md#expo).
func Group(metrics ...[]prometheus.Metric) (fams map[string]*Family, other []prometheus.Metric) {
	// Each family's samples go into its part of one array, sized by a
	// first pass that counts them: appending to a slice per family
	// reallocated each about five times (440 allocations a dgx-h100
	// scrape).
	counts, total := countFamilies(metrics)
	fams = make(map[string]*Family, len(counts))
	all := make([]*Sample, total)
	families := make([]Family, 0, len(counts))
	newFamily := func(s *Sample) *Family {
		n := counts[s.desc]
		families = append(families, Family{desc: s.desc, typ: s.typ, samples: all[:0:n]})
		all = all[n:]
		return &families[len(families)-1]
	}
	// A collector sends a family's samples in runs (a port's counters,
	// a device's hw counters), and most runs are one sample (a port's
	// gauges, one family each): a Desc's family, and whether it clashes
	// with it, are looked up by name once per Desc and kept by pointer.
	type familyOf struct {
		f     *Family
		clash bool
	}
	byDesc := make(map[*Desc]familyOf, len(counts))
	var last *Desc
	var f *Family
	var clash bool
	var blocks []*Block
	add := func(ms []prometheus.Metric) {
		for _, m := range ms {
			s, ok := m.(*Sample)
			if !ok {
				if b, ok := m.(*Block); ok {
					blocks = append(blocks, b)
					continue
				}
				other = append(other, m)
				continue
			}
			if s.desc != last {
				last = s.desc
				// No family yet: asked again, one may have been
				// made by another Desc of the name since.
				fo, ok := byDesc[s.desc]
				if !ok || fo.f == nil {
					fo.f = fams[s.desc.Name]
					fo.clash = fo.f != nil && !fo.f.desc.same(s.desc)
					byDesc[s.desc] = fo
				}
				f, clash = fo.f, fo.clash
			}
			switch {
			case len(s.labels) != len(s.desc.Labels):
				reject(LabelCount, s)
				continue
			case clash || f != nil && s.typ != f.typ:
				reject(TypeClash, s)
				continue
			case f == nil:
				// The family's type is its first good sample's, as
				// the registry's is.
				f = newFamily(s)
				fams[s.desc.Name] = f
				byDesc[s.desc] = familyOf{f: f}
			}
			f.samples = append(f.samples, s)
		}
	}
	for _, ms := range metrics {
		add(ms)
	}
	// A Block's families come whole; one that meets a family of the same
	// name (a bug) is taken as its samples, which the checks above then
	// judge one by one.
	for _, b := range blocks {
		whole := true
		for i := range b.fams {
			if fams[b.fams[i].desc.Name] != nil {
				whole = false
				break
			}
		}
		if !whole {
			last = nil
			add(b.Samples())
			continue
		}
		for i := range b.fams {
			bf := &b.fams[i]
			fams[bf.desc.Name] = &Family{desc: bf.desc, typ: bf.typ, block: b, seg: &bf.seg, pseg: &bf.pseg}
		}
	}
	return fams, other
}

// countFamilies counts the samples of each Desc, and all of them: the
// sizes Group gives its families (a family whose name two Descs share
// grows past its first Desc's count by appending).
func countFamilies(metrics [][]prometheus.Metric) (map[*Desc]int, int) {
	counts := map[*Desc]int{}
	total := 0
	var last *Desc
	run := 0
	for _, ms := range metrics {
		for _, m := range ms {
			s, ok := m.(*Sample)
			if !ok {
				continue
			}
			if s.desc != last {
				if last != nil {
					counts[last] += run
				}
				last, run = s.desc, 0
			}
			run++
			total++
		}
	}
	if last != nil {
		counts[last] += run
	}
	return counts, total
}

// flushAt is how much text WriteText gathers before it writes: large
// writes for the compressor, a bounded buffer for any exposition.
const flushAt = 32 << 10

// WriteText writes the families and the gathered ones (the exporter's own
// registry) as one text exposition sorted by family name. A gathered
// family with the name of one of ours is skipped (promhttp would report
// the duplicate; the registry never has one of ours).
func WriteText(w io.Writer, fams map[string]*Family, gathered []*dto.MetricFamily) error {
	return stream(w, fams, gathered,
		func(w io.Writer, mf *dto.MetricFamily) error {
			// expfmt buffers its own writes.
			_, err := expfmt.MetricFamilyToText(w, mf)
			return err
		},
		func(s *streamer, f *Family) error {
			if f.seg != nil {
				if err := s.flush(); err != nil {
					return err
				}
				return s.writeSegment(f.seg)
			}
			var err error
			if s.buf, err = f.appendText(s.buf, s.flushed); err != nil {
				return err
			}
			return s.maybeFlush()
		})
}

// streamer is the bounded buffer an exposition goes through on its way to
// the writer: flushed whenever it passes flushAt, so no family, however
// large (a fabric's), is built whole in memory.
type streamer struct {
	w   io.Writer
	buf []byte
	// inflate decompresses a Block's segments for a writer that is not
	// a GzipWriter, one after another.
	inflate io.Reader
}

func (s *streamer) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	return err
}

// flushed writes b, the streamer's buffer, and returns it emptied
// (appendText's flush).
func (s *streamer) flushed(b []byte) ([]byte, error) {
	s.buf = b
	err := s.flush()
	return s.buf, err
}

func (s *streamer) maybeFlush() error {
	if len(s.buf) >= flushAt {
		return s.flush()
	}
	return nil
}

// textBufSize is a streamer's buffer: flushAt and a series' worth more.
const textBufSize = flushAt + 4<<10

// textBufs are the streamers' buffers, reused: a served scrape's
// largest allocation (a tenth of its bytes) if made anew, and the
// garbage collector's work follows the bytes allocated. A sync.Pool
// keeps what the scrapes of the last collection cycles used and drops
// the rest.
var textBufs = sync.Pool{New: func() any { return new([]byte) }}

// stream writes our families and the gathered ones in name order, each
// kind in its format's way: WriteText's and WriteProto's one loop.
func stream(w io.Writer, fams map[string]*Family, gathered []*dto.MetricFamily,
	writeGathered func(io.Writer, *dto.MetricFamily) error, writeOurs func(*streamer, *Family) error) error {
	names, byName := familyNames(fams, gathered)
	bp := textBufs.Get().(*[]byte)
	if *bp == nil {
		*bp = make([]byte, 0, textBufSize)
	}
	s := streamer{w: w, buf: (*bp)[:0]}
	defer func() {
		// Not kept if a long series grew it well past its size: the
		// pool holds buffers of the usual size only.
		if cap(s.buf) <= 2*textBufSize {
			*bp = s.buf[:0]
			textBufs.Put(bp)
		}
	}()
	for _, n := range names {
		if mf := byName[n]; mf != nil {
			if err := s.flush(); err != nil {
				return err
			}
			if err := writeGathered(w, mf); err != nil {
				return err
			}
			continue
		}
		if err := writeOurs(&s, fams[n]); err != nil {
			return err
		}
	}
	return s.flush()
}

// Gathered converts families to dto (the protobuf path).
func Gathered(fams map[string]*Family) ([]*dto.MetricFamily, error) {
	fams = expandBlocks(fams)
	var out []*dto.MetricFamily
	for _, f := range fams {
		mf := &dto.MetricFamily{Name: proto.String(f.desc.Name), Help: proto.String(f.desc.Help), Type: f.typ.Enum()}
		for _, s := range f.sorted() {
			m := &dto.Metric{}
			if err := s.Write(m); err != nil {
				return nil, err
			}
			mf.Metric = append(mf.Metric, m)
		}
		out = append(out, mf)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// sorted orders the samples as client_golang does: by label values, in
// label-name order.
func (f *Family) sorted() []*Sample {
	order := f.desc.order
	cmp := func(a, b *Sample) int {
		for _, i := range order {
			if i >= len(a.labels) || i >= len(b.labels) {
				break
			}
			if c := strings.Compare(a.labels[i], b.labels[i]); c != 0 {
				return c
			}
		}
		return 0
	}
	// Most families arrive in order (a collector walks devices and ports
	// in the order their labels sort): checking costs one comparison per
	// sample. The rest arrive as runs in order (a port's counters, by
	// name, where the counter label sorts first): the same scan finds
	// where each run starts, and merging the runs costs a comparison per
	// sample and level, about half of what sorting them did. The same
	// comparisons find duplicates, which sorting puts side by side.
	var runs []int
	dup := false
	for i := 1; i < len(f.samples); i++ {
		if c := cmp(f.samples[i-1], f.samples[i]); c > 0 {
			if runs == nil {
				runs = append(make([]int, 0, 16), 0)
			}
			runs = append(runs, i)
		} else if c == 0 {
			dup = true
		}
	}
	if runs == nil {
		if dup {
			f.samples = dedup(f.samples, cmp)
		}
		return f.samples
	}
	out := mergeRuns(f.samples, runs, cmp, &dup)
	if dup {
		out = dedup(out, cmp)
	}
	f.samples = out
	return out
}

// mergeRuns merges the runs in order that start at runs (the first at 0)
// into a new slice, pairwise, level by level. Of equal samples the first
// collected stays first (the registry keeps it), and meeting one sets
// dup: two samples that end side by side were compared with each other.
func mergeRuns(samples []*Sample, runs []int, cmp func(a, b *Sample) int, dup *bool) []*Sample {
	n := len(samples)
	a := slices.Clone(samples)
	b := make([]*Sample, n)
	for len(runs) > 1 {
		merged := 0
		for i := 0; i < len(runs); i += 2 {
			lo, mid, hi := runs[i], n, n
			if i+1 < len(runs) {
				mid = runs[i+1]
			}
			if i+2 < len(runs) {
				hi = runs[i+2]
			}
			l, r, k := lo, mid, lo
			for l < mid && r < hi {
				c := cmp(a[r], a[l])
				if c < 0 {
					b[k] = a[r]
					r++
				} else {
					*dup = *dup || c == 0
					b[k] = a[l]
					l++
				}
				k++
			}
			k += copy(b[k:], a[l:mid])
			copy(b[k:], a[r:hi])
			runs[merged] = lo
			merged++
		}
		runs = runs[:merged]
		a, b = b, a
	}
	return a
}

// dedup leaves out, in place, each sorted sample equal to the one before
// it (Duplicate): the first collected is kept, as the registry keeps it.
func dedup(samples []*Sample, cmp func(a, b *Sample) int) []*Sample {
	out := samples[:1]
	for _, s := range samples[1:] {
		if cmp(out[len(out)-1], s) == 0 {
			reject(Duplicate, s)
			continue
		}
		out = append(out, s)
	}
	return out
}

// same reports whether d and e describe one family: name, help and
// labels (two collectors may each make the Desc of a family).
func (d *Desc) same(e *Desc) bool {
	return d == e || d.Name == e.Name && d.Help == e.Help && slices.Equal(d.Labels, e.Labels)
}

// appendText appends the family's text exposition to b. flush, when
// set, is given b whenever it holds flushAt bytes or more after a
// series, and returns the buffer to go on with: a family of any size is
// written through a bounded buffer. It is only called once a series has
// been written, so a family whose every sample is refused (which takes
// its header back) was never flushed.
func (f *Family) appendText(b []byte, flush func([]byte) ([]byte, error)) ([]byte, error) {
	d := f.desc
	start := len(b)
	b = append(b, d.header...)
	switch f.typ {
	case dto.MetricType_COUNTER:
		b = append(b, " counter\n"...)
	case dto.MetricType_SUMMARY:
		b = append(b, " summary\n"...)
	default:
		b = append(b, " gauge\n"...)
	}
	written := false
	for _, s := range f.sorted() {
		// A label value that is not UTF-8 shows in the scan that escaping
		// makes anyway (free of cost for ASCII): its sample's lines are
		// taken back.
		line := len(b)
		var ok bool
		if f.typ != dto.MetricType_SUMMARY {
			b, ok = appendSeries(b, d.Name, "", d, s, false, 0)
			if !ok {
				b = b[:line]
				reject(InvalidUTF8, s)
				continue
			}
			b = appendFloat(b, s.value)
			b = append(b, '\n')
			written = true
			if flush != nil && len(b) >= flushAt {
				var err error
				if b, err = flush(b); err != nil {
					return b, err
				}
			}
			continue
		}
		// As expfmt writes a summary: a line per quantile, the quantile
		// label after the others, then _sum and _count.
		if !validLabels(s.labels) {
			reject(InvalidUTF8, s)
			continue
		}
		for _, q := range s.summary.quantiles {
			b, _ = appendSeries(b, d.Name, "", d, s, true, q.Q)
			b = appendFloat(b, q.V)
			b = append(b, '\n')
		}
		b, _ = appendSeries(b, d.Name, "_sum", d, s, false, 0)
		b = appendFloat(b, s.value)
		b = append(b, '\n')
		b, _ = appendSeries(b, d.Name, "_count", d, s, false, 0)
		b = appendFloat(b, float64(s.summary.count))
		b = append(b, '\n')
		written = true
		if flush != nil && len(b) >= flushAt {
			var err error
			if b, err = flush(b); err != nil {
				return b, err
			}
		}
	}
	if !written {
		// Every sample left out: no family, as the registry has none.
		return b[:start], nil
	}
	return b, nil
}

// appendSeries appends a series' name (with suffix), its labels in name
// order and, with quantile, the quantile label last, then the space
// before the value; false if a label value is not UTF-8.
func appendSeries(b []byte, name, suffix string, d *Desc, s *Sample, quantile bool, q float64) ([]byte, bool) {
	b = append(b, name...)
	b = append(b, suffix...)
	valid := true
	if len(d.order) > 0 || quantile {
		b = append(b, '{')
		for k, i := range d.order {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, d.Labels[i]...)
			b = append(b, `="`...)
			if i < len(s.labels) {
				var ok bool
				b, ok = appendLabelValue(b, s.labels[i])
				valid = valid && ok
			}
			b = append(b, '"')
		}
		if quantile {
			if len(d.order) > 0 {
				b = append(b, ',')
			}
			b = append(b, `quantile="`...)
			b = appendFloat(b, q)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, ' '), valid
}

// appendLabelValue appends a label value escaped, and reports whether it
// is UTF-8. Most values are plain ASCII (device names, port numbers,
// counter names): one pass tells, and they are copied whole.
func appendLabelValue(b []byte, v string) ([]byte, bool) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c >= utf8.RuneSelf || c == '\\' || c == '\n' || c == '"' {
			return appendEscaped(b, v, true), utf8.ValidString(v[i:])
		}
	}
	return append(b, v...), true
}

// appendEscaped escapes as the text format does: backslash and newline in
// HELP, and the double quote too in label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !needsEscape(s, quote) {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// needsEscape reports whether s holds a byte appendEscaped changes.
func needsEscape(s string, quote bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '\n' || c == '"' && quote {
			return true
		}
	}
	return false
}

// appendFloat formats a value as expfmt does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}
