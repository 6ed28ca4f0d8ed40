// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
)

// ran is the goroutines that have run a function of goTracked.
var ran sync.Map

// goTracked is Go, recording the goroutine f runs on.
func goTracked(f func()) {
	Go(func() {
		ran.Store(goroutineID(), true)
		f()
	})
}

// goroutineID is the running goroutine's number, from its stack header
// ("goroutine 7 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// await fails the test if ch is not ready well after it should be: a
// hang guard, not a timing assertion.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("%s: nothing after %v", what, guard)
		var zero T
		return zero
	}
}

func TestGoReusesWorker(t *testing.T) {
	first := make(chan struct{})
	goTracked(func() { close(first) })
	await(t, first, "first function")

	// A blocking hand-over: it is taken only by a worker waiting for the
	// next function, which a goroutine that exited after its one
	// function never is. Any worker may take it: the other test's too.
	second := make(chan string, 1)
	handed := make(chan struct{})
	go func() {
		idle <- func() { second <- goroutineID() }
		close(handed)
	}()
	await(t, handed, "hand-over to a waiting worker")
	if id := await(t, second, "second function"); !isWorker(id) {
		t.Errorf("second function ran on goroutine %s, which ran no function before", id)
	}
}

func isWorker(id string) bool {
	_, ok := ran.Load(id)
	return ok
}

func TestGoWedgedWorkerBlocksNothing(t *testing.T) {
	release := make(chan struct{})
	wedged := make(chan struct{})
	goTracked(func() { close(wedged); <-release })
	await(t, wedged, "wedged function started")
	defer close(release)

	done := make(chan struct{})
	goTracked(func() { close(done) })
	await(t, done, "function started beside a wedged worker")
}

// A burst of parallel work (parallel scrapes) leaves at most MaxIdleWorkers
// workers waiting: the rest exit, and their grown stacks with them.
func TestGoKeepsAtMostMaxIdle(t *testing.T) {
	const burst = 4 * MaxIdleWorkers
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(burst)
	finished.Add(burst)
	for range burst {
		Go(func() {
			started.Done()
			<-release
			finished.Done()
		})
	}
	started.Wait()
	close(release)
	finished.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The workers of the burst either wait (at most MaxIdleWorkers) or exit.
		if n := waiting.Load(); n <= MaxIdleWorkers && runtime.NumGoroutine() < MaxIdleWorkers+burst/2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers waiting, %d goroutines after a burst of %d: want at most %d waiting", waiting.Load(), runtime.NumGoroutine(), burst, MaxIdleWorkers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
