// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package expo

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protodelim"
)

// Each kind of sample client_golang's registry refuses is left out of
// both expositions and counted under its reason, and the rest is written
// as promhttp writes what its registry gathered (ContinueOnError: the
// refused samples are left out, the first of two duplicates is kept); the
// registry's own error is the witness that the sample is bad.
func TestRejected(t *testing.T) {
	port := NewDesc("rdma_port_state", "State.", "device", "port")
	ok1 := Gauge(port, 4, "mlx5_0", "1")
	ok2 := Gauge(port, 1, "mlx5_1", "1")
	other := NewDesc("rdma_port_state", "Another help.", "device", "port")
	relabelled := NewDesc("rdma_port_state", "State.", "port", "device")
	for _, tc := range []struct {
		name   string
		bad    []prometheus.Metric
		reason Reject
		n      int
	}{
		{"too few labels", []prometheus.Metric{Gauge(port, 2, "mlx5_2")}, LabelCount, 1},
		{"too many labels", []prometheus.Metric{Gauge(port, 2, "mlx5_2", "1", "x")}, LabelCount, 1},
		{"counter under gauge", []prometheus.Metric{Counter(port, 2, "mlx5_2", "1")}, TypeClash, 1},
		{"desc with another help", []prometheus.Metric{Gauge(other, 2, "mlx5_2", "1")}, TypeClash, 1},
		{"duplicate series", []prometheus.Metric{Gauge(port, 2, "mlx5_0", "1"), Gauge(port, 3, "mlx5_0", "1")}, Duplicate, 2},
		{"invalid UTF-8", []prometheus.Metric{Gauge(port, 2, "mlx5_\xff", "1")}, InvalidUTF8, 1},
		// client_golang takes a family whose series have other label
		// names; expo, which writes a family with one Desc's, refuses
		// it (a difference, on a collector's bug only).
		{"desc with other labels", []prometheus.Metric{Gauge(relabelled, 2, "1", "mlx5_2")}, TypeClash, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bad samples come after a good one (the family's type
			// and first series) and before another.
			metrics := append(append([]prometheus.Metric{ok1}, tc.bad...), ok2)
			reg := prometheus.NewRegistry()
			reg.MustRegister(list(metrics))
			mfs, err := reg.Gather()
			if refuses := tc.name != "desc with other labels"; (err != nil) != refuses {
				t.Fatalf("client_golang refuses the samples: %v, want %v (%v)", err != nil, refuses, err)
			}
			before := Rejected(tc.reason)
			var gotText, gotProto bytes.Buffer
			fams, _ := Group(metrics)
			if err := WriteText(&gotText, fams, nil); err != nil {
				t.Fatal(err)
			}
			fams, _ = Group(metrics)
			if err := WriteProto(&gotProto, fams, nil); err != nil {
				t.Fatal(err)
			}
			if n := Rejected(tc.reason) - before; n != uint64(2*tc.n) {
				t.Errorf("%v: %d samples counted, want %d (%d a write)", tc.reason, n, 2*tc.n, tc.n)
			}
			want := `# HELP rdma_port_state State.
# TYPE rdma_port_state gauge
rdma_port_state{device="mlx5_0",port="1"} 4
rdma_port_state{device="mlx5_1",port="1"} 1
`
			if gotText.String() != want {
				t.Errorf("text:\n%s\nwant\n%s", gotText.String(), want)
			}
			if tc.name == "desc with other labels" {
				return
			}
			var wantText, wantProto bytes.Buffer
			for _, mf := range mfs {
				if _, err := expfmt.MetricFamilyToText(&wantText, mf); err != nil {
					t.Fatal(err)
				}
				if _, err := protodelim.MarshalTo(&wantProto, mf); err != nil {
					t.Fatal(err)
				}
			}
			if gotText.String() != wantText.String() {
				t.Errorf("text differs from what client_golang gathered:\n%s\nwant\n%s", gotText.String(), wantText.String())
			}
			if !bytes.Equal(gotProto.Bytes(), wantProto.Bytes()) {
				t.Errorf("protobuf differs from what client_golang gathered:\n got %x\nwant %x", gotProto.Bytes(), wantProto.Bytes())
			}
		})
	}
}

// A family whose every sample is refused is not written at all, and its
// type is its first good sample's.
func TestRejectedWholeFamily(t *testing.T) {
	d := NewDesc("rdma_port_errors_total", "Errors.", "device")
	fams, _ := Group([]prometheus.Metric{Gauge(d, 1), Counter(d, 2, "mlx5_0")})
	var b bytes.Buffer
	if err := WriteText(&b, fams, nil); err != nil {
		t.Fatal(err)
	}
	if want := "# HELP rdma_port_errors_total Errors.\n# TYPE rdma_port_errors_total counter\nrdma_port_errors_total{device=\"mlx5_0\"} 2\n"; b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	fams, _ = Group([]prometheus.Metric{Gauge(d, 1, "a", "b")})
	if len(fams) != 0 {
		t.Errorf("a family of refused samples: %v", fams)
	}
}

