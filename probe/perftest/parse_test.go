// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

// The recorded outputs are copies of ../shared/realdata/perftest (see
// testdata/samples/SOURCES.md for where each one comes from).
func sample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func near(got, want float64) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(got-want)/math.Abs(want) < 1e-9
}

const gbit = 1e9 / 8
const mib = 1 << 20
const us = 1e-6

func TestParseBandwidthSamples(t *testing.T) {
	for _, tc := range []struct {
		file      string
		title     string
		unit      string
		rows      int
		dups      int
		last      BandwidthRow // the largest size
		info      map[string]string
		local     int
		notesLike string // a note (warning, stray stderr) that must be kept
	}{
		{
			file: "ib_write_bw_report_gbits_ib_v25.10plus.txt", title: "RDMA_Write BW Test", unit: "Gb/sec", rows: 1,
			last: BandwidthRow{Bytes: 65536, Iterations: 5000, PeakBytesPerSecond: 392.38 * gbit, PeakMeasured: true,
				AvgBytesPerSecond: 392.34 * gbit, MessagesPerSecond: 0.748336e6, HasMsgRate: true},
			info:  map[string]string{"Device": "mlx5_0", "Link type": "IB", "Mtu": "4096[B]", "rdma_cm QPs": "OFF", "CQE Poll Batch": "Dynamic", "Using Enhanced Reorder": "OFF"},
			local: 1, notesLike: "Conflicting CPU frequency",
		},
		{
			file: "ib_read_bw_report_gbits_ib_v25.10plus.txt", title: "RDMA_Read BW Test", unit: "Gb/sec", rows: 1,
			last: BandwidthRow{Bytes: 65536, Iterations: 1000, PeakBytesPerSecond: 328.64 * gbit, PeakMeasured: true,
				AvgBytesPerSecond: 328.61 * gbit, MessagesPerSecond: 0.626777e6, HasMsgRate: true},
			info:  map[string]string{"Outstand reads": "16", "Data ex. method": "Ethernet"},
			local: 1, notesLike: "Disabling dynamic polling",
		},
		{
			file: "ib_send_bw_MiBsec_ib_v25.10plus.txt", title: "Send BW Test", unit: "MiB/sec", rows: 1,
			last: BandwidthRow{Bytes: 65536, Iterations: 1000, PeakBytesPerSecond: 46567.34 * mib, PeakMeasured: true,
				AvgBytesPerSecond: 46557.03 * mib, MessagesPerSecond: 0.744912e6, HasMsgRate: true},
			info:  map[string]string{"Max inline data": "0[B]"},
			local: 1,
		},
		{
			file: "ib_send_bw_UD_all_sizes_legacy_ofed1x.txt", title: "Send BW Test", unit: "MB/sec", rows: 11,
			last:  BandwidthRow{Bytes: 2048, Iterations: 1000, PeakBytesPerSecond: 2923.29 * mib, PeakMeasured: true, AvgBytesPerSecond: 2919.91 * mib},
			info:  map[string]string{"Connection type": "UD", "Mtu": "2048"},
			local: 1, notesLike: "Inline data is used",
		},
		{
			file: "ib_write_bw_bidir_all_sizes_report_gbits_two_nics_localhost_rocm_doc.txt", title: "RDMA_Write Bidirectional BW Test", unit: "Gb/sec", rows: 23,
			last: BandwidthRow{Bytes: 8388608, Iterations: 5000, PeakBytesPerSecond: 204.59 * gbit, PeakMeasured: true,
				AvgBytesPerSecond: 204.59 * gbit, MessagesPerSecond: 0.003049e6, HasMsgRate: true},
			info:  map[string]string{"Device": "<RDMA-NIC-2>", "GID index": "3", "Link type": "Ethernet"},
			local: 1,
		},
		{
			file: "ib_write_bw_loopback_8MiB_server_client_interleaved_superbench.txt", title: "RDMA_Write BW Test", unit: "MB/sec", rows: 1, dups: 1,
			last: BandwidthRow{Bytes: 8388608, Iterations: 20000, PeakBytesPerSecond: 24056.74 * mib, PeakMeasured: true,
				AvgBytesPerSecond: 24056.72 * mib, MessagesPerSecond: 0.003007e6, HasMsgRate: true},
			info:  map[string]string{"Device": "ib0"},
			local: 2,
		},
		{
			file: "ib_write_bw_loopback_all_sizes_interleaved_superbench.txt", title: "RDMA_Write BW Test", unit: "MB/sec", rows: 23, dups: 1,
			last: BandwidthRow{Bytes: 8388608, Iterations: 2000, PeakBytesPerSecond: 23240.68 * mib, PeakMeasured: true,
				AvgBytesPerSecond: 23240.68 * mib, MessagesPerSecond: 0.002905e6, HasMsgRate: true},
			info:  map[string]string{"TX depth": "128", "CQ Moderation": "100"},
			local: 2,
		},
		{
			file: "ib_write_bw_post_list_D60_report_gbits_roce_issue273.txt", title: "RDMA_Write Post List BW Test", unit: "Gb/sec", rows: 1,
			last: BandwidthRow{Bytes: 8, Iterations: 224958464, AvgBytesPerSecond: 0.48 * gbit, MessagesPerSecond: 7.498617e6, HasMsgRate: true},
			info: map[string]string{"Post List": "128", "GID index": "2", "PCIe relax order": "Unsupported"},
		},
		{
			file: "ib_write_bw_q4_rdma_cm_report_gbits_roce_v4.4-24.07.txt", title: "RDMA_Write BW Test", unit: "Gb/sec", rows: 1,
			last: BandwidthRow{Bytes: 65536, Iterations: 20000, PeakBytesPerSecond: 111.72 * gbit, PeakMeasured: true,
				AvgBytesPerSecond: 111.71 * gbit, MessagesPerSecond: 0.213070e6, HasMsgRate: true},
			info:  map[string]string{"Number of qps": "4", "Data ex. method": "rdma_cm", "Mtu": "1024[B]"},
			local: 4,
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r, err := Parse(sample(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != KindBandwidth || r.Title != tc.title || r.Unit != tc.unit {
				t.Errorf("kind %v title %q unit %q, want bandwidth %q %q", r.Kind, r.Title, r.Unit, tc.title, tc.unit)
			}
			if len(r.Bandwidth) != tc.rows || r.Duplicates != tc.dups {
				t.Errorf("%d rows, %d duplicates; want %d, %d", len(r.Bandwidth), r.Duplicates, tc.rows, tc.dups)
			}
			last, _ := r.BandwidthRow(0)
			if !bwEqual(last, tc.last) {
				t.Errorf("last row\n got %+v\nwant %+v", last, tc.last)
			}
			for k, v := range tc.info {
				if r.Info[k] != v {
					t.Errorf("Info[%q] = %q, want %q", k, r.Info[k], v)
				}
			}
			if len(r.Local) != tc.local || len(r.Remote) != tc.local {
				t.Errorf("%d local, %d remote address lines, want %d each", len(r.Local), len(r.Remote), tc.local)
			}
			if tc.notesLike != "" && !strings.Contains(strings.Join(r.Notes, "\n"), tc.notesLike) {
				t.Errorf("notes %q lack %q", r.Notes, tc.notesLike)
			}
			for _, n := range r.Notes {
				if strings.HasPrefix(n, "conflicting") {
					t.Errorf("unexpected conflict: %s", n)
				}
			}
		})
	}
}

func bwEqual(a, b BandwidthRow) bool {
	return a.Bytes == b.Bytes && a.Iterations == b.Iterations && a.PeakMeasured == b.PeakMeasured &&
		near(a.PeakBytesPerSecond, b.PeakBytesPerSecond) && near(a.AvgBytesPerSecond, b.AvgBytesPerSecond) &&
		a.HasMsgRate == b.HasMsgRate && near(a.MessagesPerSecond, b.MessagesPerSecond) && a.HasCPU == b.HasCPU
}

// TestParseEveryRowOfAllSizes checks every row of the two -a tables against
// the numbers in the file, read independently with a regexp.
func TestParseEveryRowOfAllSizes(t *testing.T) {
	rowRe := regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)
	for file, scale := range map[string]float64{
		"ib_write_bw_bidir_all_sizes_report_gbits_two_nics_localhost_rocm_doc.txt": gbit,
		"ib_write_bw_loopback_all_sizes_interleaved_superbench.txt":                mib,
	} {
		b := sample(t, file)
		r, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		ms := rowRe.FindAllStringSubmatch(string(b), -1)
		if len(ms) < 23 {
			t.Fatalf("%s: regexp found %d rows", file, len(ms))
		}
		for _, m := range ms {
			size, _ := strconv.ParseInt(m[1], 10, 64)
			avg, _ := strconv.ParseFloat(m[4], 64)
			row, ok := r.BandwidthRow(size)
			if !ok || !near(row.AvgBytesPerSecond, avg*scale) {
				t.Errorf("%s size %d: got %+v, want average %v", file, size, row, avg*scale)
			}
		}
		// Sizes 2..2^23, in order.
		for i, row := range r.Bandwidth {
			if row.Bytes != 2<<i {
				t.Errorf("%s row %d is size %d", file, i, row.Bytes)
			}
		}
	}
	// The 6-decimal row (BW average < 0.1 Gb/s) of the ROCm doc.
	r, _ := Parse(sample(t, "ib_write_bw_bidir_all_sizes_report_gbits_two_nics_localhost_rocm_doc.txt"))
	if row, _ := r.BandwidthRow(2); !near(row.PeakBytesPerSecond, 0.142947*gbit) || !near(row.AvgBytesPerSecond, 0.012281*gbit) {
		t.Errorf("6-decimal row: %+v", row)
	}
	if r.Local[0].LID != 0 || r.Local[0].GID.String() != "1.1.101.45" || r.Remote[0].GID.String() != "1.1.101.35" {
		t.Errorf("RoCE addresses: %+v %+v", r.Local, r.Remote)
	}
}

