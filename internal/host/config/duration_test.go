// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// TestDurationsAreModelDuration: every duration in the file is
// prometheus/common's model.Duration (one parser per format, the one
// Prometheus's own configuration uses), in every section that has one, and
// its spellings ("30s", "10m", "1h30m", "1d") read as Prometheus reads them.
// Errors keep their line and the 1s floor.
func TestDurationsAreModelDuration(t *testing.T) {
	in := `diagnose:
  interval: 30s
  window: 1h30m
  thresholds:
    links:
      flap_window: 10m
      drop_after: 1d
probe:
  interval: 5m
  timeout: 90s
  scrape_guard: 2m
  bandwidth: {duration: 10s}
  responder: {max_duration: 1m}
`
	c, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var (
		d = c.Diagnose
		p = c.Probe
	)
	for name, tc := range map[string]struct {
		got  model.Duration
		want time.Duration
	}{
		"diagnose.interval":                     {d.Interval, 30 * time.Second},
		"diagnose.window":                       {d.Window, 90 * time.Minute},
		"diagnose.thresholds.links.flap_window": {d.Thresholds.Links.FlapWindow, 10 * time.Minute},
		"diagnose.thresholds.links.drop_after":  {d.Thresholds.Links.DropAfter, 24 * time.Hour},
		"probe.interval":                        {p.Interval, 5 * time.Minute},
		"probe.timeout":                         {p.Timeout, 90 * time.Second},
		"probe.scrape_guard":                    {p.ScrapeGuard, 2 * time.Minute},
		"probe.bandwidth.duration":              {p.Bandwidth.Duration, 10 * time.Second},
		"probe.responder.max_duration":          {p.Responder.MaxDuration, time.Minute},
	} {
		if time.Duration(tc.got) != tc.want {
			t.Errorf("%s = %v, want %v", name, tc.got, tc.want)
		}
	}

	for _, tc := range []struct{ in, want string }{
		{"diagnose:\n  interval: 10ms\n", `line 2: duration "10ms": want 1s or more, such as 30s or 10m`},
		{"diagnose:\n  interval: 0s\n", `line 2: duration "0s": want 1s or more`},
		{"diagnose:\n  interval: soon\n", `line 2: duration "soon": want 1s or more`},
		{"diagnose:\n  interval: [30s]\n", "line 2: want a duration such as 30s or 10m"},
		{"probe:\n  timeout: 30\n", `line 2: duration "30": want 1s or more`},
		{"diagnose:\n  thresholds:\n    links: {drop_after: -1m}\n", `line 3: duration "-1m"`},
		{"probe:\n  responder:\n    max_duration: {s: 1}\n", "line 3: want a duration"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}
