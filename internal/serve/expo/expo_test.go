// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package expo

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protodelim"
)

type list []prometheus.Metric

func (l list) Describe(chan<- *prometheus.Desc) {}
func (l list) Collect(ch chan<- prometheus.Metric) {
	for _, m := range l {
		ch <- m
	}
}

// The fast path writes exactly what client_golang's registry and expfmt
// write for the same samples: order of families, series and labels,
// escaping, special values; and a gathered family slots in by name.
func TestWriteTextMatchesClientGolang(t *testing.T) {
	port := NewDesc("rdma_port_info", "Port \\ attributes;\nalways 1.", "device", "port", "link_layer", "netdev")
	ctr := NewDesc("rdma_port_symbol_errors_total", "Symbol errors.", "port", "device")
	plain := NewDesc("rdma_host_reads_stuck", "Stuck reads.")
	pauses := NewDesc("go_gc_duration_seconds", "GC pauses.")
	probe := NewDesc("rdma_probe_latency_seconds", "Latency.", "test", "device")
	samples := []prometheus.Metric{
		Gauge(port, 1, "mlx5_1", "1", "InfiniBand", ""),
		Gauge(port, 1, "mlx5_0", "2", "Ethernet", `en"p\1`+"\n"),
		Gauge(port, 1, "mlx5_0", "10", "InfiniBand", "ib0"),
		Gauge(port, 1, "mlx5_3", "1", "InfiniBand", "nœud-ü"),
		Counter(ctr, 4127, "1", "mlx5_0"),
		Counter(ctr, 1.5e19, "1", "mlx5_10"),
		Counter(ctr, math.Inf(1), "2", "mlx5_0"),
		Counter(ctr, math.NaN(), "1", "mlx5_2"),
		Gauge(plain, -1),
		Summary(pauses, 4127, 0.0123, []Quantile{{0, 1.5e-05}, {0.25, 2e-05}, {0.5, 3.25e-05}, {0.75, 4e-05}, {1, 0.001}}),
		Summary(probe, 3, 6e-06, []Quantile{{0.5, 2e-06}, {0.99, math.Inf(1)}}, "ib_write_lat", "mlx5_1"),
		Summary(probe, 0, 0, nil, "ib_send_lat", "mlx5_0"),
	}
	extraDesc := prometheus.NewDesc("rdma_diagnose_status", "Diagnose.", []string{"check"}, nil)
	extra := prometheus.MustNewConstMetric(extraDesc, prometheus.GaugeValue, 2, "port.phys")

	reg := prometheus.NewRegistry()
	reg.MustRegister(list(append(append([]prometheus.Metric{}, samples...), extra)))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&want, mf); err != nil {
			t.Fatal(err)
		}
	}

	fams, other := Group(samples)
	if len(other) != 0 {
		t.Fatalf("%d samples not grouped", len(other))
	}
	var m dto.Metric
	if err := extra.Write(&m); err != nil {
		t.Fatal(err)
	}
	gathered := []*dto.MetricFamily{{Name: strp("rdma_diagnose_status"), Help: strp("Diagnose."), Type: dto.MetricType_GAUGE.Enum(), Metric: []*dto.Metric{&m}}}
	var got bytes.Buffer
	if err := WriteText(&got, fams, gathered); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("fast path differs from client_golang:\n--- got\n%s\n--- want\n%s", got.String(), want.String())
	}

	// The protobuf path gives the same families.
	dtos, err := Gathered(fams)
	if err != nil {
		t.Fatal(err)
	}
	var viaDTO bytes.Buffer
	all := append(dtos, gathered...)
	slices.SortFunc(all, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	for _, mf := range all {
		if _, err := expfmt.MetricFamilyToText(&viaDTO, mf); err != nil {
			t.Fatal(err)
		}
	}
	if viaDTO.String() != want.String() {
		t.Errorf("Gathered differs:\n%s\nwant\n%s", viaDTO.String(), want.String())
	}

	// The streamed protobuf is byte for byte what promhttp encodes from
	// the registry's families.
	var wantProto, gotProto bytes.Buffer
	for _, mf := range mfs {
		if _, err := protodelim.MarshalTo(&wantProto, mf); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteProto(&gotProto, fams, gathered); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotProto.Bytes(), wantProto.Bytes()) {
		t.Errorf("WriteProto differs from client_golang:\n got %x\nwant %x", gotProto.Bytes(), wantProto.Bytes())
	}
}

