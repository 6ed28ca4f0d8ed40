// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

// loadRequests is the size of TestLoad. make test sends 2,000: the
// issue's 20,000 took 83 s on the shared 2-core development machine (about
// 240 requests/s, most of it the 105 KB DGX /metrics page; under make
// test's -race the client side alone halves that), too long for every
// make test. make bench runs the
// full 20,000 (RDMA_DOCTOR_LOAD_REQUESTS=20000) and records it in
// docs/performance.md.
func loadRequests(t *testing.T) int {
	n := 2000
	if s := os.Getenv("RDMA_DOCTOR_LOAD_REQUESTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1000 {
			t.Fatalf("RDMA_DOCTOR_LOAD_REQUESTS=%q: want a number >= 1000", s)
		}
		n = v
	}
	return n
}

// loadClient keeps enough idle connections for every worker, so the load
// measures the exporter and not TCP set-up.
func loadClient(conc int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conc
	tr.MaxConnsPerHost = conc
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// hammer sends n GETs at concurrency conc, cycling through paths, and
// returns every request's latency and the errors (a transport error or a
// status other than 200).
func hammer(client *http.Client, base string, paths []string, n, conc int) ([]time.Duration, []string) {
	return hammerCheck(client, base, paths, n, conc, nil)
}

// hammerCheck is hammer with every answer's body also given to check
// (when not nil), whose error counts as the request's.
func hammerCheck(client *http.Client, base string, paths []string, n, conc int, check func(path string, body []byte) error) ([]time.Duration, []string) {
	var (
		mu   sync.Mutex
		errs []string
		lat  = make([]time.Duration, n)
		next = make(chan int)
		wg   sync.WaitGroup
	)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				path := paths[i%len(paths)]
				begin := time.Now()
				resp, err := client.Get(base + path)
				if err == nil {
					var body []byte
					if check != nil {
						body, err = io.ReadAll(resp.Body)
					} else {
						_, err = io.Copy(io.Discard, resp.Body)
					}
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("HTTP %d", resp.StatusCode)
					}
					if err == nil && check != nil {
						err = check(path, body)
					}
				}
				lat[i] = time.Since(begin)
				if err != nil {
					mu.Lock()
					if len(errs) < 20 {
						errs = append(errs, fmt.Sprintf("GET %s: %v", path, err))
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return lat, errs
}

// vmRSS reads the resident set size of pid in kB from /proc/PID/status.
func vmRSS(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

// TestLoad: 2,000 requests (20,000 in make bench) at concurrency 32,
// alternating /metrics and /diagnose on the DGX fixture host. Every request
// answers 200; the resident memory after the run is not far above the
// memory after a warm-up of 500 requests (a leak of 8 KB per request
// would add 16 MB at 2,000; make bench's 20,000 catches 1 KB); p50 and p99 are logged (and written to RDMA_DOCTOR_PERF_OUT for
// make bench), never asserted: the machine is shared.
func TestLoad(t *testing.T) {
	const conc = 32
	n := loadRequests(t)
	e := start(t, hostArgs(t, "dgx-h100")...)
	client := loadClient(conc)
	defer client.CloseIdleConnections()
	base := "http://" + e.addr
	paths := []string{"/metrics", "/diagnose"}

	_, errs := hammer(client, base, paths, 500, conc)
	if len(errs) > 0 {
		t.Fatalf("warm-up: %d errors:\n%s\n%s", len(errs), strings.Join(errs, "\n"), e.stderr.String())
	}
	warm := vmRSS(t, e.cmd.Process.Pid)

	begin := time.Now()
	lat, errs := hammer(client, base, paths, n, conc)
	elapsed := time.Since(begin)
	if len(errs) > 0 {
		t.Fatalf("%d requests: errors (first 20):\n%s", n, strings.Join(errs, "\n"))
	}
	end := vmRSS(t, e.cmd.Process.Pid)

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	summary := fmt.Sprintf("requests=%d concurrency=%d elapsed=%s rps=%.0f p50=%s p99=%s max=%s rss_warm_kb=%d rss_end_kb=%d",
		n, conc, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(),
		percentile(lat, 0.50).Round(time.Microsecond), percentile(lat, 0.99).Round(time.Microsecond),
		lat[len(lat)-1].Round(time.Microsecond), warm, end)
	t.Log(summary)
	if out := os.Getenv("RDMA_DOCTOR_PERF_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(summary+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Generous: GC timing moves RSS by a few MB either way.
	if limit := warm*3/2 + 16*1024; end > limit {
		t.Errorf("RSS grew from %d kB after warm-up to %d kB after %d requests (limit %d kB)", warm, end, n, limit)
	}
}

var (
	raceOnce sync.Once
	raceBin  string
	raceErr  error
)

// raceBinary builds rdma_doctor with the race detector, once per run.
func raceBinary(t *testing.T) string {
	t.Helper()
	testenv.Long(t, "builds and loads the binary with the race detector")
	raceOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rdma_doctor-race")
		if err != nil {
			raceErr = err
			return
		}
		raceBin = filepath.Join(dir, "rdma_doctor")
		cmd := exec.Command("go", "build", "-race", "-o", raceBin, "./cmd/rdma_doctor")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			raceErr = fmt.Errorf("go build -race: %v\n%s", err, out)
		}
	})
	if raceErr != nil {
		t.Fatal(raceErr)
	}
	return raceBin
}

// goroutines reads go_goroutines from /metrics.
func goroutines(t *testing.T, client *http.Client, base string) int {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no go_goroutines in /metrics")
	return 0
}

// TestConcurrentEverything runs the binary built with -race while scrapes,
// /diagnose (every format), /probe, the diagnose sampler (every second, its minimum) and
// the probe scheduler (fake perftest, every second) all run at once, for a
// bounded number of requests. The race detector prints "DATA RACE" on
// stderr for any race; the goroutine count returns to where it was once
// the clients hang up.
func TestConcurrentEverything(t *testing.T) {
	bin := raceBinary(t)
	fake := perftesttest.Install(t, probeReplay())
	cfg := probeWrite(t, t.TempDir(), "rdma_doctor.yml", fmt.Sprintf(`diagnose:
  interval: 1s
  window: 10s
tuning:
  memlock_processes: [slurmd, slurmstepd]
probe:
  enabled: true
  interval: 1s
  scrape_guard: 1s
  perftest_dir: %s
  tests: [ib_send_lat, ib_write_bw]
  loopback:
    - {device: mlx5_0, port: 1}
`, fake))
	root := filepath.Join(repoRoot(t), "fixtures", "hosts", "dgx-h100")
	e := startBinary(t, bin, "--config.file="+cfg, "--path.rootfs="+root)
	base := "http://" + e.addr

	const conc = 16
	client := loadClient(conc)
	// Settle: the first sampler rounds and probe runs start their goroutines.
	if _, errs := hammer(client, base, []string{"/metrics", "/diagnose"}, 64, conc); len(errs) > 0 {
		t.Fatalf("%s\n%s", strings.Join(errs, "\n"), e.stderr.String())
	}
	paths := []string{"/metrics", "/diagnose", "/diagnose?format=json", "/metrics", "/diagnose?format=html", "/probe", "/diagnose?format=nhc", "/"}
	// The scheduler has run at least once, so its loop is live during the
	// load (its scrape guard may hold later runs while scrapes arrive).
	for i := 0; probeEntries(t, client, base) == 0; i++ {
		if i > 600 {
			t.Fatalf("the probe scheduler did not run in 60 s\n%s", e.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A first burst fills the pool of read workers that wait for the next
	// scrape (hostfs.Go keeps at most hostfs.MaxIdleWorkers, by design), so the baseline
	// holds them as the reading after the load will.
	if _, errs := hammer(client, base, paths, 200, conc); len(errs) > 0 {
		t.Fatalf("%s\n%s", strings.Join(errs, "\n"), e.stderr.String())
	}
	// The baseline is the lowest of a few readings, once the settling
	// requests' connections are gone.
	before := 1 << 30
	for i := 0; i < 10; i++ {
		client.CloseIdleConnections()
		before = min(before, goroutines(t, client, base))
		time.Sleep(50 * time.Millisecond)
	}

	if _, errs := hammer(client, base, paths, 800, conc); len(errs) > 0 {
		t.Fatalf("%s\n%s", strings.Join(errs, "\n"), e.stderr.String())
	}
	client.CloseIdleConnections()

	// The server's connection goroutines end when it reads the clients'
	// hang-ups; poll for that (bounded), never time it.
	var after int
	for i := 0; i < 100; i++ {
		after = goroutines(t, client, base)
		client.CloseIdleConnections()
		if after <= before+2+hostfs.MaxIdleWorkers {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("goroutines: %d before 800 concurrent requests, %d after", before, after)
	// +2: the probe scheduler may be mid-run (a fake perftest pair); and
	// the read workers waiting for the next scrape may number up to
	// hostfs.MaxIdleWorkers, however many waited before. A leak per
	// request would be 800 or more.
	if after > before+2+hostfs.MaxIdleWorkers {
		t.Errorf("goroutines: %d before the load, %d after it (leak)", before, after)
	}
	if s := e.stderr.String(); strings.Contains(s, "DATA RACE") {
		t.Fatalf("race detector:\n%s", s)
	}
}

// probeEntries counts the results on /probe.
func probeEntries(t *testing.T, client *http.Client, base string) int {
	t.Helper()
	resp, err := client.Get(base + "/probe")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return len(doc.Entries)
}

// startBinary is start with another binary (the -race build).
func startBinary(t *testing.T, bin string, args ...string) *exporter {
	t.Helper()
	e := &exporter{addr: freeAddr(t), stderr: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	e.cmd = exec.CommandContext(ctx, bin, append([]string{"--web.listen-address=" + e.addr}, args...)...)
	e.cmd.Stderr = e.stderr
	if err := e.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })
	client := &http.Client{Timeout: 2 * time.Second}
	for i := 0; ; i++ {
		resp, err := client.Get("http://" + e.addr + "/")
		if err == nil {
			resp.Body.Close()
			waitFirstDiagnosis(t, e)
			return e
		}
		select {
		case <-exited:
			t.Fatalf("rdma_doctor exited:\n%s", e.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if i > 600 {
			t.Fatalf("rdma_doctor (-race) did not listen on %s\n%s", e.addr, e.stderr.String())
		}
	}
}
