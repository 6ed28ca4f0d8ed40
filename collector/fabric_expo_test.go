// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// TestFabricBlocksMatchClientGolang: the fabric's per-port and per-link
// series travel as rendered Blocks (internal/serve/expo); what a scrape writes
// of them, spliced into gzip, decompressed into plain text, or made again
// for protobuf, is what a client_golang registry writes of the same
// collection with expfmt.
func TestFabricBlocksMatchClientGolang(t *testing.T) {
	c := ibsimFabric(t, FabricOptions{})
	inner, h := unwrap(c)
	a := newAggregator(h, slog.New(slog.DiscardHandler), 0, map[string]Collector{"fabric": inner})
	metrics := a.Metrics(context.Background())
	blocks := 0
	for _, ms := range metrics {
		for _, m := range ms {
			if _, ok := m.(*expo.Block); ok {
				blocks++
			}
		}
	}
	if blocks != 2 {
		t.Fatalf("%d blocks in the collection, want the links' and the ports'", blocks)
	}
	var all []prometheus.Metric
	for _, ms := range metrics {
		all = append(all, expo.Expand(ms)...)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(fixedMetrics(all))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("client_golang refuses the collection: %v", err)
	}
	var wantText, wantProto, wantProtoText, wantCompact bytes.Buffer
	for _, w := range []struct {
		b *bytes.Buffer
		f expfmt.Format
	}{{&wantText, expfmt.NewFormat(expfmt.TypeTextPlain)}, {&wantProto, expfmt.NewFormat(expfmt.TypeProtoDelim)},
		{&wantProtoText, expfmt.NewFormat(expfmt.TypeProtoText)}, {&wantCompact, expfmt.NewFormat(expfmt.TypeProtoCompact)}} {
		enc := expfmt.NewEncoder(w.b, w.f)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The protobuf debugging formats, a series at a time from the
	// Blocks' protobuf segments, are expfmt's text of the same families
	// byte for byte (issue 35: they dropped every fabric series).
	for _, d := range []struct {
		want *bytes.Buffer
		f    expfmt.Format
	}{{&wantProtoText, expfmt.NewFormat(expfmt.TypeProtoText)}, {&wantCompact, expfmt.NewFormat(expfmt.TypeProtoCompact)}} {
		fams, _ := expo.Group(metrics...)
		var out bytes.Buffer
		if err := expo.WriteDebug(&out, fams, nil, d.f); err != nil {
			t.Fatal(err)
		}
		got, want := out.Bytes(), d.want.Bytes()
		if d.f.FormatType() == expfmt.TypeProtoCompact {
			// protobuf-go's compact text puts a second space at random
			// places, chosen per binary (internal/detrand: the format is
			// not stable on purpose), so the family cut into series is
			// compared with white space runs made one.
			got, want = []byte(strings.Join(strings.Fields(string(got)), " ")), []byte(strings.Join(strings.Fields(string(want)), " "))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, client_golang %d", d.f, len(got), len(want))
		}
	}
	write := func(proto, gz bool) []byte {
		fams, other := expo.Group(metrics...)
		if len(other) != 0 {
			t.Fatalf("%d metrics not grouped", len(other))
		}
		var out bytes.Buffer
		var w io.Writer = &out
		g := expo.NewGzipWriter()
		if gz {
			g.Reset(&out)
			w = g
		}
		fn := expo.WriteText
		if proto {
			fn = expo.WriteProto
		}
		if err := fn(w, fams, nil); err != nil {
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
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, gz := range []bool{true, false} {
		if got := write(false, gz); !bytes.Equal(got, wantText.Bytes()) {
			t.Errorf("text (gzip %v): %d bytes, client_golang %d", gz, len(got), wantText.Len())
		}
	}
	if !bytes.Equal(write(true, true), write(true, false)) {
		t.Error("protobuf: spliced into gzip differs from plain")
	}
	got, want := decodeAll(t, write(true, false)), decodeAll(t, wantProto.Bytes())
	if len(got) != len(want) || len(want) < 20 {
		t.Fatalf("protobuf: %d families, client_golang %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("protobuf family %s differs from client_golang's", got[i].GetName())
		}
	}
}

// fixedMetrics is a collection as a prometheus.Collector (unchecked).
type fixedMetrics []prometheus.Metric

func (fixedMetrics) Describe(chan<- *prometheus.Desc) {}

func (f fixedMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, m := range f {
		ch <- m
	}
}

func decodeAll(t *testing.T, b []byte) []*dto.MetricFamily {
	t.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			return out
		}
		out = append(out, mf)
	}
}
