// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestScrapeTimeout(t *testing.T) {
	for _, tc := range []struct {
		header string
		def    time.Duration
		want   time.Duration
	}{
		{"", 10 * time.Second, 10 * time.Second},
		{"5", 10 * time.Second, 4500 * time.Millisecond},
		{"30", 10 * time.Second, 10 * time.Second},
		{"0.2", 10 * time.Second, 100 * time.Millisecond},
		{"bogus", 10 * time.Second, 10 * time.Second},
		{"-3", 10 * time.Second, 10 * time.Second},
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if tc.header != "" {
			r.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", tc.header)
		}
		if got := scrapeTimeout(r, tc.def); got != tc.want {
			t.Errorf("header %q: %v, want %v", tc.header, got, tc.want)
		}
	}
}
