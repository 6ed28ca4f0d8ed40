// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bytes"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/internal/config"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
)

// counterPath is every file of this module whose code a port counter
// runs through, from its sysfs file to the HTTP answer, in the order it
// meets them: docs/architecture.md's "Follow a counter" walks through the same list.
// TestCounterPath takes it from the real call stacks; a layer added on
// the way shows there first.
var counterPath = []string{
	"internal/hostfs/kept.go",      // the bounded read of the file (hostfs.Attr)
	"internal/infiniband/class.go", // the counter parsed, in its device's Port
	"internal/host/host.go",        // read once per collection (Snapshot.Class)
	"collector/infiniband.go",      // the series: name, labels, scale
	"collector/collector.go",       // the collection the collectors run in (Aggregator)
	"internal/expo/expo.go",        // the sample, grouped, sorted and written as text
	"internal/scrape/scrape.go",    // the HTTP answer
}

// The files a counter's call stacks pass through, goroutines' ancestors
// included (GODEBUG=tracebackancestors, which the runtime reads only at
// start: the test runs itself again with it): when its file is read and
// when its line is written to the response. The infiniband collector runs
// alone: in a default scrape the class is read, once, by whichever
// collector asks for it first.
func TestCounterPath(t *testing.T) {
	if os.Getenv(pathChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCounterPath$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), pathChild+"=1", "GODEBUG=tracebackancestors=100")
		// Its output is logged only when it failed: go test -json would
		// read its result lines as this test's subtests.
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the traced run failed: %v\n%s", err, out)
		}
		if !bytes.Contains(out, []byte("--- PASS: TestCounterPath")) {
			t.Fatalf("the traced run did not run TestCounterPath:\n%s", out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if _, path, ok := strings.Cut(l, "a counter runs through "); ok {
				t.Log("a counter runs through " + path)
			}
		}
		return
	}
	p, err := hostfs.Paths{Rootfs: filepath.Join("..", "..", "fixtures", "hosts", "dgx-h100")}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	const file = "class/infiniband/mlx5_0/ports/1/counters/port_xmit_data"
	const line = `rdma_port_data_transmitted_bytes_total{device="mlx5_0",port="1"}`
	var st stacks
	fsys := p.Open()
	fsys.Sys = tracedFS{FS: fsys.Sys, name: file, record: st.add}
	logger := slog.New(slog.DiscardHandler)
	agg, err := collector.New(collector.Env{Host: rdmahost.New(rdmahost.Options{Paths: p, FS: &fsys}), Config: &config.Config{}, Logger: logger},
		collector.DefaultFlags(), 10*time.Second, "infiniband")
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Collect: agg.Metrics, Logger: logger, Timeout: 10 * time.Second})
	w := &tracedResponse{ResponseRecorder: httptest.NewRecorder(), line: []byte(line), record: st.add}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(w.Body.String(), line) {
		t.Fatalf("the scrape has no %s", line)
	}
	if len(st.all) != 2 {
		t.Fatalf("%d stacks recorded, want the read's and the write's", len(st.all))
	}
	got := st.files(t)
	t.Logf("a counter runs through %d files: %s", len(got), strings.Join(got, ", "))
	if !slices.Equal(got, counterPath) {
		t.Errorf("a counter runs through\n\t%s\nwant (counterPath, docs/architecture.md's \"Follow a counter\")\n\t%s",
			strings.Join(got, "\n\t"), strings.Join(counterPath, "\n\t"))
	}
}

// pathChild marks TestCounterPath's traced run.
const pathChild = "RDMA_DOCTOR_COUNTER_PATH_CHILD"

// stacks are the call stacks recorded, ancestors included, as text.
type stacks struct {
	mu  sync.Mutex
	all []string
}

func (s *stacks) add() {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, false)]
	s.mu.Lock()
	s.all = append(s.all, string(buf))
	s.mu.Unlock()
}

// files is the module's non-test files in the stacks, relative to the
// module root, each once, in counterPath's order (the others after).
// hostfs's attr.go is left out: it is the fallback an FS that is not the
// real directory's takes (tracedFS here), where the server reads in
// kept.go.
func (s *stacks) files(t *testing.T) []string {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(filepath.Dir(self)))
	seen := map[string]bool{}
	for _, st := range s.all {
		if !strings.Contains(st, "[originating from goroutine") {
			t.Fatal("no ancestor in the stack: GODEBUG=tracebackancestors is not on")
		}
		for _, l := range strings.Split(st, "\n") {
			l = strings.TrimSpace(l)
			f, _, ok := strings.Cut(l, ".go:")
			if !ok || !strings.HasPrefix(l, "/") {
				continue
			}
			rel, err := filepath.Rel(root, f+".go")
			if err != nil || strings.HasPrefix(rel, "..") || strings.HasSuffix(rel, "_test.go") {
				continue
			}
			if rel = filepath.ToSlash(rel); rel != "internal/hostfs/attr.go" {
				seen[rel] = true
			}
		}
	}
	var out []string
	for _, f := range counterPath {
		if seen[f] {
			out = append(out, f)
			delete(seen, f)
		}
	}
	out = append(out, slices.Sorted(maps.Keys(seen))...)
	if len(out) == 0 {
		t.Fatal("no frame of this module recorded")
	}
	return out
}

// tracedFS records the stack that reads name.
type tracedFS struct {
	hostfs.FS
	name   string
	record func()
}

func (f tracedFS) ReadFile(name string) ([]byte, error) {
	if name == f.name {
		f.record()
	}
	return f.FS.ReadFile(name)
}

func (f tracedFS) ReadDir(name string) ([]fs.DirEntry, error) { return f.FS.ReadDir(name) }

// tracedResponse records the stack that writes line.
type tracedResponse struct {
	*httptest.ResponseRecorder
	line   []byte
	record func()
	seen   bool
}

func (w *tracedResponse) Write(p []byte) (int, error) {
	if !w.seen && bytes.Contains(p, w.line) {
		w.seen = true
		w.record()
	}
	return w.ResponseRecorder.Write(p)
}
