// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"bytes"
	"context"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/probe/control"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

const (
	latSample = "ib_send_lat_ib_v25.10plus.txt"              // t_typical 1.27 µs
	bwSample  = "ib_write_bw_report_gbits_ib_v25.10plus.txt" // 392.34 Gb/s average, 65536 bytes
)

var secret = []byte("probe-test-secret-0123456789")

// replay makes both sides of each test replay a recorded run over the
// fake's TCP exchange.
func replay() map[string]perftesttest.Sides { return perftesttest.Replay(latSample, bwSample) }

// sysfs writes a class/infiniband tree with one port rate.
func sysfs(t *testing.T, device, rate string) hostfs.FS {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "class", "infiniband", device, "ports", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rate"), []byte(rate+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return hostfs.Dir(root)
}

func newProber(t *testing.T, fake perftesttest.Dir, cfg *config.Probe) *Prober {
	t.Helper()
	return &Prober{
		Runner: &perftest.Runner{Dir: string(fake), Proc: hostfs.Dir("/proc"), Locks: &perftest.DeviceLocks{},
			Setup: 3 * time.Second, ListenWait: 2 * time.Second, ServerGrace: 2 * time.Second},
		Client: &control.Client{Secret: secret},
		Sys:    sysfs(t, "mlx5_0", "400 Gb/sec (4X NDR)"),
		Config: cfg,
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }

func TestProberLoopback(t *testing.T) {
	cfg := &config.Probe{Loopback: []config.ProbeLoopback{{Device: "mlx5_0", Port: 1}, {Device: "mlx5_0", PeerDevice: "mlx5_1"}}}
	targets, err := Targets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if targets[0].Mode != ModeLoopback || targets[0].Name != "loopback" || targets[1].Mode != ModeLoopbackCable || targets[1].Name != "loopback:mlx5_1/1" {
		t.Fatalf("targets %+v", targets)
	}
	p := newProber(t, perftesttest.Install(t, replay()), cfg)
	ctx := context.Background()

	lat := p.Run(ctx, &targets[0], perftest.SendLat)
	if !lat.Success || lat.Latency == nil || !near(lat.Latency.Typical, 1.27e-6) || !near(lat.Latency.P999, 5.19e-6) || !lat.Latency.HasPercentiles {
		t.Fatalf("latency result %+v %+v", lat, lat.Latency)
	}
	if lat.Peer != "loopback" || lat.Test != "ib_send_lat" || lat.Device != "mlx5_0" || lat.Port != 1 || lat.Mode != ModeLoopback || lat.Duration <= 0 {
		t.Errorf("labels %+v", lat)
	}
	if lat.PortRate != 0 {
		t.Error("latency probes do not read the port rate")
	}
	bw := p.Run(ctx, &targets[1], perftest.WriteBW)
	if !bw.Success || bw.Bandwidth == nil || !near(bw.Bandwidth.Average, 392.34e9/8) || !bw.Bandwidth.PeakMeasured {
		t.Fatalf("bandwidth result %+v", bw)
	}
	if ratio, ok := bw.BandwidthRatio(); !ok || !near(ratio, 392.34/400) || !near(bw.PortRate, 50e9) {
		t.Errorf("ratio %v %v, rate %v", ratio, ok, bw.PortRate)
	}
	if bw.PeerDevice != "mlx5_1" || bw.Mode != ModeLoopbackCable {
		t.Errorf("%+v", bw)
	}
}

func TestProberFailureKinds(t *testing.T) {
	script := map[string]perftesttest.Sides{
		"ib_write_lat": {Server: perftesttest.Behaviour{StderrFile: "error_port_down_lsgunth_perftest_issue1.txt", Exit: 1}},
		"ib_write_bw": {Server: perftesttest.Behaviour{Protocol: true},
			Client: perftesttest.Behaviour{StderrFile: "error_completion_retry_exceeded_softiwarp_issue27.txt", Exit: 1, Protocol: true}},
		"ib_send_lat": {Server: perftesttest.Behaviour{Protocol: true}, Client: perftesttest.Behaviour{Mode: "garbage", Bytes: 100, Protocol: true}},
	}
	cfg := &config.Probe{Loopback: []config.ProbeLoopback{{Device: "mlx5_0"}}}
	targets, _ := Targets(cfg)
	p := newProber(t, perftesttest.Install(t, script), cfg)
	for test, kind := range map[perftest.Test]perftest.ErrorKind{
		perftest.WriteLat: perftest.PortDown,
		perftest.WriteBW:  perftest.RetryExceeded,
		perftest.SendLat:  perftest.BadOutput,
	} {
		r := p.Run(context.Background(), &targets[0], test)
		if r.Success || r.ErrorKind != string(kind) || r.Error == "" || r.Latency != nil || r.Bandwidth != nil {
			t.Errorf("%s: %+v, want %s", test, r, kind)
		}
	}
}

// responder starts a control server on addrs with the fake perftest.
func responder(t *testing.T, script map[string]perftesttest.Sides, addrs ...string) []string {
	t.Helper()
	fake := perftesttest.Install(t, script)
	cfg := &config.Probe{Responder: config.ProbeResponder{
		Enabled: true, AllowedTests: []string{"ib_send_lat", "ib_write_bw", "ib_write_lat", "tcp_lat", "tcp_bw"},
		Devices: []config.ProbeDevice{{Device: "mlx5_0", Port: 1}}, PerftestPorts: "21515-21530",
	}}
	srv, err := control.NewServer(cfg, secret, &perftest.Runner{Dir: string(fake), Proc: hostfs.Dir("/proc"),
		Locks: &perftest.DeviceLocks{}, Setup: 3 * time.Second, ListenWait: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var out []string
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		wg.Add(1)
		go func() { defer wg.Done(); _ = srv.Serve(ctx, ln) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return out
}

func TestProberPeer(t *testing.T) {
	addr := responder(t, replay(), "127.0.0.1:0")[0]
	cfg := &config.Probe{SecretFile: "x", Peers: []config.ProbePeer{{Name: "node2", Address: addr, Device: "mlx5_0"}}}
	targets, err := Targets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if targets[0].PerftestHost != "127.0.0.1" || targets[0].Mode != ModePeer {
		t.Fatalf("%+v", targets[0])
	}
	p := newProber(t, perftesttest.Install(t, replay()), cfg)
	r := p.Run(context.Background(), &targets[0], perftest.WriteBW)
	if !r.Success || r.Peer != "node2" || !near(r.Bandwidth.Average, 392.34e9/8) {
		t.Fatalf("%+v", r)
	}
	// Wrong secret: a typed refusal, recorded as such.
	p.Client = &control.Client{Secret: []byte("some-other-secret-xyz")}
	if r := p.Run(context.Background(), &targets[0], perftest.WriteBW); r.Success || r.ErrorKind != control.KindUnauthorized {
		t.Errorf("wrong secret: %+v", r)
	}
	// Nobody listening.
	targets[0].Address = "127.0.0.1:1"
	if r := p.Run(context.Background(), &targets[0], perftest.WriteBW); r.Success || r.ErrorKind != "responder_unreachable" {
		t.Errorf("no responder: %+v", r)
	}
}

// TestPeerServerFailureIsTheCause: the peer's port is down; the local
// client only sees a refused connection, the responder's report says why.
func TestPeerServerFailureIsTheCause(t *testing.T) {
	script := replay()
	script["ib_write_lat"] = perftesttest.Sides{
		Server: perftesttest.Behaviour{StderrFile: "error_port_down_lsgunth_perftest_issue1.txt", Exit: 1},
	}
	addr := responder(t, script, "127.0.0.1:0")[0]
	cfg := &config.Probe{SecretFile: "x", Peers: []config.ProbePeer{{Name: "node2", Address: addr, Device: "mlx5_0"}}}
	targets, _ := Targets(cfg)
	p := newProber(t, perftesttest.Install(t, replay()), cfg)
	if r := p.Run(context.Background(), &targets[0], perftest.WriteLat); r.Success || r.ErrorKind != string(perftest.PortDown) {
		t.Errorf("%+v", r)
	}
}

func TestStoreKeepsLastGood(t *testing.T) {
	s := NewStore()
	t0 := time.Unix(1700000000, 0)
	good := Result{Peer: "n2", Test: "ib_write_lat", Device: "mlx5_0", Port: 1, Start: t0, Duration: time.Second, Success: true,
		Latency: &Latency{Min: 1e-6, Typical: 1.2e-6, Avg: 1.3e-6, Max: 5e-6, P99: 2e-6, P999: 4e-6, HasPercentiles: true}}
	bad := Result{Peer: "n2", Test: "ib_write_lat", Device: "mlx5_0", Port: 1, Start: t0.Add(time.Minute), Duration: 2 * time.Second,
		ErrorKind: "retry_exceeded", Error: "perftest client: retry_exceeded"}
	s.Record(good)
	s.Record(bad)
	s.Record(bad)
	e, ok := s.Get(Key{Peer: "n2", Test: "ib_write_lat", Device: "mlx5_0", Port: 1})
	if !ok || e.Runs != 3 || e.Last.Success || e.LastSuccess == nil || e.LastSuccess.Latency.Typical != 1.2e-6 || e.Failures["retry_exceeded"] != 2 {
		t.Fatalf("%+v", e)
	}
	// Copies: changing what Latest returned changes nothing stored.
	e.Failures["retry_exceeded"] = 99
	if e2, _ := s.Get(e.Key); e2.Failures["retry_exceeded"] != 2 {
		t.Error("Get returned the store's own map")
	}

	c := &Collector{Store: s}
	want := `
# HELP rdma_probe_success Whether the latest probe run succeeded (1) or failed (0).
# TYPE rdma_probe_success gauge
rdma_probe_success{device="mlx5_0",memory="host",peer="n2",port="1",test="ib_write_lat"} 0
# HELP rdma_probe_latency_seconds Latency of the last successful probe run in seconds (perftest's half or full round trip).
# TYPE rdma_probe_latency_seconds gauge
rdma_probe_latency_seconds{device="mlx5_0",memory="host",peer="n2",port="1",stat="avg",test="ib_write_lat"} 1.3e-06
rdma_probe_latency_seconds{device="mlx5_0",memory="host",peer="n2",port="1",stat="max",test="ib_write_lat"} 5e-06
rdma_probe_latency_seconds{device="mlx5_0",memory="host",peer="n2",port="1",stat="min",test="ib_write_lat"} 1e-06
rdma_probe_latency_seconds{device="mlx5_0",memory="host",peer="n2",port="1",stat="p99",test="ib_write_lat"} 2e-06
rdma_probe_latency_seconds{device="mlx5_0",memory="host",peer="n2",port="1",stat="p999",test="ib_write_lat"} 4e-06
rdma_probe_latency_seconds{device="mlx5_0",memory="host",peer="n2",port="1",stat="typical",test="ib_write_lat"} 1.2e-06
# HELP rdma_probe_last_run_timestamp_seconds When the latest probe run finished, in seconds since the epoch.
# TYPE rdma_probe_last_run_timestamp_seconds gauge
rdma_probe_last_run_timestamp_seconds{device="mlx5_0",memory="host",peer="n2",port="1",test="ib_write_lat"} 1.700000062e+09
# HELP rdma_probe_last_success_timestamp_seconds When the latest successful probe run finished, in seconds since the epoch.
# TYPE rdma_probe_last_success_timestamp_seconds gauge
rdma_probe_last_success_timestamp_seconds{device="mlx5_0",memory="host",peer="n2",port="1",test="ib_write_lat"} 1.700000001e+09
# HELP rdma_probe_duration_seconds Wall time of the latest probe run in seconds, setup included.
# TYPE rdma_probe_duration_seconds gauge
rdma_probe_duration_seconds{device="mlx5_0",memory="host",peer="n2",port="1",test="ib_write_lat"} 2
# HELP rdma_probe_runs_total Probe runs since start.
# TYPE rdma_probe_runs_total counter
rdma_probe_runs_total{device="mlx5_0",memory="host",peer="n2",port="1",test="ib_write_lat"} 3
# HELP rdma_probe_failures_total Failed probe runs since start, by reason.
# TYPE rdma_probe_failures_total counter
rdma_probe_failures_total{device="mlx5_0",memory="host",peer="n2",port="1",reason="retry_exceeded",test="ib_write_lat"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if probs, err := testutil.CollectAndLint(c); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", probs, err)
	}

	// A bandwidth success: average, peak, rate and ratio; no peak when
	// it was not measured.
	s.Record(Result{Peer: "loopback", Test: "ib_write_bw", Device: "mlx5_1", Port: 1, Start: t0, Success: true, PortRate: 50e9,
		Bandwidth: &Bandwidth{Average: 45e9, MessagesPerSecond: 7e5}})
	want = `
# HELP rdma_probe_bandwidth_bytes_per_second Bandwidth of the last successful probe run in bytes per second.
# TYPE rdma_probe_bandwidth_bytes_per_second gauge
rdma_probe_bandwidth_bytes_per_second{device="mlx5_1",memory="host",peer="loopback",port="1",stat="average",test="ib_write_bw"} 4.5e+10
# HELP rdma_probe_bandwidth_ratio Average bandwidth of the last successful probe run over the local port's active rate.
# TYPE rdma_probe_bandwidth_ratio gauge
rdma_probe_bandwidth_ratio{device="mlx5_1",memory="host",peer="loopback",port="1",test="ib_write_bw"} 0.9
# HELP rdma_probe_messages_per_second Message rate of the last successful bandwidth probe run.
# TYPE rdma_probe_messages_per_second gauge
rdma_probe_messages_per_second{device="mlx5_1",memory="host",peer="loopback",port="1",test="ib_write_bw"} 700000
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "rdma_probe_bandwidth_bytes_per_second", "rdma_probe_bandwidth_ratio", "rdma_probe_messages_per_second"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c); n != 20 { // 12 for the latency entry, 8 for the bandwidth one
		t.Errorf("%d series", n)
	}
	// Registers cleanly next to others.
	if err := prometheus.NewRegistry().Register(c); err != nil {
		t.Error(err)
	}
}

func TestRotation(t *testing.T) {
	ts := []Target{
		{Name: "a", Tests: []perftest.Test{perftest.WriteLat, perftest.WriteBW}},
		{Name: "b", Tests: []perftest.Test{perftest.SendLat}},
	}
	var got []string
	for _, p := range Rotation(ts) {
		got = append(got, p.Target.Name+"/"+string(p.Test))
	}
	if strings.Join(got, " ") != "a/ib_write_lat b/ib_send_lat a/ib_write_bw" {
		t.Errorf("%v", got)
	}
}

// TestScheduler runs the rotation with the waits recorded instead of slept,
// and stops it from inside the third wait.
func TestScheduler(t *testing.T) {
	cfg := &config.Probe{Loopback: []config.ProbeLoopback{{Device: "mlx5_0", Tests: []string{"ib_send_lat", "ib_write_bw"}}}}
	targets, _ := Targets(cfg)
	store := NewStore()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	s := &Scheduler{
		Prober:   newProber(t, perftesttest.Install(t, replay()), cfg),
		Store:    store,
		Pairs:    Rotation(targets),
		Interval: time.Minute,
		Jitter:   0.2,
		Guard:    &ScrapeGuard{Quiet: time.Second},
		sleep: func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			if len(waits) == 3 {
				cancel()
			}
			return ctx.Err()
		},
	}
	s.Run(ctx)
	if len(waits) != 3 {
		t.Fatalf("waits %v", waits)
	}
	if waits[0] > 15*time.Second {
		t.Errorf("first wait %v: want at most jitter × (1+jitter) × interval", waits[0])
	}
	for _, w := range waits[1:] {
		if w < 48*time.Second || w > 72*time.Second {
			t.Errorf("wait %v outside interval ± 20 %%", w)
		}
	}
	es := store.Latest()
	if len(es) != 2 || es[0].Test != "ib_send_lat" || es[1].Test != "ib_write_bw" || !es[0].Last.Success || !es[1].Last.Success {
		t.Fatalf("%+v", es)
	}
}

// TestSchedulerNoTargets: with no pairs, Run returns at once rather than
// idling until its context ends. In a synctest bubble, synctest.Wait
// returns once Run has either returned or blocked for good, so a Run that
// waits is a failure here, not a test that hangs.
func TestSchedulerNoTargets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() { (&Scheduler{}).Run(ctx); close(done) }()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Error("Run with no targets is still running: it must return without waiting for its context")
			cancel() // let the bubble end
			<-done
		}
	})
}

