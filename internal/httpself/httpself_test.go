// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package httpself

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/rdma-doctor/rdma_doctor/internal/expo"
)

// text is the exposition of what g gathers, as client_golang writes it.
func text(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// The same requests through Instrument and through promhttp's
// InstrumentMetricHandler count the same: the series are promhttp's, in
// flight while a scrape is served, by code after it, a code other than
// promhttp's three added when first answered, 200 when the handler set
// none. The text path's output (expo) is the registry's.
func TestMatchesPromhttp(t *testing.T) {
	ours := New()
	oursReg := prometheus.NewPedanticRegistry()
	oursReg.MustRegister(ours)
	theirs := prometheus.NewRegistry()
	var inFlight []string
	answer := func(w http.ResponseWriter, r *http.Request) {
		inFlight = append(inFlight, text(t, oursReg))
		switch code, _ := strconv.Atoi(r.URL.Query().Get("code")); code {
		case 0:
			_, _ = w.Write([]byte("body")) // no WriteHeader: 200
		case 204:
			// Neither header nor body.
		default:
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(code)
		}
	}
	a := ours.Instrument(http.HandlerFunc(answer))
	b := promhttp.InstrumentMetricHandler(theirs, http.HandlerFunc(answer))
	for _, q := range []string{"", "code=503", "", "code=404", "code=204", "code=500"} {
		for _, h := range []http.Handler{a, b} {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics?"+q, nil))
		}
	}
	got, want := text(t, oursReg), text(t, theirs)
	if got != want {
		t.Errorf("ours:\n%s\npromhttp's:\n%s", got, want)
	}
	if len(inFlight) == 0 || !bytes.Contains([]byte(inFlight[0]), []byte("promhttp_metric_handler_requests_in_flight 1\n")) {
		t.Errorf("in flight while serving: %q", inFlight)
	}
	fams, other := expo.Group(ours.AppendMetrics(nil))
	var fast bytes.Buffer
	if err := expo.WriteText(&fast, fams, nil); err != nil || len(other) != 0 {
		t.Fatal(err, other)
	}
	if fast.String() != want {
		t.Errorf("text path:\n%s\nwant\n%s", fast.String(), want)
	}
}
