// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"strconv"
	"strings"
)

// ParseJSON reads the file --out_json writes. Before 24.01 it was not JSON
// (unquoted keys and strings, trailing commas: perftest issue #216), so
// this reads it the way NVIDIA's ngc_multinode_perf does, one "key: value"
// per line, which covers both dialects. gbits says whether the run had
// --report_gbits: the file does not carry the bandwidth unit.
//
// The runner parses stdout, not this file (the file is rewritten at every
// report, so -a leaves only the last size); ParseJSON is for operators who
// collect the files themselves.
func ParseJSON(b []byte, gbits bool) (*Report, error) {
	r := &Report{Info: map[string]string{}}
	section := ""
	vals := map[string]float64{}
	for _, raw := range strings.Split(string(b), "\n") {
		line := strings.TrimSpace(raw)
		line = strings.TrimSuffix(line, ",")
		if line == "" || line == "{" || line == "}" {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.Trim(strings.TrimSpace(key), `"`)
		val = strings.Trim(strings.TrimSpace(val), `"`)
		if val == "{" {
			section = key
			continue
		}
		switch section {
		case "test_info":
			if key == "test" {
				r.Title = strings.ReplaceAll(val, "_", " ")
			}
			r.Info[key] = val
		case "results":
			v, err := strconv.ParseFloat(val, 64)
			if err != nil || v < 0 {
				return nil, &ParseError{Reason: "results value not a number", Line: raw}
			}
			vals[key] = v
		}
	}
	size, iters := int64(vals["MsgSize"]), int64(vals["n_iterations"])
	switch {
	case has(vals, "BW_average"):
		scale := float64(1 << 20)
		r.Unit = "MiB/sec"
		if gbits {
			scale, r.Unit = 1e9/8, "Gb/sec"
		}
		r.Kind = KindBandwidth
		row := BandwidthRow{Bytes: size, Iterations: iters, AvgBytesPerSecond: vals["BW_average"] * scale}
		if p := vals["BW_peak"]; p > 0 {
			row.PeakBytesPerSecond, row.PeakMeasured = p*scale, true
		}
		if m, ok := vals["MsgRate"]; ok {
			row.MessagesPerSecond, row.HasMsgRate = m*1e6, true
		}
		r.Bandwidth = []BandwidthRow{row}
	case has(vals, "t_avg") || has(vals, "t_typical"):
		r.Kind, r.Unit = KindLatency, "usec"
		row := LatencyRow{Bytes: size, Iterations: iters}
		for key, set := range map[string]struct {
			dst *float64
			col Columns
		}{
			"t_min": {&row.Min, ColMin}, "t_max": {&row.Max, ColMax}, "t_typical": {&row.Typical, ColTypical},
			"t_avg": {&row.Avg, ColAvg}, "t_stdev": {&row.Stdev, ColStdev},
			"percentile_99": {&row.P99, ColP99}, "percentile_99.9": {&row.P999, ColP999},
		} {
			if v, ok := vals[key]; ok {
				*set.dst, row.Has = v*1e-6, row.Has|set.col
			}
		}
		if v, ok := vals["tps_average"]; ok {
			r.Kind, row.TPS, row.Has = KindLatencyDuration, v, row.Has|ColTPS
		}
		r.Latency = []LatencyRow{row}
	default:
		return nil, &ParseError{Reason: "no results section with BW_average or t_avg"}
	}
	return r, nil
}

func has(m map[string]float64, k string) bool { _, ok := m[k]; return ok }