func TestScrapeGuard(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	g := &ScrapeGuard{Quiet: 2 * time.Second, now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	if err := g.Wait(context.Background()); err != nil {
		t.Fatalf("no scrape yet: %v", err)
	}
	g.Mark()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := g.Wait(ctx); err == nil {
		t.Error("returned right after a scrape")
	}
	mu.Lock()
	now = now.Add(3 * time.Second)
	mu.Unlock()
	if err := g.Wait(context.Background()); err != nil {
		t.Errorf("quiet again: %v", err)
	}
	// The collector marks.
	c := &Collector{Store: NewStore(), Guard: g}
	testutil.CollectAndCount(c)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := g.Wait(ctx2); err == nil {
		t.Error("a scrape through the collector was not marked")
	}
}

func TestCompare(t *testing.T) {
	addrs := responder(t, replay(), "127.0.0.1:0", "127.0.0.2:0")
	cfg := &config.Probe{SecretFile: "x", Peers: []config.ProbePeer{{Name: "node2", Address: addrs[0], Device: "mlx5_0",
		IPoIBAddress: addrs[0], EthernetAddress: addrs[1]}}}
	targets, err := Targets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := newProber(t, perftesttest.Install(t, replay()), cfg)
	s := DefaultCompareSettings()
	s.TCPLatency.Iterations = 200
	s.TCPBandwidth.Duration = 200 * time.Millisecond
	c := p.Compare(context.Background(), &targets[0], s)
	if len(c.Transports) != 3 {
		t.Fatalf("%+v", c)
	}
	rdma := c.Transports[0]
	if rdma.Name != "RDMA" || !near(rdma.LatencySeconds, 1.27e-6) || !near(rdma.BytesPerSecond, 392.34e9/8) || len(rdma.Errors) > 0 {
		t.Errorf("RDMA row %+v", rdma)
	}
	for _, tr := range c.Transports[1:] {
		if tr.LatencySeconds <= 0 || tr.BytesPerSecond <= 0 || len(tr.Errors) > 0 || tr.SenderCPU <= 0 {
			t.Errorf("%s row %+v", tr.Name, tr)
		}
	}
	var b bytes.Buffer
	if err := c.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"TRANSPORT", "RDMA", "1.27 µs", "392.34 Gb/s", "IPoIB", addrs[0], "Ethernet", addrs[1]} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	t.Logf("\n%s", out)
}

func TestFormat(t *testing.T) {
	for in, want := range map[float64]string{1.27e-6: "1.27 µs", 2.5e-3: "2.50 ms", 3: "3.00 s"} {
		if got := FormatSeconds(in); got != want {
			t.Errorf("%v: %q", in, got)
		}
	}
	for in, want := range map[float64]string{50e9: "400.00 Gb/s", 12.5e6: "100.0 Mb/s"} {
		if got := FormatRate(in); got != want {
			t.Errorf("%v: %q", in, got)
		}
	}
}

// TestMain removes the fake perftest the tests share once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	perftesttest.RemoveBuilt()
	os.Exit(code)
}