func TestParseLatencySamples(t *testing.T) {
	for _, tc := range []struct {
		file  string
		title string
		want  LatencyRow
		warn  int // interleaved stderr warnings kept as notes
	}{
		{"ib_send_lat_ib_v25.10plus.txt", "Send Latency Test",
			LatencyRow{Bytes: 2, Iterations: 1000, Min: 1.24 * us, Max: 5.19 * us, Typical: 1.27 * us, Avg: 1.27 * us, Stdev: 0, P99: 1.37 * us, P999: 5.19 * us}, 2},
		{"ib_write_lat_rdma_cm_roce_v4.4-24.07.txt", "RDMA_Write Latency Test",
			LatencyRow{Bytes: 2, Iterations: 1000, Min: 1.42 * us, Max: 1.93 * us, Typical: 1.47 * us, Avg: 1.47 * us, Stdev: 0, P99: 1.57 * us, P999: 1.93 * us}, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r, err := Parse(sample(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != KindLatency || r.Unit != "usec" || r.Title != tc.title || len(r.Latency) != 1 {
				t.Fatalf("kind %v unit %q title %q rows %d", r.Kind, r.Unit, r.Title, len(r.Latency))
			}
			got := r.Latency[0]
			all := ColMin | ColMax | ColTypical | ColAvg | ColStdev | ColP99 | ColP999
			if got.Has != all || got.Bytes != tc.want.Bytes || got.Iterations != tc.want.Iterations ||
				!near(got.Min, tc.want.Min) || !near(got.Max, tc.want.Max) || !near(got.Typical, tc.want.Typical) ||
				!near(got.Avg, tc.want.Avg) || !near(got.P99, tc.want.P99) || !near(got.P999, tc.want.P999) || got.Stdev != 0 {
				t.Errorf("\n got %+v\nwant %+v", got, tc.want)
			}
			n := 0
			for _, note := range r.Notes {
				if strings.HasPrefix(note, "Conflicting CPU frequency") {
					n++
				}
			}
			if n != tc.warn {
				t.Errorf("%d CPU-frequency warnings kept, want %d (%q)", n, tc.warn, r.Notes)
			}
		})
	}
}

func TestParseOutJSONNonStandard(t *testing.T) {
	r, err := ParseJSON(sample(t, "out_json_ib_write_lat_pre24.01_nonstandard_issue216.txt"), false)
	if err != nil {
		t.Fatal(err)
	}
	row, ok := r.LatencyRow(128)
	if !ok || r.Kind != KindLatency || r.Info["Device"] != "rxe0" || r.Info["GID_index"] != "1" || r.Title != "RDMA Write Latency Test" {
		t.Fatalf("%+v", r)
	}
	if row.Iterations != 5000 || !near(row.Min, 2.37*us) || !near(row.Max, 5.39*us) || !near(row.Typical, 2.42*us) ||
		!near(row.Avg, 2.42*us) || !near(row.P99, 2.47*us) || !near(row.P999, 4.03*us) || !near(row.Stdev, 0.05*us) {
		t.Errorf("%+v", row)
	}
	// The same content as standard JSON (24.01+).
	std := `{
"test_info": {
"test": "RDMA_Write_BW_Test",
"Device": "mlx5_0"
},
"results": {
"MsgSize": 65536,
"n_iterations": 5000,
"BW_peak": 392.38,
"BW_average": 392.34,
"MsgRate": 0.748336
}
}`
	r, err = ParseJSON([]byte(std), true)
	if err != nil {
		t.Fatal(err)
	}
	if row, _ := r.BandwidthRow(65536); !near(row.AvgBytesPerSecond, 392.34*gbit) || !row.PeakMeasured || r.Unit != "Gb/sec" {
		t.Errorf("%+v", r)
	}
	if _, err := ParseJSON([]byte("{\nresults: {\nBW_average: fast,\n}\n}"), true); err == nil {
		t.Error("non-numeric result accepted")
	}
	if _, err := ParseJSON([]byte("{}"), true); err == nil {
		t.Error("empty file accepted")
	}
}

// TestClassifyErrorSamples: each recorded failure maps to its kind.
func TestClassifyErrorSamples(t *testing.T) {
	for _, tc := range []struct {
		file   string
		kind   ErrorKind
		detail string
		status int
	}{
		{"error_completion_retry_exceeded_softiwarp_issue27.txt", RetryExceeded, "Failed status 12", 12},
		{"error_connection_refused_pre24.01_pr228.txt", ConnectFailed, "Couldn't connect to 192.168.125.211:18515", -1},
		{"error_port_down_lsgunth_perftest_issue1.txt", PortDown, "Port number 1 state is Down", -1},
		{"ib_write_bw_help_debian_v4.5-0.17.txt", Usage, "", -1},
		{"ib_write_lat_help_debian_v4.5-0.17.txt", Usage, "", -1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := sample(t, tc.file)
			// Help goes to stdout, errors to stderr; the recordings
			// hold one stream each.
			stdout, stderr := []byte(nil), b
			if tc.kind == Usage {
				stdout, stderr = b, nil
			}
			_, err := Interpret(stdout, stderr, Exit{Code: 1})
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want kind %s", err, tc.kind)
			}
			if !strings.Contains(e.Detail, tc.detail) || e.Status != tc.status || e.ExitCode != 1 {
				t.Errorf("%+v", e)
			}
		})
	}
}

