// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// The hand-written exposition (internal/serve/expo, what /metrics serves in the
// text format and the delimited protobuf) is pinned to client_golang: for
// every fixture host, one collection of the default collectors and the
// server's parts (with the diagnose status of one evaluation) is written
// by writeFast and by a client_golang registry with expfmt's encoders;
// the text must be byte-equal and the protobuf families proto.Equal. A
// registry error (a sample it refuses) fails the test too: expo would
// leave that sample out, promhttp by default fail the whole scrape.
func TestExpositionMatchesClientGolang(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "..", "..", "fixtures", "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, e := range entries {
		if e.IsDir() {
			hosts = append(hosts, e.Name())
		}
	}
	if len(hosts) < 20 {
		t.Fatalf("only %d fixture hosts: %v", len(hosts), hosts)
	}
	for _, name := range hosts {
		t.Run(name, func(t *testing.T) {
			report := diagnoseFixture(t, name)
			// The parts as the server has them: build info, the diagnosis,
			// the exporter's own series (go_*, process_*, promhttp_*).
			o := fixtureOptions(t, name)
			o.Parts = append(o.Parts, collector.NewDiagnoseStatus(func() *diagnose.Report { return report }))
			o.ExporterMetrics = true
			m, _ := newHandler(o)
			// The exporter's own registry (go_*, promhttp_*) is gathered
			// apart; here it holds fixed series, so that both sides see
			// the same values, written in name order among the others.
			own := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "go_threads", Help: "Number of OS threads created."}, func() float64 { return 7 })
			m.own = prometheus.NewRegistry()
			m.own.MustRegister(own)
			metrics := m.collect(context.Background())
			n := 0
			for _, ms := range metrics {
				n += len(ms)
			}

			var all metricList
			for _, ms := range metrics {
				all = append(all, ms...)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(all, own)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatalf("client_golang refuses the collection: %v", err)
			}

			var wantText, gotText bytes.Buffer
			enc := expfmt.NewEncoder(&wantText, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.writeFast(&gotText, metrics, expo.WriteText); err != nil {
				t.Fatal(err)
			}
			if gotText.String() != wantText.String() {
				t.Errorf("text differs from client_golang's (%d samples):\n%s", n, firstDiff(gotText.String(), wantText.String()))
			}

			var wantProto, gotProto bytes.Buffer
			enc = expfmt.NewEncoder(&wantProto, expfmt.NewFormat(expfmt.TypeProtoDelim))
			for _, mf := range mfs {
				if err := enc.Encode(mf); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.writeFast(&gotProto, metrics, expo.WriteProto); err != nil {
				t.Fatal(err)
			}
			got, want := decodeFamilies(t, &gotProto), decodeFamilies(t, &wantProto)
			if len(got) != len(want) {
				t.Errorf("protobuf: %d families, client_golang %d", len(got), len(want))
			}
			for i := range min(len(got), len(want)) {
				if !proto.Equal(got[i], want[i]) {
					t.Errorf("protobuf family %s differs from client_golang's %s:\n got %v\nwant %v",
						got[i].GetName(), want[i].GetName(), got[i], want[i])
					break
				}
			}
			if len(mfs) < 20 || !slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "rdma_diagnose_status" }) {
				t.Errorf("only %d families, or no rdma_diagnose_status", len(mfs))
			}
		})
	}
}

// diagnoseFixture evaluates every check on a fixture host once, for
// rdma_diagnose_status (its free-form targets are label values).
func diagnoseFixture(t *testing.T, name string) *diagnose.Report {
	t.Helper()
	p, err := hostfs.Paths{Rootfs: filepath.Join("..", "..", "..", "fixtures", "hosts", name)}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{}
	eval, err := diagnose.NewEvaluator(cfg, nil, checks.All())
	if err != nil {
		t.Fatal(err)
	}
	snap := (&diagnose.Reader{Host: rdmahost.New(rdmahost.Options{Paths: p})}).Read(context.Background())
	hist := diagnose.NewHistory(0, 2)
	hist.Add(snap)
	return eval.Evaluate(snap, hist)
}

// decodeFamilies decodes a delimited protobuf exposition, sorted by name.
func decodeFamilies(t *testing.T, r io.Reader) []*dto.MetricFamily {
	t.Helper()
	dec := expfmt.NewDecoder(r, expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("decoding protobuf: %v", err)
			}
			break
		}
		out = append(out, mf)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// firstDiff returns the first line where got and want differ, with its
// neighbours.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			lo := max(i-2, 0)
			return "line " + strconv.Itoa(i+1) + ":\n got " + strings.Join(g[lo:min(i+1, len(g))], "\n     ") +
				"\nwant " + strings.Join(w[lo:min(i+1, len(w))], "\n     ")
		}
	}
	return "(no line differs)"
}

// A sample the registry would refuse is left out of /metrics, counted in
// rdma_exposition_rejected_samples_total and logged once, however many
// scrapes meet it; the rest of the scrape is served.
func TestExpositionRejectedLoggedOnce(t *testing.T) {
	o := fixtureOptions(t, "dgx-h100")
	var logs bytes.Buffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bad := expo.NewDesc("rdma_test_bad_arity", "A collector's bug.", "device", "port")
	o.Parts = append(o.Parts, metricList{expo.Gauge(bad, 1, "mlx5_0")})
	m, _ := newHandler(o)
	count := func(body string) string {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, `rdma_exposition_rejected_samples_total{reason="label_count"} `) {
				return strings.Fields(line)[1]
			}
		}
		return ""
	}
	var counts []string
	for range 3 {
		w := httptest.NewRecorder()
		m.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body := w.Body.String()
		if strings.Contains(body, bad.Name) || !strings.Contains(body, "rdma_port_state{") {
			t.Fatalf("bad sample served, or the rest not:\n%.2000s", body)
		}
		counts = append(counts, count(body))
	}
	// The counter is the process's: counted after each scrape's parts
	// were collected, so a scrape shows the rejections of those before.
	if counts[1] == "" || counts[2] == "" || counts[1] == counts[2] {
		t.Errorf("label_count rejections over three scrapes: %v, want growing", counts)
	}
	// Once a process: no other test of this package leaves a sample out.
	if n := strings.Count(logs.String(), "reason=label_count"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
}
