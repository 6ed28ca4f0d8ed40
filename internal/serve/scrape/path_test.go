// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bytes"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/collector"
	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// counterPath is the packages a port counter runs through, from its sysfs
// file to the HTTP answer, by name, in the order docs/architecture.md's
// "Follow a counter" walks them: the read's stack (hostfs's bounded read,
// parsed by infiniband, read once per collection by host, turned into a
// series by collector, all on behalf of the scrape's request), then the
// write's (expo writes the line, in the scrape's handler). Which file of
// a package holds a function is not pinned: files move freely.
var counterPath = struct{ read, write []string }{
	read:  []string{"hostfs", "infiniband", "host", "collector", "scrape"},
	write: []string{"expo", "scrape"},
}

// The packages a counter's call stacks pass through, goroutines' ancestors
// included (GODEBUG=tracebackancestors, which the runtime reads only at
// start: the test runs itself again with it): when its file is read and
// when its line is written to the response. The read must go through
// hostfs (every read is bounded) inside the scrape's request, and each
// stack must meet its packages in counterPath's order. The files are
// logged, for the reader of "Follow a counter". The infiniband collector
// runs alone: in a default scrape the class is read, once, by whichever
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
	p, err := hostfs.Paths{Rootfs: filepath.Join("..", "..", "..", "fixtures", "hosts", "dgx-h100")}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	const file = "class/infiniband/mlx5_0/ports/1/counters/port_xmit_data"
	const line = `rdma_port_data_transmitted_bytes_total{device="mlx5_0",port="1"}`
	var read, write stacks
	fsys := p.Open()
	fsys.Sys = tracedFS{FS: fsys.Sys, name: file, record: read.add}
	logger := slog.New(slog.DiscardHandler)
	agg, err := collector.New(collector.Env{Host: rdmahost.New(rdmahost.Options{Paths: p, FS: &fsys}), Config: &config.Config{}, Logger: logger},
		collector.DefaultFlags(), 10*time.Second, "infiniband")
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Collect: agg.Metrics, Logger: logger, Timeout: 10 * time.Second})
	w := &tracedResponse{ResponseRecorder: httptest.NewRecorder(), line: []byte(line), record: write.add}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(w.Body.String(), line) {
		t.Fatalf("the scrape has no %s", line)
	}
	for _, c := range []struct {
		what string
		s    *stacks
		want []string
	}{{"read", &read, counterPath.read}, {"write", &write, counterPath.write}} {
		if len(c.s.all) != 1 {
			t.Fatalf("%d stacks recorded for the %s, want one", len(c.s.all), c.what)
		}
		fr := frames(t, c.s.all[0])
		if got := packages(fr); !isSubsequence(c.want, got) {
			t.Errorf("the %s's stack, innermost first, passes through the packages\n\t%s\nwant, in this order (counterPath, docs/architecture.md's \"Follow a counter\")\n\t%s",
				c.what, strings.Join(got, " "), strings.Join(c.want, " "))
		}
		t.Logf("a counter runs through (%s) %s", c.what, strings.Join(files(fr), ", "))
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

// frame is one non-test function of this module in a stack: its
// package's name and its file, relative to the module root.
type frame struct{ pkg, file string }

// frames is the module's non-test frames of a stack, innermost first,
// goroutines' ancestors included.
func frames(t *testing.T, st string) []frame {
	t.Helper()
	if !strings.Contains(st, "[originating from goroutine") {
		t.Fatal("no ancestor in the stack: GODEBUG=tracebackancestors is not on")
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path == "" {
		t.Fatal("no module path in the test binary's build info")
	}
	mod := bi.Main.Path + "/"
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(self))))
	var out []frame
	lines := strings.Split(st, "\n")
	// A function line ("pkg/path.Func(args)", or "created by pkg/path.Func
	// in goroutine N") is followed by its "\t/file.go:line" line.
	for i := 0; i+1 < len(lines); i++ {
		fn := strings.TrimPrefix(strings.TrimSpace(lines[i]), "created by ")
		loc := strings.TrimSpace(lines[i+1])
		if !strings.HasPrefix(fn, mod) || !strings.HasPrefix(loc, "/") {
			continue
		}
		f, _, _ := strings.Cut(loc, ".go:")
		rel, err := filepath.Rel(root, f+".go")
		if err != nil || strings.HasPrefix(rel, "..") || strings.HasSuffix(rel, "_test.go") {
			continue
		}
		// The package's name: the path's last element, up to the dot
		// before the function's name.
		head, _, _ := strings.Cut(fn, "(")
		name := head[strings.LastIndex(head, "/")+1:]
		name, _, _ = strings.Cut(name, ".")
		out = append(out, frame{pkg: name, file: filepath.ToSlash(rel)})
	}
	if len(out) == 0 {
		t.Fatal("no frame of this module recorded")
	}
	return out
}

// packages is the frames' packages, a run of frames in one package once.
func packages(fr []frame) []string {
	var out []string
	for _, f := range fr {
		if len(out) == 0 || out[len(out)-1] != f.pkg {
			out = append(out, f.pkg)
		}
	}
	return out
}

// files is the frames' files, each once, innermost first.
func files(fr []frame) []string {
	var out []string
	for _, f := range fr {
		if !slices.Contains(out, f.file) {
			out = append(out, f.file)
		}
	}
	return out
}

// isSubsequence reports whether want appears in got in order, other
// elements allowed between.
func isSubsequence(want, got []string) bool {
	for _, g := range got {
		if len(want) > 0 && g == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
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