// TestNoDeviceTranscript replays every command of the Debian no-device
// recording: stdout, stderr and exit status as captured.
func TestNoDeviceTranscript(t *testing.T) {
	cases := splitTranscript(t, sample(t, "error_no_device_and_exit_codes_debian_v4.5-0.17.txt"))
	if len(cases) != 6 {
		t.Fatalf("%d commands in the transcript, want 6", len(cases))
	}
	for _, c := range cases {
		_, err := Interpret([]byte(c.stdout), []byte(c.stderr), Exit{Code: c.exit})
		if strings.Contains(c.cmd, "--version") {
			if v, verr := ParseVersion([]byte(c.stdout)); verr != nil || v != "6.06" {
				t.Errorf("%s: version %q, %v", c.cmd, v, verr)
			}
			if !errors.Is(err, Failed) {
				t.Errorf("%s: %v", c.cmd, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Kind != NoDevice || e.ExitCode != c.exit {
			t.Errorf("%s: %v", c.cmd, err)
		}
	}
}

type transcript struct {
	cmd, stdout, stderr string
	exit                int
}

func splitTranscript(t *testing.T, b []byte) []transcript {
	var out []transcript
	var cur *transcript
	var into *string
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "$ "):
			out = append(out, transcript{cmd: line[2:]})
			cur = &out[len(out)-1]
		case line == "[stdout]":
			into = &cur.stdout
		case line == "[stderr]":
			into = &cur.stderr
		case strings.HasPrefix(line, "[exit status] "):
			n, err := strconv.Atoi(strings.TrimPrefix(line, "[exit status] "))
			if err != nil {
				t.Fatal(err)
			}
			cur.exit, into = n, nil
		case into != nil:
			*into += line + "\n"
		}
	}
	return out
}