func strp(s string) *string { return &s }

// A family that arrives out of order (hw counters come device by device,
// their labels sort counter first) is written in the order a sort gives,
// for more samples than a sort handles by insertion; of two samples with
// equal label values (a collector's bug) the first collected is kept.
func TestSortedLargeFamily(t *testing.T) {
	d := NewDesc("rdma_port_hw_counter_total", "hw.", "device", "port", "counter")
	var samples []*Sample
	for dev := range 12 {
		for _, c := range []string{"rx_write_requests", "out_of_buffer", "duplicate_request", "rnr_nak_retry_err", "lifespan"} {
			samples = append(samples, Counter(d, float64(len(samples)), fmt.Sprintf("mlx5_%d", dev), "1", c))
		}
	}
	want := slices.Clone(samples)
	slices.SortFunc(want, func(a, b *Sample) int {
		return cmp.Or(strings.Compare(a.labels[2], b.labels[2]), strings.Compare(a.labels[0], b.labels[0]), strings.Compare(a.labels[1], b.labels[1]))
	})
	samples = append(samples, Counter(d, -1, "mlx5_3", "1", "out_of_buffer"))
	before := Rejected(Duplicate)
	f := &Family{desc: d, samples: slices.Clone(samples)}
	if got := f.sorted(); !slices.Equal(got, want) {
		t.Errorf("sorted:\n%v\nwant\n%v", got, want)
	}
	// Already sorted: returned as it is.
	if got := f.sorted(); !slices.Equal(got, want) {
		t.Error("sorting a sorted family changed it")
	}
	if n := Rejected(Duplicate) - before; n != 1 {
		t.Errorf("%d duplicates counted, want 1", n)
	}
}

// A family is sorted whatever order its samples arrive in, scrape after
// scrape (an order kept from the last scrape saves nothing measurable:
// docs/caches.md).
func TestSortedAnyArrival(t *testing.T) {
	d := NewDesc("rdma_port_hw_counter_total", "hw.", "device", "port", "counter")
	arrival := func(devs []int) []*Sample {
		var out []*Sample
		for _, dev := range devs {
			for _, c := range []string{"rx_write_requests", "out_of_buffer", "duplicate_request"} {
				out = append(out, Counter(d, float64(dev), fmt.Sprintf("mlx5_%d", dev), "1", c))
			}
		}
		return out
	}
	isSorted := func(s []*Sample) bool {
		return slices.IsSortedFunc(s, func(a, b *Sample) int {
			return cmp.Or(strings.Compare(a.labels[2], b.labels[2]), strings.Compare(a.labels[0], b.labels[0]))
		})
	}
	for i, devs := range [][]int{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}, {5, 3, 1, 0, 2, 4}, {0, 1, 2, 3, 4, 5}} {
		f := &Family{desc: d, samples: arrival(devs)}
		got := f.sorted()
		if len(got) != 18 || !isSorted(got) {
			t.Errorf("arrival %d (%v): not sorted", i, devs)
		}
	}
}

// A family larger than the write buffer, out of order, and one with a
// label value that is not ASCII, stream as the protobuf that client_golang
// gives for the same samples.
func TestWriteProtoLargeFamily(t *testing.T) {
	d := NewDesc("rdma_fabric_port_symbol_errors_total", "Symbol errors.", "guid", "port")
	var samples []prometheus.Metric
	for i := 5000; i > 0; i-- {
		samples = append(samples, Counter(d, float64(i), fmt.Sprintf("0x%016x", i), fmt.Sprint(i%40)))
	}
	node := NewDesc("rdma_device_node_description_info", "node_desc.", "device", "node_desc")
	samples = append(samples, Gauge(node, 1, "mlx5_0", "nœud-ü"))
	fams, _ := Group(samples)
	var got bytes.Buffer
	if err := WriteProto(&got, fams, nil); err != nil {
		t.Fatal(err)
	}
	if got.Len() < 2*flushAt {
		t.Fatalf("only %d bytes", got.Len())
	}
	dec := expfmt.NewDecoder(&got, expfmt.NewFormat(expfmt.TypeProtoDelim))
	var names []string
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			break
		}
		names = append(names, mf.GetName())
		switch mf.GetName() {
		case d.Name:
			if len(mf.Metric) != 5000 || mf.Metric[0].GetLabel()[0].GetValue() != "0x0000000000000001" || mf.Metric[4999].GetCounter().GetValue() != 5000 {
				t.Errorf("%s: %d series, first %v, last %v", d.Name, len(mf.Metric), mf.Metric[0], mf.Metric[len(mf.Metric)-1])
			}
		case node.Name:
			if v := mf.Metric[0].GetLabel()[1].GetValue(); v != "nœud-ü" {
				t.Errorf("node_desc %q", v)
			}
		}
	}
	if !slices.Equal(names, []string{node.Name, d.Name}) {
		t.Errorf("families %v", names)
	}
}

