// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

func TestHistoryBounded(t *testing.T) {
	h := diagnose.HistoryFor(10*time.Minute, 30*time.Second)
	if h.Cap() != 22 {
		t.Fatalf("capacity %d, want 10m/30s+2 = 22", h.Cap())
	}
	// A week of samples every 30 s: the ring never grows and never holds
	// more than the window.
	for i := 0; i < 2*60*24*7; i++ {
		h.Add(diagnosetest.CounterSnap(diagnosetest.T0.Add(time.Duration(i)*30*time.Second), map[string]uint64{"symbol_error": uint64(i)}, nil))
	}
	if h.Len() > h.Cap() || h.Cap() != 22 {
		t.Fatalf("len %d cap %d", h.Len(), h.Cap())
	}
	if h.Span() > 10*time.Minute {
		t.Errorf("span %v beyond the window", h.Span())
	}
	d, ok := h.Increase(diagnose.CounterKey{Device: "mlx5_0", Port: 1, Name: "symbol_error"})
	if !ok || d.Increase != 20 || d.Span != 10*time.Minute {
		t.Errorf("increase over the window %+v %v, want +20 over 10m", d, ok)
	}
	// A window shorter than capacity*interval drops by age.
	h = diagnose.NewHistory(time.Minute, 100)
	for i := 0; i < 10; i++ {
		h.Add(diagnosetest.CounterSnap(diagnosetest.T0.Add(time.Duration(i)*20*time.Second), nil, nil))
	}
	if h.Len() != 4 {
		t.Errorf("window 1m at 20s keeps 4 samples, got %d", h.Len())
	}
}

func TestHistoryIncrease(t *testing.T) {
	key := diagnose.CounterKey{Device: "mlx5_0", Port: 1, Name: "symbol_error"}
	hwKey := diagnose.CounterKey{Device: "mlx5_0", Port: 1, HW: true, Name: "out_of_sequence"}
	for _, tc := range []struct {
		name          string
		values        []int64 // -1: the counter is missing in that sample
		hw            bool
		inc           uint64
		ok            bool
		resets, wraps int
	}{
		{"one sample", []int64{5}, false, 0, false, 0, 0},
		{"rising", []int64{5, 7, 20}, false, 15, true, 0, 0},
		{"flat", []int64{9, 9}, false, 0, true, 0, 0},
		{"PMA reset (perfquery -R)", []int64{100, 110, 3}, false, 13, true, 1, 0},
		{"missing in the middle", []int64{1, -1, 4}, false, 3, true, 0, 0},
		{"missing but one", []int64{-1, 4, -1}, false, 0, false, 0, 0},
		{"hw 32-bit wrap", []int64{4294967290, 4}, true, 10, true, 0, 1},
		{"hw reset from low", []int64{1000, 10}, true, 10, true, 1, 0},
	} {
		h := diagnose.NewHistory(0, 10)
		for i, v := range tc.values {
			pma, hw := map[string]uint64{}, map[string]uint64{}
			if v >= 0 {
				if tc.hw {
					hw["out_of_sequence"] = uint64(v)
				} else {
					pma["symbol_error"] = uint64(v)
				}
			}
			h.Add(diagnosetest.CounterSnap(diagnosetest.T0.Add(time.Duration(i)*time.Second), pma, hw))
		}
		k := key
		if tc.hw {
			k = hwKey
		}
		d, ok := h.Increase(k)
		if ok != tc.ok || d.Increase != tc.inc || d.Resets != tc.resets || d.Wraps != tc.wraps {
			t.Errorf("%s: %+v %v, want +%d ok=%v resets=%d wraps=%d", tc.name, d, ok, tc.inc, tc.ok, tc.resets, tc.wraps)
		}
	}
	// A clock step backwards cannot be ordered: the history restarts.
	h := diagnose.NewHistory(0, 10)
	h.Add(diagnosetest.CounterSnap(diagnosetest.T0, map[string]uint64{"symbol_error": 1}, nil))
	h.Add(diagnosetest.CounterSnap(diagnosetest.T0.Add(-time.Minute), map[string]uint64{"symbol_error": 5}, nil))
	if h.Len() != 1 {
		t.Errorf("after a clock step back: %d samples, want 1", h.Len())
	}
}