// TestEverySampleIsCovered: every file in the samples directory is either
// a parsed result or a classified error; a new sample without a test fails
// here.
func TestEverySampleIsCovered(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		n++
		b := sample(t, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), "out_json"):
			if _, err := ParseJSON(b, false); err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		case strings.HasPrefix(e.Name(), "cudahelp_"):
			if !ParseCUDAHelp(b).Supported {
				t.Errorf("%s: no --use_cuda found", e.Name())
			}
		case strings.HasPrefix(e.Name(), "error_"), strings.Contains(e.Name(), "_help_"):
			if Classify(b, b) == nil {
				t.Errorf("%s: no error kind recognised", e.Name())
			}
		default:
			if _, err := Parse(b); err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		}
	}
	if n != 20 {
		t.Errorf("%d samples, want the 18 of realdata/perftest and the two CUDA recordings", n)
	}
}

func TestParseRejects(t *testing.T) {
	header := " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
	for name, in := range map[string]string{
		"empty":        "",
		"no table":     "garbage\n\x00\xff\n",
		"header only":  header + "---------------------------------------------------------------------------------------\n",
		"short row":    header + " 65536 5000 392.38\n",
		"text values":  header + " 65536 5000 fast faster 0.7\n",
		"inf":          header + " 65536 5000 inf inf 0.7\n",
		"hex float":    header + " 65536 5000 0x1p3 0x1p3 0.7\n",
		"unknown unit": " #bytes #iterations BW peak[furlongs] BW average[furlongs]\n 2 5 1.0 1.0\n",
		"cycles":       " #bytes #iterations t_min[cycles] t_max[cycles] t_typical[cycles]\n 2 1000 1 2 3\n",
		"two kinds":    header + " 65536 5000 1.0 1.0 0.7\n #bytes #iterations t_min[usec] t_max[usec]\n",
	} {
		if r, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s: parsed %+v", name, r)
		}
	}
}