// Any arrival, runs in order or not, with duplicates within a run and
// across runs, sorts as a stable sort does, each duplicate left out and
// counted once, the first collected kept (mergeRuns' order and its sign
// of duplicates, against slices.SortStableFunc).
func TestSortedMatchesStableSort(t *testing.T) {
	d := NewDesc("rdma_port_hw_counter_total", "hw.", "device", "port", "counter")
	byLabels := func(a, b *Sample) int {
		return cmp.Or(strings.Compare(a.labels[2], b.labels[2]), strings.Compare(a.labels[0], b.labels[0]), strings.Compare(a.labels[1], b.labels[1]))
	}
	seed := uint32(1)
	rand := func(n int) int { // xorshift: the same cases every run
		seed ^= seed << 13
		seed ^= seed >> 17
		seed ^= seed << 5
		return int(seed % uint32(n))
	}
	for round := range 300 {
		n := rand(60)
		var samples []*Sample
		for i := range n {
			samples = append(samples, Counter(d, float64(i), fmt.Sprintf("mlx5_%d", rand(4)), fmt.Sprint(1+rand(2)), fmt.Sprintf("c%d", rand(8))))
			if round%3 == 0 && len(samples) > 1 && rand(4) == 0 {
				slices.SortStableFunc(samples[len(samples)-2:], byLabels) // make runs
			}
		}
		want := slices.Clone(samples)
		slices.SortStableFunc(want, byLabels)
		want = slices.CompactFunc(want, func(a, b *Sample) bool { return byLabels(a, b) == 0 })
		before := Rejected(Duplicate)
		f := &Family{desc: d, samples: slices.Clone(samples)}
		if got := f.sorted(); !slices.Equal(got, want) {
			t.Fatalf("round %d: sorted %d samples into %v, want %v", round, n, got, want)
		}
		if got, want := Rejected(Duplicate)-before, uint64(len(samples)-len(want)); got != want {
			t.Fatalf("round %d: %d duplicates counted, want %d", round, got, want)
		}
	}
}

// Group gives each family its part of one array: its allocations do not
// grow with the samples of a family (appending to a slice per family
// reallocated each about five times, 440 allocations a dgx-h100 scrape).
func TestGroupAllocations(t *testing.T) {
	var descs []*Desc
	for i := range 20 {
		descs = append(descs, NewDesc(fmt.Sprintf("rdma_family_%d", i), "f.", "device", "port"))
	}
	var ms []prometheus.Metric
	for dev := range 9 { // device by device, as a collector sends them
		for _, d := range descs {
			ms = append(ms, Gauge(d, 1, fmt.Sprintf("mlx5_%d", dev), "1"))
		}
	}
	allocs := testing.AllocsPerRun(20, func() { Group(ms) })
	// The families' map and the counts' (a few buckets each), the
	// families and the one array: not 20 families times the growth of 9
	// samples (about 100).
	if allocs > 16 {
		t.Errorf("Group of 20 families of 9 samples: %.0f allocations, want at most 16", allocs)
	}
}

// WriteText reuses its buffer from one exposition to the next: made
// anew, it was a served scrape's largest allocation (36 KiB).
func TestWriteTextReusesBuffer(t *testing.T) {
	d := NewDesc("rdma_port_thing", "t.", "device", "port")
	var ms []prometheus.Metric
	for dev := range 9 {
		ms = append(ms, Gauge(d, 1, fmt.Sprintf("mlx5_%d", dev), "1"))
	}
	fams, _ := Group(ms)
	const n = 100
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range n {
		if err := WriteText(io.Discard, fams, nil); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&m1)
	// A collection cycle may empty the pool now and then (and the race
	// detector drops some of what is put back): an average well under
	// one buffer, not one each time.
	if per := (m1.TotalAlloc - m0.TotalAlloc) / n; per > textBufSize/2 {
		t.Errorf("WriteText allocates %d bytes a call, want at most %d (its buffer is %d)", per, textBufSize/2, textBufSize)
	}
}