// The first rejection of each reason is reported once, with the family
// and the label values, whatever the number of scrapes that meet it.
func TestUnreported(t *testing.T) {
	// What earlier tests left: the reasons are reported once a process.
	for r := range rejects {
		firstReject[r].Store(nil)
		reported[r].Store(false)
	}
	d := NewDesc("rdma_port_state", "State.", "device", "port")
	for range 3 {
		fams, _ := Group([]prometheus.Metric{Gauge(d, 1, "mlx5_0"), Gauge(d, 1, "mlx5_1", "1"), Gauge(d, 1, "mlx5_1", "1")})
		if err := WriteText(&bytes.Buffer{}, fams, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := Unreported()
	var reasons []string
	for _, r := range got {
		reasons = append(reasons, r.Reason.String())
		if !strings.Contains(r.Sample, "rdma_port_state") || !strings.Contains(r.Sample, "mlx5_") {
			t.Errorf("%v: sample %q", r.Reason, r.Sample)
		}
	}
	if strings.Join(reasons, ",") != "label_count,duplicate" {
		t.Errorf("reported %v, want label_count and duplicate", reasons)
	}
	if again := Unreported(); len(again) != 0 {
		t.Errorf("reported twice: %v", again)
	}
}

// A family whose every label value is not UTF-8 (left out as it is
// written) is not written either, in both formats, a summary included.
func TestRejectedInvalidUTF8Family(t *testing.T) {
	node := NewDesc("rdma_device_node_description_info", "node_desc.", "device", "node_desc")
	lat := NewDesc("rdma_probe_latency_seconds", "Latency.", "device")
	port := NewDesc("rdma_port_state", "State.", "device")
	metrics := []prometheus.Metric{
		Gauge(node, 1, "mlx5_0", "host\xff"),
		Summary(lat, 1, 2e-6, []Quantile{{0.5, 2e-6}}, "mlx5_\xfe"),
		Summary(lat, 1, 3e-6, []Quantile{{0.5, 3e-6}}, "mlx5_1"),
		Gauge(port, 4, "mlx5_0"),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(list(metrics))
	mfs, err := reg.Gather()
	if err == nil {
		t.Fatal("client_golang takes the samples")
	}
	var wantText, wantProto bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&wantText, mf); err != nil {
			t.Fatal(err)
		}
		if _, err := protodelim.MarshalTo(&wantProto, mf); err != nil {
			t.Fatal(err)
		}
	}
	before := Rejected(InvalidUTF8)
	var gotText, gotProto bytes.Buffer
	fams, _ := Group(metrics)
	if err := WriteText(&gotText, fams, nil); err != nil {
		t.Fatal(err)
	}
	fams, _ = Group(metrics)
	if err := WriteProto(&gotProto, fams, nil); err != nil {
		t.Fatal(err)
	}
	if gotText.String() != wantText.String() || strings.Contains(gotText.String(), node.Name) {
		t.Errorf("text:\n%s\nwant\n%s", gotText.String(), wantText.String())
	}
	if !bytes.Equal(gotProto.Bytes(), wantProto.Bytes()) {
		t.Errorf("protobuf:\n got %x\nwant %x", gotProto.Bytes(), wantProto.Bytes())
	}
	if n := Rejected(InvalidUTF8) - before; n != 4 {
		t.Errorf("%d samples counted, want 4 (2 a write)", n)
	}
}

// A Desc met before its family exists, whose first samples are refused,
// finds the family another Desc of its name made since (Group keeps each
// Desc's family by pointer, and asks again while it has none): the
// clash is judged against it, not a second family made over it.
func TestGroupDescBeforeItsFamily(t *testing.T) {
	early := NewDesc("rdma_port_state", "Another help.", "device", "port")
	port := NewDesc("rdma_port_state", "State.", "device", "port")
	metrics := []prometheus.Metric{
		Gauge(early, 1, "mlx5_0"), // refused: too few labels, no family yet
		Gauge(port, 4, "mlx5_0", "1"),
		Gauge(early, 2, "mlx5_1", "1"), // another help than the family's
		Gauge(port, 1, "mlx5_2", "1"),
	}
	before := Rejected(TypeClash)
	fams, _ := Group(metrics)
	f := fams["rdma_port_state"]
	if f == nil || f.desc != port || len(f.samples) != 2 {
		t.Fatalf("family %+v, want port's with its 2 samples", f)
	}
	if n := Rejected(TypeClash) - before; n != 1 {
		t.Errorf("%d type clashes counted, want 1", n)
	}
}