func TestParseLatencyDuration(t *testing.T) {
	out := "                    RDMA_Write Latency Test\n" +
		" #bytes        #iterations       t_avg[usec]    tps average\n" +
		" 2             5238474          1.15           868573.32\n"
	r, err := Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	row, _ := r.LatencyRow(0)
	if r.Kind != KindLatencyDuration || row.Has != ColAvg|ColTPS || !near(row.Avg, 1.15*us) || !near(row.TPS, 868573.32) {
		t.Errorf("%+v %+v", r, row)
	}
}

func TestInterpret(t *testing.T) {
	good := sample(t, "ib_write_lat_rdma_cm_roce_v4.4-24.07.txt")
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		exit           Exit
		kind           ErrorKind
		report         bool
	}{
		{"ok", string(good), "", Exit{}, "", true},
		{"below limit keeps the table", string(good), "Error: BW result is below bw limit\n", Exit{Code: 1}, BelowLimit, true},
		{"garbage exit 0", "hello\n", "", Exit{}, BadOutput, false},
		{"crash", string(good[:100]), "", Exit{Code: -1, Signal: "segmentation fault"}, Crashed, false},
		{"killed", "", "Couldn't connect to 10.0.0.9:18515\n", Exit{Code: -1, Signal: "killed", Killed: true}, Timeout, false},
		{"unknown failure", "", "something odd\n", Exit{Code: 3}, Failed, false},
		{"version", "", "Current implementation is not compatible with versions older than 5.70\n", Exit{Code: 1}, VersionMismatch, false},
		{"retry 26.01", "", " Completion with error at client\n Failed status-transport retry counter exceeded (12): wr_id 0 syndrom 0x81\n", Exit{Code: 1}, RetryExceeded, false},
		{"rnr", "", " Completion with error at client\n Failed status-RNR retry counter exceeded (13): wr_id 0 syndrom 0x0\n", Exit{Code: 1}, CompletionError, false},
		{"listen", "", "Couldn't listen to port 18515\n", Exit{Code: 1}, PortInUse, false},
		{"exchange", "", " Unable to read from socket/rdma_cm\n Failed to exchange data between server and clients\n", Exit{Code: 1}, ExchangeFailed, false},
		{"starved", "", " Did not get Message for 120 Seconds, exiting..\n", Exit{Code: 1}, Timeout, false},
		{"no clock", "", "Can't produce a report\n", Exit{Code: 1}, NoReport, false},
		{"bad size", "", " Message Size should be between 1 and 2147483647\n Parser function exited with Error\n", Exit{Code: 1}, Usage, false},
		{"device", "", "IB device mlx5_9 not found\n Unable to find the Infiniband/RoCE device\n", Exit{Code: 7}, DeviceNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Interpret([]byte(tc.stdout), []byte(tc.stderr), tc.exit)
			if tc.kind == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %s", err, tc.kind)
			}
			if (r != nil) != tc.report {
				t.Errorf("report %v, want %v", r != nil, tc.report)
			}
		})
	}
}

