// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
)

// fabricCopies is how many copies of the recorded ibsim fabric (48
// switch ports, internal/read/fabric/testdata/ibqueryerrors) make the large
// one: 10,080 switch ports, each copy's GUIDs moved apart, its counters
// and states as recorded.
const fabricCopies = 210

// largeFabric returns the fabric's Blocks (collector.FabricBlocks) of
// the recorded ibsim scan and sweep, copied fabricCopies times, and its
// switch ports.
func largeFabric(t testing.TB) ([]prometheus.Metric, int) {
	t.Helper()
	f, sw, opts := copiedFabric(t, fabricCopies)
	return collector.FabricBlocks(f, sw, opts), countSwitchPorts(sw)
}

func countSwitchPorts(sw *fabric.Sweep) int {
	n := 0
	for _, p := range sw.Ports {
		if p.Switch {
			n++
		}
	}
	return n
}

// copiedFabric is the recorded ibsim scan and sweep copied copies times
// (each copy's GUIDs moved apart, its counters and states as recorded),
// and the collector's options that read it.
func copiedFabric(t testing.TB, copies int) (*fabric.Fabric, *fabric.Sweep, collector.FabricOptions) {
	t.Helper()
	tools := fabrictest.Install(t)
	opts := collector.FabricOptions{PortSeries: collector.PortSeriesAll}
	opts.Path, opts.Counters, opts.IBQueryErrorsPath, opts.IBNetDiscoverPath, opts.SMInfoPath, opts.CacheDir = tools.IBLinkInfo, true, tools.IBQueryErrors, tools.IBNetDiscover, tools.SMInfo, t.TempDir()
	h := rdmahost.New(rdmahost.Options{Fabric: &opts.FabricOptions})
	h.Round(context.Background())
	snap := h.Snapshot()
	scan, sweep := snap.FabricScan(context.Background()), snap.FabricSweep(context.Background())
	if scan == nil || scan.Fabric == nil || sweep == nil || sweep.Last == nil || sweep.Last.Unknown != 0 {
		t.Fatalf("the recorded fabric: scan %+v, sweep %+v", scan, sweep)
	}
	f0, sw0 := scan.Fabric, sweep.Last
	f := &fabric.Fabric{}
	sw := &fabric.Sweep{Start: sw0.Start, Duration: sw0.Duration, Topology: f, Failures: map[fabric.Reason]int{}}
	for k := range uint64(copies) {
		move := func(g uint64) uint64 { return g ^ (k+1)<<40 }
		desc := func(d string) string { return fmt.Sprintf("%s c%d", d, k) }
		for _, l := range f0.Links {
			l.A.GUID, l.B.GUID, l.A.Desc, l.B.Desc = move(l.A.GUID), move(l.B.GUID), desc(l.A.Desc), desc(l.B.Desc)
			f.Links = append(f.Links, l)
		}
		for _, p := range f0.PortLines {
			p.GUID, p.Desc = move(p.GUID), desc(p.Desc)
			f.PortLines = append(f.PortLines, p)
		}
		for _, p := range sw0.Ports {
			p.GUID, p.Desc = move(p.GUID), desc(p.Desc)
			sw.Ports = append(sw.Ports, p)
		}
		f.Switches += f0.Switches
		f.CAs += f0.CAs
		f.Ports += f0.Ports
	}
	return f, sw, opts
}

