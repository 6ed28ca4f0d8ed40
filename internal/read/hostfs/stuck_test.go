// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// guard is how long a test waits for something that should happen at
// once before it fails: a failure guard, not a timing assertion.
const guard = time.Minute

// blocker is a test hook that holds the first read of one path inside
// the FS, registered as in flight, until released: a read stuck in a
// driver. Later reads of the path pass.
type blocker struct {
	path    string
	entered chan struct{} // closed when the held read is inside
	release chan struct{} // closed by the test to let it return
	once    sync.Once
}

func block(d *dirFS, name string) *blocker {
	b := &blocker{path: d.path(name), entered: make(chan struct{}), release: make(chan struct{})}
	d.hook = func(p string) {
		if p != b.path {
			return
		}
		held := false
		b.once.Do(func() { held = true })
		if held {
			close(b.entered)
			<-b.release
		}
	}
	return b
}

type result struct {
	b   []byte
	err error
}

// readAsync reads name in a goroutine and waits until the blocker holds
// it.
func readAsync(t *testing.T, d *dirFS, b *blocker, name string) chan result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		got, err := d.ReadFile(name)
		done <- result{got, err}
	}()
	select {
	case <-b.entered:
	case r := <-done:
		t.Fatalf("read of %s returned without being held: %q, %v", name, r.b, r.err)
	case <-time.After(guard):
		t.Fatalf("read of %s never reached the hook", name)
	}
	return done
}

