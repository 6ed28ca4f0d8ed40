// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// fabricText is what a text scrape of the fabric collector c writes
// (internal/serve/expo, as /metrics writes it), decoded.
func fabricText(t *testing.T, c Collector) map[string]*dto.MetricFamily {
	t.Helper()
	inner, h := unwrap(c)
	a := newAggregator(h, slog.New(slog.DiscardHandler), 0, map[string]Collector{"fabric": inner})
	fams, other := expo.Group(a.Metrics(context.Background())...)
	if len(other) != 0 {
		t.Fatalf("%d metrics not grouped", len(other))
	}
	var b bytes.Buffer
	if err := expo.WriteText(&b, fams, nil); err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			return out
		}
		out[mf.GetName()] = mf
	}
}

// TestFabricNodeDescriptionLabelPolicy: the recorded ibsim scan
// (internal/read/fabric/testdata/ibqueryerrors/ibsim16-iblinkinfo.stdout) with
// leaf001 named by 3,000 bytes, a byte that is not UTF-8 among them, and
// host0001 by a name with that byte: every series of both nodes is still
// written, each label value bounded and UTF-8, and the two cuts counted
// once each for the scan.
func TestFabricNodeDescriptionLabelPolicy(t *testing.T) {
	long := "leaf001 \xff" + strings.Repeat("é", 1495) + "x"
	rec, err := os.ReadFile(fabrictest.Recording("ibsim16-iblinkinfo.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	hostile := strings.NewReplacer("leaf001", long, "host0001 mlx5_0", "host0001 \xffmlx5_0").Replace(string(rec))
	scan := filepath.Join(t.TempDir(), "iblinkinfo.stdout")
	if err := os.WriteFile(scan, []byte(hostile), 0o644); err != nil {
		t.Fatal(err)
	}
	render := func(iblinkinfo string) map[string]*dto.MetricFamily {
		t.Helper()
		tools := fabrictest.Install(t)
		opts := FabricOptions{PortSeries: PortSeriesAll}
		opts.Path, opts.Counters, opts.IBQueryErrorsPath, opts.IBNetDiscoverPath, opts.SMInfoPath, opts.CacheDir = iblinkinfo, true, tools.IBQueryErrors, tools.IBNetDiscover, tools.SMInfo, t.TempDir()
		c, h := fabricOn(t, opts)
		h.Round(context.Background())
		return fabricText(t, hosted{c, h})
	}
	want := render(fabrictest.Install(t).IBLinkInfo)
	fake := filepath.Join(t.TempDir(), "iblinkinfo")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\ncat "+scan+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cut := names.Limited(names.Cut)
	got := render(fake)
	if n := names.Limited(names.Cut) - cut; n != 2 {
		t.Errorf("%d values counted cut, want 2 (leaf001's and host0001's description, once for the scan)", n)
	}
	leaf1 := names.Label(long)
	for _, name := range []string{"rdma_fabric_link_info", "rdma_fabric_link_state", "rdma_fabric_link_degraded",
		"rdma_fabric_link_rate_bytes_per_second", "rdma_fabric_node_info", "rdma_fabric_port_state",
		"rdma_fabric_port_symbol_errors_total"} {
		g, w := got[name], want[name]
		if g == nil || len(g.GetMetric()) != len(w.GetMetric()) || len(w.GetMetric()) == 0 {
			t.Errorf("%s: %d series, the recording gives %d", name, len(g.GetMetric()), len(w.GetMetric()))
			continue
		}
		named := 0
		for _, m := range g.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); len(v) > names.MaxLabelBytes || !utf8.ValidString(v) {
					t.Errorf("%s: label %s of %d bytes (UTF-8 %v)", name, l.GetName(), len(v), utf8.ValidString(v))
				} else if v == leaf1 || v == "host0001 \uFFFDmlx5_0" {
					named++
				}
			}
		}
		if strings.HasPrefix(name, "rdma_fabric_link") || name == "rdma_fabric_node_info" {
			if named == 0 {
				t.Errorf("%s: no series names leaf001 or host0001", name)
			}
		}
	}
	if !strings.HasPrefix(leaf1, "leaf001 \uFFFDé") || len(leaf1) < names.MaxLabelBytes-1 {
		t.Errorf("leaf001 is labelled %q", leaf1)
	}
}