// TestCounterChecks judges increases against the thresholds, reports
// saturated counters as unknown, and skips with one sample.
func TestCounterChecks(t *testing.T) {
	cc := func(id string) func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error) {
		for _, c := range checks.All() {
			if c.ID == id {
				return c.Run
			}
		}
		t.Fatalf("no check %s", id)
		return nil
	}
	two := func(before, after map[string]uint64, hwBefore, hwAfter map[string]uint64) (*diagnose.Reading, *diagnose.History) {
		h := diagnose.NewHistory(0, 10)
		h.Add(diagnosetest.CounterSnap(diagnosetest.T0, before, hwBefore))
		s := diagnosetest.CounterSnap(diagnosetest.T0.Add(10*time.Minute), after, hwAfter)
		h.Add(s)
		return s, h
	}
	cfg := &config.Config{}
	for _, tc := range []struct {
		name          string
		check         string
		before, after map[string]uint64
		hwB, hwA      map[string]uint64
		cfg           *config.Config
		sev           diagnose.Severity
		unknown       bool
		evidence      string
	}{
		{"symbol +57 fails", "ctr.symbol", map[string]uint64{"symbol_error": 4127}, map[string]uint64{"symbol_error": 4184}, nil, nil, cfg,
			diagnose.Fail, false, "symbol_error +57 in the last 10m0s on mlx5_0/1 (4127 → 4184)"},
		{"symbol +3 warns", "ctr.symbol", map[string]uint64{"symbol_error": 10}, map[string]uint64{"symbol_error": 13}, nil, nil, cfg,
			diagnose.Warn, false, "+3"},
		{"old errors, no increase, pass", "ctr.symbol", map[string]uint64{"symbol_error": 4127}, map[string]uint64{"symbol_error": 4127}, nil, nil, cfg,
			diagnose.Pass, false, "no increase in the last 10m0s"},
		{"configured limit", "ctr.symbol", map[string]uint64{"symbol_error": 10}, map[string]uint64{"symbol_error": 13}, nil, nil,
			diagnosetest.MustParse(t, "diagnose:\n  thresholds:\n    counters:\n      symbol_error: {warn_above: 5}\n"), diagnose.Pass, false, "+3"},
		{"link_downed saturated is unknown", "ctr.downed", map[string]uint64{"link_downed": 255}, map[string]uint64{"link_downed": 255}, nil, nil, cfg,
			diagnose.Warn, true, "saturated at 255"},
		{"xmit_wait saturated at 2^32-1", "ctr.xmit_wait", map[string]uint64{"port_xmit_wait": 4294967295}, map[string]uint64{"port_xmit_wait": 4294967295}, nil, nil, cfg,
			diagnose.Warn, true, "saturated"},
		{"saturated plus a failing neighbour", "ctr.rcv_err",
			map[string]uint64{"port_rcv_errors": 65535, "port_rcv_remote_physical_errors": 0},
			map[string]uint64{"port_rcv_errors": 65535, "port_rcv_remote_physical_errors": 500}, nil, nil, cfg, diagnose.Fail, true, "port_rcv_remote_physical_errors +500"},
		{"retransmits warn", "hw.retrans", nil, nil, map[string]uint64{"out_of_sequence": 1, "local_ack_timeout_err": 0},
			map[string]uint64{"out_of_sequence": 9, "local_ack_timeout_err": 0}, cfg, diagnose.Warn, false, "out_of_sequence +8"},
		{"ack timeouts fail", "hw.retrans", nil, nil, map[string]uint64{"local_ack_timeout_err": 0},
			map[string]uint64{"local_ack_timeout_err": 1000}, cfg, diagnose.Fail, false, "local_ack_timeout_err +1000"},
		{"hw counter wrap is an increase", "hw.fatal", nil, nil, map[string]uint64{"rnr_nak_retry_err": 4294967295},
			map[string]uint64{"rnr_nak_retry_err": 1}, cfg, diagnose.Fail, false, "wrapped 1 time"},
		// 4-bit ctr.integrity counters: pinned at 15 all window long
		// cannot be judged (no "clear it" on every port of a fleet);
		// rising to 15 within the window is an increase.
		{"overrun pinned at 15 is not judged", "ctr.integrity",
			map[string]uint64{"local_link_integrity_errors": 0, "excessive_buffer_overrun_errors": 15},
			map[string]uint64{"local_link_integrity_errors": 0, "excessive_buffer_overrun_errors": 15}, nil, nil, cfg,
			diagnose.Pass, false, "excessive_buffer_overrun_errors reads 15, its maximum, in every sample of the last 10m0s"},
		{"overrun rising to 15 fails", "ctr.integrity",
			map[string]uint64{"local_link_integrity_errors": 0, "excessive_buffer_overrun_errors": 2},
			map[string]uint64{"local_link_integrity_errors": 0, "excessive_buffer_overrun_errors": 15}, nil, nil, cfg,
			diagnose.Fail, false, "excessive_buffer_overrun_errors +13"},
		{"pinned overrun beside a rising integrity error", "ctr.integrity",
			map[string]uint64{"local_link_integrity_errors": 1, "excessive_buffer_overrun_errors": 15},
			map[string]uint64{"local_link_integrity_errors": 3, "excessive_buffer_overrun_errors": 15}, nil, nil, cfg,
			diagnose.Warn, false, "local_link_integrity_errors +2"},
		{"congestion reported only", "hw.cc", nil, nil, map[string]uint64{"np_cnp_sent": 0, "rp_cnp_ignored": 0},
			map[string]uint64{"np_cnp_sent": 5000, "rp_cnp_ignored": 0}, cfg, diagnose.Pass, false, "np_cnp_sent +5000"},
	} {
		s, h := two(tc.before, tc.after, tc.hwB, tc.hwA)
		fs, err := cc(tc.check)(s, h, tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		f := diagnosetest.FindingOf(t, fs, "mlx5_0/1")
		if f.Severity != tc.sev || f.Unknown != tc.unknown || !strings.Contains(f.Evidence, tc.evidence) {
			t.Errorf("%s: %+v\n want %s unknown=%v evidence containing %q", tc.name, f, tc.sev, tc.unknown, tc.evidence)
		}
		if (f.Severity == diagnose.Warn || f.Severity == diagnose.Fail) && f.Remedy == "" {
			t.Errorf("%s: no remedy", tc.name)
		}
		if tc.unknown && !strings.Contains(f.Remedy, "perfquery -C mlx5_0 -P 1 -R") {
			t.Errorf("%s: a saturated counter's remedy clears it: %q", tc.name, f.Remedy)
		}
		if tc.check == "ctr.integrity" && strings.Contains(f.Remedy, "perfquery") {
			t.Errorf("%s: a pinned 4-bit counter is not to be cleared: %q", tc.name, f.Remedy)
		}
	}

	// One sample: skip with the shared reason, except what one sample can
	// tell (saturation).
	h := diagnose.NewHistory(0, 10)
	s := diagnosetest.CounterSnap(diagnosetest.T0, map[string]uint64{"symbol_error": 7, "link_downed": 255}, nil)
	h.Add(s)
	fs, _ := cc("ctr.symbol")(s, h, cfg)
	if f := diagnosetest.FindingOf(t, fs, "mlx5_0/1"); f.Severity != diagnose.Skip || f.Evidence != diagnose.NeedTwoSamples {
		t.Errorf("one sample: %+v", f)
	}
	fs, _ = cc("ctr.downed")(s, h, cfg)
	if f := diagnosetest.FindingOf(t, fs, "mlx5_0/1"); f.Severity != diagnose.Warn || !f.Unknown {
		t.Errorf("one sample, saturated: %+v", f)
	}
	// The recorded DGX H100 in one sample: 15 cannot be judged, skipped
	// with the reason, no remedy.
	s = diagnosetest.CounterSnap(diagnosetest.T0, map[string]uint64{"local_link_integrity_errors": 0, "excessive_buffer_overrun_errors": 15}, nil)
	h = diagnose.NewHistory(0, 10)
	h.Add(s)
	fs, _ = cc("ctr.integrity")(s, h, cfg)
	if f := diagnosetest.FindingOf(t, fs, "mlx5_0/1"); f.Severity != diagnose.Skip || f.Remedy != "" || !strings.Contains(f.Evidence, "in the only sample") ||
		!strings.Contains(f.Evidence, diagnose.NeedTwoSamples) {
		t.Errorf("one sample, pinned 4-bit counter: %+v", f)
	}
	// A port without the counters is not judged; a host without any says so.
	fs, _ = cc("hw.icrc")(s, h, cfg)
	if len(fs) != 1 || fs[0].Severity != diagnose.Skip || !strings.Contains(fs[0].Evidence, "rx_icrc_encapsulated") {
		t.Errorf("no hw counters: %+v", fs)
	}
}