func wait(t *testing.T, done chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(guard):
		t.Fatal("released read did not return")
		return result{}
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func stats(t *testing.T, f FS) ReadStats {
	t.Helper()
	s, ok := Stats(f)
	if !ok {
		t.Fatal("Dir's FS is not Guarded")
	}
	return s
}

// A read that does not return makes the next reads of its path fail at
// once with ErrStuck, naming the path, and counted, while other paths
// read as usual; once it returns, the path reads again.
func TestStuckRead(t *testing.T) {
	dir := writeFiles(t, map[string]string{"stuck": "1\n", "other": "2\n"})
	d := Dir(dir).(*dirFS)
	// 0: any read still in flight counts as stuck, so the test needs no
	// clock.
	if !SetStuckAfter(d, 0) {
		t.Fatal("SetStuckAfter: Dir's FS is not Guarded")
	}
	b := block(d, "stuck")
	first := readAsync(t, d, b, "stuck")

	for i := range 2 {
		_, err := d.ReadFile("stuck")
		var se *StuckError
		if !errors.Is(err, ErrStuck) || !errors.As(err, &se) || se.Path != d.path("stuck") || se.Op != "read" || se.For < 0 {
			t.Fatalf("read %d of the stuck path: %v, want a *StuckError for %s", i+2, err, d.path("stuck"))
		}
	}
	// The registry is by path: a directory read of it is refused too.
	if _, err := d.ReadDir("stuck"); !errors.Is(err, ErrStuck) {
		t.Errorf("ReadDir of the stuck path: %v, want ErrStuck", err)
	}
	if got, err := d.ReadFile("other"); err != nil || string(got) != "2\n" {
		t.Errorf("another path while one is stuck: %q, %v", got, err)
	}
	if s := stats(t, d); s != (ReadStats{Refused: 3, Stuck: 1, InFlight: 1}) {
		t.Errorf("while stuck: %+v, want 3 refused, 1 stuck, 1 in flight", s)
	}

	close(b.release)
	if r := wait(t, first); r.err != nil || string(r.b) != "1\n" {
		t.Errorf("the stuck read, released: %q, %v", r.b, r.err)
	}
	if got, err := d.ReadFile("stuck"); err != nil || string(got) != "1\n" {
		t.Errorf("the path after its read returned: %q, %v", got, err)
	}
	if s := stats(t, d); s != (ReadStats{Refused: 3}) {
		t.Errorf("after release: %+v, want 3 refused and nothing stuck or in flight", s)
	}
}

// Below the threshold a second read of a path in flight goes ahead (two
// scrapes at once are no fault); above it, it is refused.
func TestStuckAfter(t *testing.T) {
	dir := writeFiles(t, map[string]string{"slow": "1\n"})
	d := Dir(dir).(*dirFS)
	SetStuckAfter(d, time.Hour)
	b := block(d, "slow")
	first := readAsync(t, d, b, "slow")
	if got, err := d.ReadFile("slow"); err != nil || string(got) != "1\n" {
		t.Errorf("a second read of a path in flight for less than an hour: %q, %v", got, err)
	}
	if s := stats(t, d); s != (ReadStats{InFlight: 1}) {
		t.Errorf("one read in flight for less than an hour: %+v, want 1 in flight, none stuck", s)
	}
	SetStuckAfter(d, 0)
	if _, err := d.ReadFile("slow"); !errors.Is(err, ErrStuck) {
		t.Errorf("after SetStuckAfter(0): %v, want ErrStuck", err)
	}
	if s := stats(t, d); s != (ReadStats{Refused: 1, Stuck: 1, InFlight: 1}) {
		t.Errorf("after SetStuckAfter(0): %+v", s)
	}
	close(b.release)
	wait(t, first)
}

// Two reads of one path in flight: the entry stays until both return,
// and when the oldest returns first the other is not counted as stuck
// from the oldest's start.
func TestRegistryOverlap(t *testing.T) {
	r := newRegistry()
	r.setStuckAfter(time.Hour)
	a, err := r.begin("read", "p")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.begin("read", "p")
	if err != nil {
		t.Fatalf("second read under the threshold: %v", err)
	}
	r.end("p", a)
	if e := r.paths["p"]; e.n != 1 || e.start < b {
		t.Errorf("after the oldest returned: %+v, want 1 in flight started no earlier than %v", e, b)
	}
	r.end("p", b)
	if len(r.paths) != 0 {
		t.Errorf("after both returned: %v, want empty", r.paths)
	}
}

// Stats and SetStuckAfter say so for an FS that keeps no registry.
func TestStatsOfOtherFS(t *testing.T) {
	f := onlyReadFile{Dir(t.TempDir())}
	if _, ok := Stats(f); ok {
		t.Error("Stats of a wrapper that hides Dir: ok")
	}
	if SetStuckAfter(f, time.Second) {
		t.Error("SetStuckAfter of a wrapper that hides Dir: ok")
	}
}

// The message names the path and stays the same while the same read is
// stuck, so a log-once logger logs it once.
func TestStuckErrorMessage(t *testing.T) {
	since := time.Date(2026, 12, 1, 15, 4, 5, 6e6, time.UTC)
	a := &StuckError{Op: "read", Path: "/sys/x", Since: since, For: time.Second}
	b := &StuckError{Op: "read", Path: "/sys/x", Since: since, For: time.Minute}
	want := "read /sys/x: read stuck: a read started at 2026-12-01T15:04:05.006Z has not returned; not retried until it does"
	if a.Error() != want || b.Error() != want {
		t.Errorf("messages %q and %q, want %q", a.Error(), b.Error(), want)
	}
}

// A Host sums its file systems' counts and skips those that keep none.
func TestHostReadStats(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a": "1\n"})
	sys, proc := Dir(dir).(*dirFS), Dir(dir).(*dirFS)
	SetStuckAfter(sys, 0)
	SetStuckAfter(proc, 0)
	h := Host{Root: onlyReadFile{Dir(dir)}, Sys: sys, Proc: proc}
	var held []chan result
	var blockers []*blocker
	for _, d := range []*dirFS{sys, proc} {
		b := block(d, "a")
		blockers = append(blockers, b)
		held = append(held, readAsync(t, d, b, "a"))
		if _, err := d.ReadFile("a"); !errors.Is(err, ErrStuck) {
			t.Fatalf("second read: %v, want ErrStuck", err)
		}
	}
	if s := h.ReadStats(); s != (ReadStats{Refused: 2, Stuck: 2, InFlight: 2}) {
		t.Errorf("Host.ReadStats = %+v, want 2 refused, 2 stuck, 2 in flight", s)
	}
	for i, b := range blockers {
		close(b.release)
		wait(t, held[i])
	}
	if s := h.ReadStats(); s != (ReadStats{Refused: 2}) {
		t.Errorf("after release: %+v", s)
	}
}