func TestParseVersionRejects(t *testing.T) {
	for _, in := range []string{"", "Version 6.06", "Version: six"} {
		if v, err := ParseVersion([]byte(in)); err == nil {
			t.Errorf("%q: %q", in, v)
		}
	}
}

// FuzzParse: no input panics, and whatever parses holds only finite,
// non-negative values and sizes in order.
func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "samples"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", "samples", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Rows whose columns ran together (TestParseColumnsRunTogether).
	lat, bw := sample(f, "ib_send_lat_ib_v25.10plus.txt"), sample(f, "ib_write_bw_report_gbits_ib_v25.10plus.txt")
	f.Add(bytes.Replace(lat, []byte("5.19         1.27"), []byte("5.191.27"), 1))
	f.Add(bytes.Replace(lat, []byte("0.00   \t\t1.37"), []byte("0.001.37"), 1))
	f.Add(bytes.Replace(bw, []byte("392.34 \t\t     0.748336"), []byte("392.340.748336"), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		_ = Classify(b, b)
		_, _ = ParseJSON(b, true)
		_, _ = Interpret(b, b, Exit{Code: 1})
		if err != nil {
			return
		}
		prev := int64(-1)
		for _, row := range r.Bandwidth {
			for _, v := range []float64{row.AvgBytesPerSecond, row.PeakBytesPerSecond, row.MessagesPerSecond} {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("bad value in %+v", row)
				}
			}
			if row.Bytes <= prev {
				t.Fatalf("sizes out of order or duplicated: %d after %d", row.Bytes, prev)
			}
			prev = row.Bytes
		}
		for _, row := range r.Latency {
			for _, v := range []float64{row.Min, row.Max, row.Typical, row.Avg, row.P99, row.P999} {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("bad value in %+v", row)
				}
			}
			if row.Has&row.Damaged != 0 {
				t.Fatalf("damaged columns reported present: %+v", row)
			}
		}
	})
}

// TestConfigKnowsEveryTest: internal/host/config validates test names with its
// own list (it cannot import this package); the two must agree.
func TestConfigKnowsEveryTest(t *testing.T) {
	var ours []string
	for _, test := range Tests {
		ours = append(ours, string(test))
	}
	if !reflect.DeepEqual(ours, config.PerftestTests) {
		t.Errorf("perftest.Tests %v, config.PerftestTests %v", ours, config.PerftestTests)
	}
	if MaxSize != 8<<20 || MinIterations != 5 || MaxIterations != 10_000_000 || MinDuration != 5*time.Second || MaxDuration != 300*time.Second {
		t.Error("limits changed: update internal/host/config/probe.go's checkRun too")
	}
}

