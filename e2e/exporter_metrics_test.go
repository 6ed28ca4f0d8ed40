// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// scrapeAs scrapes /metrics in the format accept asks for and
// parses it.
func scrapeAs(t *testing.T, e *exporter, accept string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+"/metrics", nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics (%s): HTTP %d", accept, resp.StatusCode)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("/metrics (%s): %v", accept, err)
		}
		out[mf.GetName()] = &mf
	}
	return out
}

const protobufAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"

// The exporter's own series (build info, go_*, process_*, promhttp_*;
// the text path writes the build info and process_* itself and gathers
// go_* and promhttp_* through client_golang's registry) are the same
// families in the text format and in protobuf: the same names, types
// and series, the GC pauses a summary, the scrapes counted by code. --web.disable-exporter-metrics
// leaves out go_*, process_* and promhttp_* (only the build info stays).
func TestExporterOwnSeries(t *testing.T) {
	e := start(t, hostArgs(t, "dgx-h100")...)
	text := scrapeAs(t, e, "text/plain;version=0.0.4")
	proto := scrapeAs(t, e, protobufAccept)
	own := func(fams map[string]*dto.MetricFamily) []string {
		var out []string
		for name, mf := range fams {
			if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") || name == "rdma_doctor_build_info" {
				out = append(out, name+" "+mf.GetType().String()+" "+strings.Repeat("x", len(mf.GetMetric())))
			}
		}
		slices.Sort(out)
		return out
	}
	if a, b := own(text), own(proto); !slices.Equal(a, b) || len(a) < 30 {
		t.Errorf("own families differ between text and protobuf:\ntext  %v\nproto %v", a, b)
	}
	gc := proto["go_gc_duration_seconds"]
	if gc.GetType() != dto.MetricType_SUMMARY || len(gc.GetMetric()[0].GetSummary().GetQuantile()) != 5 {
		t.Errorf("go_gc_duration_seconds: %v", gc)
	}
	// The text scrape and the first of start's wait are done: at least
	// one scrape answered 200 before the protobuf one.
	var ok200 float64
	for _, m := range proto["promhttp_metric_handler_requests_total"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "200" {
			ok200 = m.GetCounter().GetValue()
		}
	}
	if ok200 < 1 {
		t.Errorf("promhttp_metric_handler_requests_total{code=\"200\"} = %v after a scrape", ok200)
	}
	if v := proto["promhttp_metric_handler_requests_in_flight"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("promhttp_metric_handler_requests_in_flight = %v while serving", v)
	}

	bare := start(t, append(hostArgs(t, "dgx-h100"), "--web.disable-exporter-metrics")...)
	for _, accept := range []string{"text/plain;version=0.0.4", protobufAccept} {
		got := own(scrapeAs(t, bare, accept))
		if len(got) != 1 || !strings.HasPrefix(got[0], "rdma_doctor_build_info ") {
			t.Errorf("--web.disable-exporter-metrics (%s): own families %v, want the build info alone", accept, got)
		}
	}
}