// fabricHandler is a handler whose collection is the large fabric's
// Blocks, with build info beside them, and the budget maxMemory.
func fabricHandler(t testing.TB, maxMemory int64) (*handler, int) {
	blocks, ports := largeFabric(t)
	m, _ := newHandler(Options{
		Collect:     func(context.Context) [][]prometheus.Metric { return [][]prometheus.Metric{blocks} },
		Parts:       []prometheus.Collector{BuildInfo("rdma_doctor")},
		Logger:      slog.New(slog.DiscardHandler),
		Timeout:     10 * time.Minute, // 20 debugging-format scrapes wait for each other
		MaxRequests: 40,
		MaxMemory:   maxMemory,
	})
	return m, ports
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heldWriter is a response that, every few writes, collects the garbage
// and notes the live heap: the peak of what the scrapes running at that
// moment hold, measured in bytes, never in time.
type heldWriter struct {
	discardResponse
	peak *atomic.Uint64
}

// heldEvery is how many bytes a heldWriter takes between two looks.
const heldEvery = 1 << 20

func (w *heldWriter) Write(p []byte) (int, error) {
	if w.n/heldEvery != (w.n+len(p))/heldEvery || w.n == 0 {
		runtime.GC()
		for live := liveHeap(); ; {
			old := w.peak.Load()
			if live <= old || w.peak.CompareAndSwap(old, live) {
				break
			}
		}
	}
	return w.discardResponse.Write(p)
}

// TestScrapeMemoryFabric: on a fabric of 10,080 switch ports, 20
// concurrent clients of each format, gzip or not, hold no more than the
// budget reserved for the scrapes running (its peak), which stays within
// --web.max-requests-memory's default, and every scrape writes the whole
// answer, the fabric's series included. It catches what issue 35 found:
// a protobuf scrape that makes the fabric's samples again holds 86 MB
// against 5.7 MB reserved, and debugging formats reserved 3,200 bytes a
// fabric sample (380 MB) are served one alone, without the fabric
// series.
func TestScrapeMemoryFabric(t *testing.T) {
	testenv.Long(t, "10,080 switch ports")
	const limit = 256 << 20 // --web.max-requests-memory's default
	m, ports := fabricHandler(t, limit)
	if ports < 10000 {
		t.Fatalf("%d switch ports", ports)
	}
	for _, f := range []struct{ name, accept, encoding string }{
		// The debugging formats (encoding=text, compact-text) have
		// clients of their own (debugClients).
		{"text", "text/plain;version=0.0.4", ""},
		{"text gzip", "text/plain;version=0.0.4", "gzip"},
		{"protobuf", protobufAccept, ""},
		{"protobuf gzip", protobufAccept, "gzip"},
		{"protobuf text", protoTextAccept, ""},
		{"protobuf compact", strings.Replace(protoTextAccept, "encoding=text", "encoding=compact-text", 1), "gzip"},
	} {
		t.Run(f.name, func(t *testing.T) {
			const scrapes = 20
			debugging := strings.Contains(f.accept, "encoding=text") || strings.Contains(f.accept, "encoding=compact-text")
			req := func() *http.Request {
				r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				r.Header.Set("Accept", f.accept)
				r.Header.Set("Accept-Encoding", f.encoding)
				return r
			}
			// One alone first: the whole answer, the fabric included.
			whole := httptest.NewRecorder()
			m.ServeHTTP(whole, req())
			if whole.Code != http.StatusOK || whole.Body.Len() < 100000 {
				t.Fatalf("alone: HTTP %d, %d bytes", whole.Code, whole.Body.Len())
			}
			if f.encoding == "" && !strings.Contains(whole.Body.String(), "rdma_fabric_port_symbol_errors_total") {
				t.Fatal("alone: no fabric port series")
			}
			if debugging {
				debugClients(t, m, f.accept, f.encoding, whole.Body.Bytes(), limit)
				return
			}
			var peakLive, peakUsed atomic.Uint64
			stop := watchBudget(m, &peakUsed)
			runtime.GC()
			base := liveHeap()
			var wg sync.WaitGroup
			ws := make([]*heldWriter, scrapes)
			for i := range ws {
				ws[i] = &heldWriter{discardResponse: discardResponse{h: http.Header{}}, peak: &peakLive}
				wg.Add(1)
				go func() { defer wg.Done(); m.ServeHTTP(ws[i], req()) }()
			}
			wg.Wait()
			stop()
			for i, w := range ws {
				if w.code != 0 && w.code != http.StatusOK || w.n != whole.Body.Len() {
					t.Errorf("scrape %d: HTTP %d, %d bytes, alone %d", i, w.code, w.n, whole.Body.Len())
				}
			}
			held := int64(peakLive.Load()) - int64(base)
			t.Logf("%d switch ports, %d concurrent scrapes: %d bytes held at most, budget reserved %d at most (limit %d), one answer %d bytes",
				ports, scrapes, held, peakUsed.Load(), limit, whole.Body.Len())
			if held > int64(peakUsed.Load()) || peakUsed.Load() > limit {
				t.Errorf("%d bytes held, more than the %d reserved (limit %d)", held, peakUsed.Load(), limit)
			}
		})
	}
}

// watchBudget notes the peak of m's budget in peak, read as the scrapes
// write, until the function it returns is called.
func watchBudget(m *handler, peak *atomic.Uint64) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			m.memory.mu.Lock()
			used := uint64(m.memory.used)
			m.memory.mu.Unlock()
			if used > peak.Load() {
				peak.Store(used)
			}
			select {
			case <-done:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	return func() { close(done); <-exited }
}

// heldHandler serves m through heldWriters: every MiB a scrape writes,
// the garbage is collected and the live heap noted in peak.
type heldHandler struct {
	m    *handler
	peak *atomic.Uint64
}

func (h heldHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.m.ServeHTTP(&heldResponse{ResponseWriter: w, peak: h.peak}, r)
}

// heldResponse is a connection's response that notes the live heap every
// heldEvery bytes, as heldWriter does.
type heldResponse struct {
	http.ResponseWriter
	n    int
	peak *atomic.Uint64
}

func (w *heldResponse) Write(p []byte) (int, error) {
	if w.n/heldEvery != (w.n+len(p))/heldEvery || w.n == 0 {
		runtime.GC()
		for live := liveHeap(); ; {
			old := w.peak.Load()
			if live <= old || w.peak.CompareAndSwap(old, live) {
				break
			}
		}
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += n
	return n, err
}

// Unwrap lets the handler's http.ResponseController reach the connection.
func (w *heldResponse) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// debugPrefix is how much of its answer a debugging-format client of
// debugClients reads (decompressed) before it hangs up.
const debugPrefix = 2 << 20

// debugClients runs 20 concurrent clients of a protobuf debugging format
// against m over HTTP. They run one at a time (debugScrapes), the others
// waiting outside --web.max-requests; each must be answered 200 with the
// start of the whole answer (whole, answered alone), or refused 503
// (none is here: their deadline is 10 minutes). A client reads 2 MiB of
// it and hangs up, which ends its scrape and lets the next one in: 20
// answers of 72 MB in protobuf text took a minute on a 2-core VM (the
// text marshalling), and what a scrape holds is the same at any point of
// its answer (one series decoded at a time). The live heap is noted
// every MiB written and must stay within the budget reserved for the
// scrapes running, which stays within limit.
func debugClients(t *testing.T, m *handler, accept, encoding string, whole []byte, limit int64) {
	t.Helper()
	if encoding == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(whole))
		if err != nil {
			t.Fatal(err)
		}
		if whole, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	if len(whole) < debugPrefix {
		t.Fatalf("the whole answer is %d bytes, less than a client reads", len(whole))
	}
	var peakLive, peakUsed atomic.Uint64
	srv := httptest.NewServer(heldHandler{m: m, peak: &peakLive})
	defer srv.Close()
	stop := watchBudget(m, &peakUsed)
	runtime.GC()
	base := liveHeap()
	const clients = 20
	codes := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
			req.Header.Set("Accept", accept)
			req.Header.Set("Accept-Encoding", encoding)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			codes[i] = resp.StatusCode
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("client %d: HTTP %d: %s", i, resp.StatusCode, b)
				}
				return
			}
			var body io.Reader = resp.Body
			if encoding == "gzip" {
				zr, err := gzip.NewReader(resp.Body)
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				body = zr
			}
			// Compared a chunk at a time: the clients' own buffers are
			// in the live heap measured.
			got := make([]byte, 32<<10)
			for off := 0; off < debugPrefix; off += len(got) {
				if _, err := io.ReadFull(body, got); err != nil || !bytes.Equal(got, whole[off:off+len(got)]) {
					t.Errorf("client %d: %v, or bytes %d to %d are not the whole answer's", i, err, off, off+len(got))
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	served := 0
	for _, c := range codes {
		if c == http.StatusOK {
			served++
		}
	}
	held := int64(peakLive.Load()) - int64(base)
	t.Logf("%d concurrent clients: %d served, %d refused 503; %d bytes held at most, budget reserved %d at most (limit %d), the whole answer %d bytes",
		clients, served, clients-served, held, peakUsed.Load(), limit, len(whole))
	if served != clients {
		t.Errorf("%d of %d clients served, want every one (they wait for each other within 10 minutes)", served, clients)
	}
	if held > int64(peakUsed.Load()) || peakUsed.Load() > uint64(limit) {
		t.Errorf("%d bytes held, more than the %d reserved (limit %d)", held, peakUsed.Load(), limit)
	}
}