// damage rewrites the result row of a recorded sample as a row whose
// columns ran together: old is the text between two values in the
// recording, new what is left of it. The values stay the recorded ones;
// only the separator is removed. No recorded perftest output with columns
// run together was found (linux-rdma/perftest always prints a separator,
// but %-7.2f pads nothing once a value fills its field, and the
// t_stdev/99% separator is tabs only, which some recordings drop), so
// the damage is made by hand.
func damage(t *testing.T, file, old, new string) []byte {
	t.Helper()
	b := sample(t, file)
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q", file, old)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

// TestParseColumnsRunTogether: a row whose columns ran together keeps
// the columns that are still unambiguous and leaves the run-together ones
// absent, counted and noted; the run is not lost.
func TestParseColumnsRunTogether(t *testing.T) {
	const lat = "ib_send_lat_ib_v25.10plus.txt"
	// The recorded row: 2 1000 1.24 5.19 1.27 1.27 0.00 1.37 5.19.
	for _, tc := range []struct {
		name     string
		in       []byte
		has      Columns
		damaged  Columns
		noteCols string
	}{
		{"t_max and t_typical", damage(t, lat, "5.19         1.27", "5.191.27"),
			ColMin | ColAvg | ColStdev | ColP99 | ColP999, ColMax | ColTypical, "t_max, t_typical"},
		{"t_stdev and 99%, the tab-only separator", damage(t, lat, "0.00   \t\t1.37", "0.001.37"),
			ColMin | ColMax | ColTypical | ColAvg | ColP999, ColStdev | ColP99, "t_stdev, 99% percentile"},
		{"three columns", damage(t, lat, "1.24           5.19         1.27", "1.245.191.27"),
			ColAvg | ColStdev | ColP99 | ColP999, ColMin | ColMax | ColTypical, "t_min, t_max, t_typical"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Latency) != 1 || r.Damaged != 1 {
				t.Fatalf("%d rows, %d damaged; want 1, 1", len(r.Latency), r.Damaged)
			}
			row := r.Latency[0]
			if row.Has != tc.has || row.Damaged != tc.damaged || row.Bytes != 2 || row.Iterations != 1000 {
				t.Errorf("has %b damaged %b, want %b %b (%+v)", row.Has, row.Damaged, tc.has, tc.damaged, row)
			}
			// The kept columns hold the recorded values, in their places.
			want := map[Columns][2]float64{ColMin: {row.Min, 1.24}, ColMax: {row.Max, 5.19}, ColTypical: {row.Typical, 1.27},
				ColAvg: {row.Avg, 1.27}, ColP99: {row.P99, 1.37}, ColP999: {row.P999, 5.19}}
			for c, v := range want {
				switch {
				case tc.has&c != 0 && !near(v[0], v[1]*us):
					t.Errorf("column %b: %v, want %v µs", c, v[0], v[1])
				case tc.has&c == 0 && v[0] != 0:
					t.Errorf("damaged column %b holds %v", c, v[0])
				}
			}
			if !slices.ContainsFunc(r.Notes, func(n string) bool {
				return strings.Contains(n, "columns "+tc.noteCols+" ran together")
			}) {
				t.Errorf("no note naming %s: %q", tc.noteCols, r.Notes)
			}
		})
	}

	// A bandwidth row is for its average: when the average ran into
	// another column the row is dropped (and the run has no result),
	// never kept with a zero average.
	const bw = "ib_write_bw_report_gbits_ib_v25.10plus.txt"
	for _, in := range [][]byte{
		damage(t, bw, "392.38             392.34", "392.38392.34"),
		damage(t, bw, "392.34 \t\t     0.748336", "392.340.748336"),
	} {
		r, err := Parse(in)
		if err == nil || len(r.Bandwidth) != 0 || r.Damaged != 1 {
			t.Errorf("average run together: err %v, %d rows, %d damaged", err, len(r.Bandwidth), r.Damaged)
		}
		if r != nil && !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "BW average ran into") }) {
			t.Errorf("no note: %q", r.Notes)
		}
	}
}

// TestParseRunTogetherRejects: fields that are not numbers run together
// leave the line a note, as before.
func TestParseRunTogetherRejects(t *testing.T) {
	const lat = "ib_send_lat_ib_v25.10plus.txt"
	for _, repl := range []string{
		"1.2.3",               // a fraction digit and an integer digit do not fit between the dots
		"5.19..1.27",          // two dots in a row
		"5.19x1.27",           // not digits
		"5.19 1.27 9.99 8.88", // more fields than columns once split
		"519",                 // fewer fields, none run together
	} {
		r, err := Parse(damage(t, lat, "5.19         1.27", repl))
		if err == nil || r.Damaged != 0 {
			t.Errorf("%q: err %v, damaged %d, rows %+v", repl, err, r.Damaged, r.Latency)
		}
	}
	if _, _, ok := splitValues([]string{"1.231.24"}, 3); ok {
		t.Error("two dots for three columns accepted")
	}
	if v, d, ok := splitValues([]string{"1.23", "4.565.67"}, 3); !ok || !reflect.DeepEqual(d, []bool{false, true, true}) || v[0] != 1.23 {
		t.Errorf("%v %v %v", v, d, ok)
	}
}

// TestParseDamagedDuplicate: server and client output interleaved print
// each size twice; an undamaged second row replaces a damaged first one.
func TestParseDamagedDuplicate(t *testing.T) {
	b := sample(t, "ib_send_lat_ib_v25.10plus.txt")
	var row string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, " 2       1000") {
			row = l
		}
	}
	damaged := strings.Replace(row, "5.19         1.27", "5.191.27", 1)
	in := strings.Replace(string(b), row, damaged+"\n"+row, 1)
	r, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Latency) != 1 || r.Duplicates != 1 || r.Damaged != 1 || r.Latency[0].Damaged != 0 || !near(r.Latency[0].Max, 5.19*us) {
		t.Errorf("rows %+v, duplicates %d, damaged %d", r.Latency, r.Duplicates, r.Damaged)
	}
}
